"""``rankwise explain``: one case of a records file, explained."""

from __future__ import annotations

import click

from rankwise.cli._base import main


@main.command("explain")
@click.argument("records_path", metavar="RECORDS", type=click.Path(dir_okay=False))
@click.argument("case_id", metavar="CASE_ID")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Cutoff a hit must be within (for the failure class).")
@click.option("--source", "sources", multiple=True,
              help="Verdict source to show, repeatable (default: every source in the records).")
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Show only the first N chunks in the table (default: all; JSON always has all).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def explain_command(records_path, case_id, k, sources, top, fmt):
    """Explain one case of RECORDS (from eval-rag/judge --records): its reference passages, the
    ranked chunks with the reference text highlighted inside each, every source's verdict and
    reason, the rank of the first relevant chunk and the failure class (docs/failures.md)."""
    import json

    from rankwise.analysis.explain import explain_case
    from rankwise.data.records import load_records

    explanation = explain_case(load_records(records_path), case_id, k=k,
                               sources=[s for x in sources for s in x.split(",") if s.strip()] or None)
    if fmt == "json":
        click.echo(json.dumps(explanation.to_json(), indent=2, ensure_ascii=False))
        return
    from rankwise.report.explain_console import print_explanation

    print_explanation(explanation, top=top)
