"""``rankwise plan-labels`` and ``sample-labels``, and the ``--ppi`` output of ``eval-rag``,
``compare-rag`` and ``gate``: prediction-powered means anchored by a few human labels (docs/ppi.md).
"""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _fail, _split_metrics, main


def _ppi_unsupported(**given) -> None:
    """Options that --ppi does not use: a one-line error rather than silently ignoring them."""
    from rankwise.errors import InputError

    used = [name for name, value in given.items() if value]
    if used:
        raise InputError(f"{', '.join(used)} {'is' if len(used) == 1 else 'are'} not available with --ppi")


def _emit_ppi(result, fmt: str) -> None:
    """Print a PPI result: JSON, or the text lines (tables and CSV read the same lines)."""
    if fmt == "json":
        import json

        click.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    elif fmt == "csv":
        from rankwise.report.ppi_text import ppi_csv

        click.echo(ppi_csv(result), nl=False)
    else:
        from rankwise.report.ppi_text import ppi_lines

        click.echo("\n".join(ppi_lines(result)))


@main.command("plan-labels")
@click.argument("records", type=click.Path(dir_okay=False))
@click.option("--relevance", "--source", "relevance", default="llm", show_default=True,
              help="The judge's verdict source in RECORDS.")
@click.option("--labels", type=click.Path(dir_okay=False), help="Pilot human labels (default: human verdicts in "
                                                                 "RECORDS).")
@click.option("-m", "--metric", "metrics", multiple=True, help="Metric to plan for, repeatable or comma-separated.")
@click.option("--half-width", type=float, required=True, help="Wanted half-width of the interval, in metric units.")
@click.option("--price-per-label", type=float, default=None, help="Price of one human-labelled case.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - confidence level.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def plan_labels_command(records, relevance, labels, metrics, half_width, price_per_label, alpha, fmt):
    """How many human-labelled cases give a PPI++ interval of --half-width, from a pilot (cases with
    both sources), beside human labels alone and labelling every case."""
    from pathlib import Path

    from rankwise.analysis.ppi import plan_from_records

    if price_per_label is not None and not price_per_label >= 0:
        _fail(f"--price-per-label must be >= 0, got {price_per_label}")
    plans = plan_from_records(records, relevance, labels=labels, metrics=_split_metrics(metrics) or None,
                              half_width=half_width, alpha=alpha, price_per_label=price_per_label,
                              system=Path(records).stem)
    if fmt == "json":
        import json

        click.echo(json.dumps([p.to_dict() for p in plans], indent=2))
    else:
        from rankwise.report.ppi_text import ppi_plan_lines

        click.echo("\n".join(ppi_plan_lines(plans)))


@main.command("sample-labels")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--relevance", "--source", "relevance", default="llm", show_default=True,
              help="The judge's verdict source: strata are its case verdicts (hit / miss / incomplete).")
@click.option("-n", "n", type=int, required=True, help="Questions to label (every chunk of each, in every system).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--name", "names", multiple=True, help="System name per RECORDS file (default: file stems).")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Labelling sheet (CSV).")
@click.option("--fill-from", default=None, help="Fill the verdicts from this stored source (simulations and "
                                                "worked examples only; never for a sheet a person labels).")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def sample_labels_command(records, relevance, n, seed, names, out, fill_from, force):
    """Write a labelling sheet: a seeded random sample of questions, stratified by system and judge
    verdict; `--labels SHEET` reads it back once the verdict column is filled."""
    from rankwise._outputs import check_outputs
    from rankwise.analysis.compare import load_record_sets
    from rankwise.analysis.label_sample import label_sheet_rows, sample_cases, write_label_sheet

    check_outputs({"--out": out}, list(records), force=force)
    sets = load_record_sets(list(records), list(names) or None, source=relevance)
    picked = sample_cases(sets, n, judge=relevance, seed=seed)
    rows = label_sheet_rows(sets, picked, fill_from=fill_from)
    write_label_sheet(rows, out)
    click.echo(f"{out}: {len(picked)} questions, {len(rows)} chunks to label (seed {seed})", err=True)


def _ppi_gate(baseline_path, candidate_path, metrics, floors, relevance, labels, max_drop, alpha,
              allow_query_mismatch, fmt, qrels=None) -> None:
    """``gate --ppi``: paired PPI of candidate − baseline; exit 1 fail, 2 undecided, 0 pass."""
    from rankwise.analysis.compare import load_record_sets
    from rankwise.analysis.ppi import ppi_gate
    from rankwise.errors import InputError

    if floors or qrels:
        raise InputError(f"{'--min floors are' if floors else '--qrels is'} not used with --ppi (it compares RAG "
                         "records judged by --relevance and anchored by --labels); gate with --max-drop",
                         field="min" if floors else "qrels")
    source = relevance or "llm"
    sets = load_record_sets([baseline_path, candidate_path], None, source=source)
    result = ppi_gate(sets, source, labels=labels, metrics=_split_metrics(metrics) or None, max_drop=max_drop,
                      alpha=alpha, allow_mismatch=allow_query_mismatch)
    if fmt == "json":
        import json

        click.echo(json.dumps({"verdicts": result.verdicts, "exit_code": result.exit_code,
                               **result.result.to_json()}, indent=2, ensure_ascii=False))
    else:
        from rankwise.report.ppi_text import ppi_gate_lines

        click.echo("\n".join(ppi_gate_lines(result)))
    sys.exit(result.exit_code)
