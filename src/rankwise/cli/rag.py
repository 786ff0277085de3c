"""``rankwise eval-rag``, ``probe`` and ``agree``: RAG context metrics over records."""

from __future__ import annotations

import click

from rankwise._words import count
from rankwise.cli._base import _log_mlflow, _mlflow_options, _print_result, _split_metrics, main
from rankwise.cli.ppi import _emit_ppi, _ppi_unsupported


@main.command("eval-rag")
@_mlflow_options
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--relevance", "-r", default="containment", show_default=True,
              help="Verdict source: containment, span, fuzzy, ids, human, llm (or a source in a records file).")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Human labels (CSV/JSONL) for --relevance human; graded qrels for --relevance ids.")
@click.option("-k", "ks", default=None, help="Cutoffs of the default metrics, comma-separated [default: 1,3,5,10].")
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric name, repeatable or comma-separated (wcp@5, acp(ragas_compat=true)@5, char_recall@5 ...).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--records", "records_out", type=click.Path(dir_okay=False),
              help="Write per-case records (JSONL: chunks, verdicts, scores) here.")
@click.option("--per-query", "-q", is_flag=True, help="Also print each case's values.")
@click.option("--min-overlap", type=float, default=0.5, show_default=True, help="Span mode: overlap share.")
@click.option("--threshold", type=float, default=0.8, show_default=True, help="Fuzzy mode: similarity threshold.")
@click.option("--min-evidence-chars", type=click.IntRange(min=0), default=None,
              help="Containment/fuzzy: letters/digits a chunk lying inside a reference passage must hold to "
                   "count (0: any fragment counts; default 20). Given, it also re-judges containment/fuzzy "
                   "verdicts stored in records.")
@click.option("--id-field", type=click.Choice(["id", "doc_id"]), default=None,
              help="Ids mode: compare chunk ids or document ids (default: id, else doc_id).")
@click.option("--unscorable", type=click.Choice(["skip", "zero"]), default="skip", show_default=True,
              help="Cases with no ground truth (unanswerable): leave out of the retrieval means, as trec_eval "
                   "does unjudged queries, or score 0 (zero). A case with no chunk scores 0 either way.")
