"""The ``rankwise`` command line: parses arguments, calls the library, prints.

Heavy modules are imported inside each command, so ``rankwise eval`` starts fast.
"""

from __future__ import annotations

import sys

import click

from rankwise.errors import RankwiseError

FORMATS = ["table", "json", "csv", "trec"]


class _Group(click.Group):
    """A click group that turns our errors into one line on stderr and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RankwiseError as exc:
            click.echo(f"rankwise: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("rankwise: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rankwise")
def main() -> None:
    """Evaluate the retrieval stage of a RAG pipeline: exact IR metrics, RAG context metrics, verdicts
    from any source, comparisons and reports."""


def _split_metrics(values: tuple[str, ...]) -> list[str]:
    """``-m P@5 -m ndcg@10,map`` -> ["P@5", "ndcg@10", "map"] (commas outside parentheses split)."""
    out: list[str] = []
    for v in values:
        depth, cur = 0, ""
        for ch in v:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
    return out


@main.command("eval")
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("run", type=click.Path(dir_okay=False))
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric name, repeatable or comma-separated (ndcg@10, P_5, map ...).")
@click.option("--per-query", "-q", is_flag=True, help="Also print each query's values.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="Grade from which a judgement counts as relevant.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Qrels queries absent from the run: score 0 (trec_eval -c) or skip them.")
def eval_command(qrels, run, metrics, per_query, fmt, relevance_level, missing):
    """Score RUN against QRELS (TREC, BEIR TSV, CSV or JSONL files)."""
    from rankwise.metrics.evaluate import evaluate

    result = evaluate(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                      missing=missing)
    _print_result(result, fmt, per_query)


def _print_result(result, fmt: str, per_query: bool) -> None:
    if fmt == "json":
        from rankwise.report.text import to_json

        click.echo(to_json(result, per_query=per_query))
    elif fmt == "csv":
        from rankwise.report.text import to_csv

        click.echo(to_csv(result, per_query=per_query), nl=False)
    elif fmt == "trec":
        from rankwise.report.text import to_trec

        click.echo(to_trec(result, per_query=per_query), nl=False)
    else:
        from rankwise.report.console import print_eval

        print_eval(result, per_query=per_query)


@main.command("metrics")
def metrics_command():
    """List every metric, its aliases and what it measures."""
    from rich.console import Console
    from rich.table import Table

    from rankwise.metrics.registry import METRICS

    table = Table(title="rankwise metrics")
    for col in ("name", "cutoff", "parameters", "aliases", "definition"):
        table.add_column(col)
    for m in METRICS.values():
        params = ", ".join(f"{k}={v}" for k, v in m.params.items())
        table.add_row(m.name, m.cutoff, params, ", ".join(m.aliases), m.description)
    Console().print(table)


if __name__ == "__main__":  # pragma: no cover
    main()
