"""``rankwise cache stats|clear|merge``: the LLM cache."""

from __future__ import annotations

import click

from rankwise.cli._base import main


@main.group("cache")
def cache_group():
    """The LLM judge's verdict cache: what it holds, and clearing it."""


@cache_group.command("stats")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Cache file (default: $RANKWISE_CACHE, else llm-cache.sqlite in $RANKWISE_CACHE_DIR or ~/.cache/rankwise).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def cache_stats_command(cache_path, fmt):
    """Verdicts stored, per model, mode and prompt version, and the tokens they cost."""
    import json
    from pathlib import Path

    from rankwise.llm.cache import ResponseCache, default_cache_path

    path = Path(cache_path) if cache_path else default_cache_path()
    if not path.exists():
        click.echo(f"no cache at {path} (0 verdicts)")
        return
    with ResponseCache(path) as cache:
        stats = cache.stats()
    if fmt == "json":
        click.echo(json.dumps(stats.__dict__, indent=2))
    else:
        from rankwise.report.judge_console import print_cache_stats

        print_cache_stats(stats)


@cache_group.command("clear")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Cache file (default: $RANKWISE_CACHE, else llm-cache.sqlite in $RANKWISE_CACHE_DIR or ~/.cache/rankwise).")
@click.option("--model", help="Only this model's verdicts.")
@click.option("--prompt-version", help="Only verdicts of this prompt version.")
def cache_clear_command(cache_path, model, prompt_version):
    """Delete cached verdicts (all, or one model's / one prompt version's)."""
    from pathlib import Path

    from rankwise.llm.cache import ResponseCache, default_cache_path

    path = Path(cache_path) if cache_path else default_cache_path()
    if not path.exists():
        click.echo(f"no cache at {path} (nothing to clear)")
        return
    with ResponseCache(path) as cache:
        n = cache.clear(model=model, prompt_version=prompt_version)
        left = len(cache)
    click.echo(f"cleared {n} verdicts from {path} ({left} left)")


@cache_group.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--into", "into", required=True, type=click.Path(dir_okay=False), help="Merged cache file.")
def cache_merge_command(sources, into):
    """Merge verdict caches (e.g. of `judge --shard` workers) into one: identical rows kept once;
    rows that disagree keep the newest and are counted as conflicts."""
    from rankwise._outputs import check_outputs
    from rankwise.llm.shard import merge_caches

    check_outputs({"--into": into}, sources, force=True)  # a cache, read and written: foreign ones it refuses
    r = merge_caches(list(sources), into)
    click.echo(f"merged {len(sources)} caches into {into}: {r.read} rows read, {r.added} added, {r.identical} "
               f"identical kept once, {r.conflicts} conflicts ({r.replaced} replaced by a newer row); "
               f"{r.total} verdicts" + (f"; {r.bad} unusable rows skipped (a verdict no judge gives)" if r.bad else ""))