@click.option("--incomplete", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Cases with failed/missing verdicts: count those as not relevant, or leave the case out.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
@click.option("--ppi", is_flag=True, help="Prediction-powered means: --relevance verdicts on every case corrected by "
                                          "the human --labels (docs/ppi.md).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="With --ppi: 1 - confidence level.")
@click.option("--by", "by", default=None, metavar="FIELD",
              help="Also the means per slice of the cases by FIELD of the test set (style, difficulty ...), with "
                   "bootstrap intervals (docs/eval.md); `--by class`: by failure class (docs/failures.md).")
@click.option("--first-stage", type=click.Path(dir_okay=False),
              help="The same cases retrieved before reranking (test set or records): cases a reranker pushed "
                   "out of the top K are classed 'demoted by the reranker' (docs/failures.md).")
def eval_rag_command(testset, relevance, labels, ks, metrics, fmt, records_out, per_query, min_overlap,
                     threshold, min_evidence_chars, id_field, unscorable, incomplete, quiet, force, ppi, alpha,
                     by, first_stage, mlflow_opts):
    """Score the retrieved contexts of a RAG test set (JSONL/CSV, Ragas or rich format) or of a
    records file written by `rankwise judge` / `--records`."""
    from rankwise._outputs import check_outputs
    from rankwise.analysis.rag_columns import evaluate_rag_diagnosed
    from rankwise.errors import InputError

    check_outputs({"--records": records_out}, [testset, labels, first_stage], force=force)
    try:
        cutoffs = None if ks is None else [int(x) for x in ks.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"-k takes comma-separated integers, got {ks!r}", field="k") from None
    if ppi:
        from pathlib import Path

        from rankwise.analysis.ppi import ppi_records

        _ppi_unsupported(**{"--records": records_out, "--per-query": per_query, "--mlflow": mlflow_opts["log"],
                            "--by": by})

        _emit_ppi(ppi_records(testset, relevance, labels=labels, k=cutoffs, metrics=_split_metrics(metrics) or None,
                              alpha=alpha, unscorable=unscorable, incomplete=incomplete,
                              system=Path(testset).stem, min_overlap=min_overlap, threshold=threshold,
                              id_field=id_field), fmt)
        return
    result = evaluate_rag_diagnosed(testset, relevance, labels=labels, k=cutoffs,
                                    metrics=_split_metrics(metrics) or None, min_overlap=min_overlap,
                                    threshold=threshold, id_field=id_field, unscorable=unscorable,
                                    incomplete=incomplete, progress=not quiet, min_evidence_chars=min_evidence_chars,
                                    first_stage=first_stage,
                                    records=bool(records_out or by or mlflow_opts["log"]))
    slices = _slices(result, by)
    if records_out:
        result.write_records(records_out)
    if fmt == "table":
        from rankwise.report.rag_console import print_rag

        print_rag(result, per_query=per_query)
        if records_out:
            click.echo(f"records: {records_out} ({count(len(result.records), 'case')})", err=True)
    else:
        _print_result(result, fmt, per_query)
    if slices is not None:
        from rankwise.report.slices import emit_slices

        emit_slices(slices, fmt)
    _log_mlflow(mlflow_opts, result, records=records_out)


def _slices(result, by: str | None):
    """``--by FIELD``: the result's slices (also put in its JSON summary), or None."""
    if by is None:
        return None
    from rankwise.analysis.diagnosis import slice_by

    return slice_by(result, by)


@main.command("probe")
@click.option("--verdicts", "verdicts_text", help="Ordered verdicts (0/1 or grades), e.g. 1,0,1.")
@click.option("--records", "records_path", type=click.Path(dir_okay=False),
              help="Per-case records (JSONL from eval-rag/judge --records).")
@click.option("--sources", default=None, help="With --records: one or two verdict sources, e.g. human,llm.")
@click.option("-m", "--metric", "metrics", multiple=True, help="Metric name, repeatable or comma-separated.")
@click.option("-k", "k", type=int, default=None, help="Cutoff for the default metrics (default: list length).")
@click.option("--n-relevant", "-R", type=int, default=None,
              help="With --verdicts: R for recall and nDCG's ideal (default: relevant items in the list).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--per-query", "-q", is_flag=True, help="With --records: one row per case and metric.")
def probe_command(verdicts_text, records_path, sources, metrics, k, n_relevant, fmt, per_query):
    """Rank effect vs verdict effect: best/worst score over re-orderings, the delta of flipping each
    verdict, and (two sources) the verdict-attributable difference per case and on average."""
    import json

    from rankwise.analysis.probe import parse_verdicts, probe_records, probe_verdicts
    from rankwise.errors import InputError

    if (verdicts_text is None) == (records_path is None):
        raise InputError("give either --verdicts 1,0,1 or --records FILE", field="verdicts")
    names = _split_metrics(metrics) or None
    if verdicts_text is not None:
        result = probe_verdicts(parse_verdicts(verdicts_text), names, k=k, n_relevant=n_relevant)
        if fmt == "json":
            click.echo(json.dumps(result.to_json(), indent=2))
        else:
            from rankwise.report.probe_console import print_probe

            print_probe(result)
        return
    from rankwise.data.records import load_records

    records = load_records(records_path)
    if sources:
        chosen = [s.strip() for s in sources.split(",") if s.strip()]
    else:
        chosen = sorted({s for r in records for s in r.sources()})
        if len(chosen) > 2:
            raise InputError(f"the records hold verdicts from {chosen}; pick one or two with --sources",
                             field="sources")
    comp = probe_records(records, chosen, names, k=k)
    if fmt == "json":
        click.echo(json.dumps(comp.to_json(per_case=per_query), indent=2))
    else:
        from rankwise.report.probe_console import print_probe_comparison

        print_probe_comparison(comp, per_case=per_query)


@main.command("agree")
@click.argument("records_path", metavar="RECORDS", type=click.Path(dir_okay=False))
@click.option("--a", "source_a", default="human", show_default=True, help="Reference verdict source.")
@click.option("--b", "source_b", default="llm", show_default=True, help="Verdict source compared with it.")
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metrics for the verdict effect (default: P@k, wcp@k, acp@k, ndcg@k, mrr).")
@click.option("-k", "k", type=int, default=None, help="Cutoff for the default metrics (default: deepest case).")
@click.option("--show", type=int, default=20, show_default=True, help="Disagreements to list (all in json).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def agree_command(records_path, source_a, source_b, metrics, k, show, fmt):
    """How far two verdict sources in RECORDS agree: accuracy, Cohen's kappa, confusion matrix, by
    human type label, the disagreeing chunks with both reasons, and each metric's score difference
    due to verdicts."""
    import json

    from rankwise.analysis.probe import probe_records
    from rankwise.data.records import load_records
    from rankwise.relevance.agreement import agreement

    records = load_records(records_path)
    agr = agreement(records, source_a, source_b)
    comp = probe_records(records, [source_a, source_b], _split_metrics(metrics) or None, k=k)
    effects = {name: {key: row[key] for key in (source_a, source_b, "verdict_effect")}
               for name, row in comp.mean.items()}
    if fmt == "json":
        out = agr.to_dict()
        out["verdict_effect"] = effects
        out["r_basis"] = comp.r_basis
        out["incomplete_cases"] = comp.incomplete
        click.echo(json.dumps(out, indent=2))
        return
    from rankwise.report.judge_console import print_agreement

    print_agreement(agr, effects, show=show)
    click.echo("R (recall, nDCG's ideal): " + "; ".join(f"{s}: {b}" for s, b in comp.r_basis.items()))
    if comp.incomplete:
        n = len(comp.incomplete)
        click.echo(f"note: {n} case{' has' if n == 1 else 's have'} failed/missing verdicts, counted as not "
                   f"relevant in the verdict effect")
