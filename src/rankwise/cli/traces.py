"""``rankwise import-traces`` and ``rankwise export-verdicts``: traces in as test sets, verdicts out
to Phoenix."""

from __future__ import annotations

import click

from rankwise.cli._base import main

_FORMATS = ["auto", "otlp", "console", "phoenix", "langsmith", "mlflow"]


def _print_skips(summary: dict, notes: list[str], warnings: list[str] = ()) -> None:
    for line in warnings:
        click.echo(f"  warning: {line}", err=True)
    for why, n in summary["skipped"].items():
        click.echo(f"  skipped: {n} {why}", err=True)
    for note in notes[:3]:
        click.echo(f"    {note}", err=True)
    if len(notes) > 3:
        click.echo(f"    ... and {len(notes) - 3} more", err=True)


@main.command("import-traces")
@click.argument("traces", type=click.Path(dir_okay=False))
@click.option("--out", "-o", "output", required=True, type=click.Path(dir_okay=False),
              help="The test set to write (JSONL), for eval-rag and judge.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="auto", show_default=True,
              help="otlp (OTLP JSON, or OTLP protobuf for a .pb file), console (ConsoleSpanExporter / span.to_json()), phoenix (span dataframe "
                   "as .parquet), langsmith (runs), mlflow (Trace.to_json()); auto: from the file.")
@click.option("--testset", type=click.Path(dir_okay=False),
              help="A RAG test set whose reference passages / ids join the traces they match (by a case_id or "
                   "session.id attribute, else by exact question).")
@click.option("--id-key", help="Metadata field holding a stable chunk id.")
@click.option("--doc-id-key", help="Metadata field holding the document id.")
@click.option("--corpus", type=click.Path(),
              help="The documents the chunks come from (.jsonl, BEIR folder or folder of text files): chunks "
                   "without offsets (LlamaIndex, Haystack, hand-made traces) are located in them, so span "
                   "verdicts apply.")
@click.option("--first-stage", type=click.Path(dir_okay=False),
              help="Also write each case's list before reranking (a RERANKER span's input documents) as a test "
                   "set, for eval-rag --first-stage (docs/failures.md).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file that rankwise did not write.")
@click.option("--quiet", is_flag=True, help="No progress bar (a big trace file shows one on stderr while it is read).")
def import_traces_command(traces, output, fmt, testset, id_key, doc_id_key, corpus, first_stage, force, quiet):
    """Read the retriever spans of a trace export (OpenInference, Phoenix, LangSmith, MLflow) as a
    RAG test set: one case per trace, one retrieval call per retriever span."""
    from rankwise._outputs import check_outputs
    from rankwise.data.traces import import_traces, write_trace_testset
    from rankwise.data.traces.load import write_first_stage

    check_outputs({"--out": output, "--first-stage": first_stage}, [traces, testset, corpus], force=force)
    imp = import_traces(traces, format=fmt, testset=testset, id_key=id_key, doc_id_key=doc_id_key, corpus=corpus,
                        quiet=quiet)
    write_trace_testset(imp, output)
    if first_stage is not None:
        written = write_first_stage(imp, first_stage)
        click.echo(f"{first_stage}: {len(imp.first_stage)} cases' lists before reranking" if written else
                   "  --first-stage: no trace holds a reranker span (RERANKER): nothing written", err=written is None)
    s = imp.summary()
    labelled = f"; {s['labelled_from_testset']} matched in {testset}" if testset else ""
    click.echo(f"{output}: {s['cases']} cases from {traces} ({s['format']}): {s['calls']} retrieval calls, "
               f"{s['multi_call_cases']} cases with more than one{labelled}")
    if testset and s["labelled_from_testset"] < s["cases"]:
        click.echo(f"  {s['cases'] - s['labelled_from_testset']} cases match no test-set case: judge them "
                   "(rankwise judge) or label them", err=True)
    if corpus is not None:
        click.echo(_located(s["located"], corpus))
    elif s["located"].get("in reference passages"):
        n = s["located"]["in reference passages"]
        click.echo(f"  located {n} of {n + s['located'].get('not found', 0)} chunks without offsets in {testset}'s "
                   "reference passages (those that lie in, hold or overlap one); pass --corpus DOCS to locate "
                   "every chunk")
    elif s["chunks_without_offsets"]:
        click.echo(f"  {s['chunks_without_offsets']} of {s['chunks']} chunks carry no offsets in their document "
                   "(LlamaIndex's and Haystack's instrumentors write none): span verdicts cannot judge them; pass "
                   "--corpus DOCS to locate them, or use -r containment", err=True)
    _print_skips(s, imp.notes, imp.warnings())


def _located(counts: dict, corpus: str) -> str:
    placed = counts.get("exact", 0) + counts.get("normalised", 0)
    todo = placed + counts.get("not found", 0)
    line = (f"  located {placed} of {todo} chunks without offsets in {corpus} ({counts.get('exact', 0)} exact, "
            f"{counts.get('normalised', 0)} with whitespace normalised)")
    if counts.get("had offsets"):
        line += f"; {counts['had offsets']} came with offsets"
    if counts.get("not found"):
        line += f"; {counts['not found']} not found: span verdicts cannot judge them"
    return line


@main.command("export-verdicts")
@click.argument("records", type=click.Path(dir_okay=False))
@click.option("--traces", "traces", required=True, type=click.Path(dir_okay=False),
              help="The trace export the records' test set was imported from (import-traces).")
@click.option("--phoenix", "out", required=True, type=click.Path(dir_okay=False),
              help="Document evaluations to write: .parquet (a DataFrame for Phoenix) or .jsonl.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="auto", show_default=True,
              help="Format of --traces.")
@click.option("--testset", type=click.Path(dir_okay=False),
              help="The --testset given to import-traces (it names the cases it matched).")
@click.option("--source", "sources", multiple=True, help="Verdict source(s) to export [default: every one].")
@click.option("--id-key", help="As given to import-traces.")
@click.option("--doc-id-key", help="As given to import-traces.")
@click.option("--corpus", type=click.Path(), help="As given to import-traces.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file that rankwise did not write.")
def export_verdicts_command(records, traces, out, fmt, testset, sources, id_key, doc_id_key, corpus, force):
    """Write the verdicts of a records file (eval-rag --records, judge) as OpenInference document
    evaluations (span id, document position, label, score, explanation) for Phoenix."""
    from rankwise._outputs import check_outputs
    from rankwise.data.records import load_records
    from rankwise.data.traces import document_evaluations, import_traces, write_document_evaluations

    check_outputs({"--phoenix": out}, [records, traces, testset, corpus], force=force)
    imp = import_traces(traces, format=fmt, testset=testset, id_key=id_key, doc_id_key=doc_id_key, corpus=corpus)
    evals = document_evaluations(load_records(records), imp, sources=list(sources) or None, records_source=records)
    write_document_evaluations(evals, out)
    s = evals.summary()
    click.echo(f"{out}: {s['rows']} document evaluations on {s['spans']} retriever spans")
    for line in imp.warnings():
        click.echo(f"  warning: {line}", err=True)
    for why, n in s["not_exported"].items():
        click.echo(f"  not exported: {n} ({why})", err=True)
