"""``rankwise compare``, ``compare-rag`` and ``gate``: systems side by side, and the CI gate."""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _log_mlflow, _mlflow_options, _split_metrics, main
from rankwise.cli.ppi import _emit_ppi, _ppi_gate, _ppi_unsupported


# ------------------------------------------------------------------------ compare / compare-rag /
# gate
def _compare_options(func):
    """Options shared by ``compare`` and ``compare-rag``."""
    options = [
        click.option("--name", "names", multiple=True,
                     help="System name, once per run/records file in order (default: file stems)."),
        click.option("--baseline", default="0", show_default=True,
                     help="Baseline system: name or 0-based index."),
        click.option("-m", "--metric", "metrics", multiple=True,
                     help="Metric name, repeatable or comma-separated."),
        click.option("--test", "tests", multiple=True,
                     type=click.Choice(["randomization", "t", "wilcoxon"]),
                     help="Paired test (default randomization); repeat to report several, the first decides."),
        click.option("--correction", type=click.Choice(["holm", "bonferroni", "none"]), default="holm",
                     show_default=True, help="Multiple-comparison correction across systems x metrics."),
        click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level."),
        click.option("--permutations", type=int, default=10_000, show_default=True,
                     help="Sign flips drawn by the randomization test."),
        click.option("--resamples", type=int, default=10_000, show_default=True,
                     help="Bootstrap resamples for the interval of the mean difference."),
        click.option("--seed", type=int, default=42, show_default=True,
                     help="Seed of the randomization test and the bootstrap."),
        click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "markdown"]),
                     default="table", show_default=True),
        click.option("--per-query", "-q", is_flag=True, help="With --format json: every system's values."),
        click.option("--html", "html_path", type=click.Path(dir_okay=False),
                     help="Write a self-contained HTML report here."),
        click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
                     help="Write a PNG of the k-sweep and per-query deltas here (needs matplotlib)."),
        click.option("--sweep", "sweep_metrics", multiple=True,
                     help="Metric to sweep over K = 1..--max-k (repeatable; default for --html/--plot: "
                          "the first metric with a cutoff)."),
        click.option("--max-k", type=click.IntRange(min=1), default=None,
                     help="Largest K of the sweep [runs: 20; records: deepest chunk list]."),
        click.option("--title", default=None, help="Title of the HTML report."),
        click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _sweep_names(sweep_metrics, metrics, html_path, plot_path) -> list[str]:
    from rankwise.analysis.ksweep import default_sweep_metric

    names = _split_metrics(sweep_metrics)
    if not names and (html_path or plot_path):
        first = default_sweep_metric(metrics)
        names = [first] if first else []
    return names


@main.command("compare")
@_mlflow_options
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_compare_options
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="Grade from which a judgement counts as relevant.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Qrels queries absent from a run: score 0 or skip them.")
@click.option("--queries", "queries_path", type=click.Path(),
              help="Query texts (JSONL or TSV) shown in the HTML drill-down.")
@click.option("--corpus", "corpus_path", type=click.Path(),
              help="Documents (JSONL or BEIR folder) whose text the HTML drill-down shows.")
@click.option("--allow-query-mismatch", is_flag=True,
              help="Compare only the judged queries every run covers (otherwise runs covering different ones "
                   "are an error, exit 2).")
def compare_command(qrels, runs, names, baseline, metrics, tests, correction, alpha, permutations, resamples,
                    seed, fmt, per_query, html_path, plot_path, sweep_metrics, max_k, title, force, relevance_level,
                    missing, queries_path, corpus_path, allow_query_mismatch, mlflow_opts):
    """Compare RUNs on QRELS: means, deltas vs the baseline, paired tests, bootstrap intervals,
    corrected p-values, effect sizes and win/tie/loss counts."""
    from rankwise._outputs import check_outputs
    from rankwise.analysis.compare import compare, system_names
    from rankwise.analysis.ksweep import ksweep
    from rankwise.data.load import load_qrels, load_run
    from rankwise.report.compare_console import emit_comparison

    check_outputs({"--html": html_path, "--plot": plot_path}, [qrels, *runs, queries_path, corpus_path], force=force)
    labels = system_names(list(runs), list(names) or None)
    loaded = [load_run(path, name=label) for path, label in zip(runs, labels, strict=True)]
    judged = load_qrels(qrels)
    result = compare(judged, loaded, _split_metrics(metrics) or None, baseline=baseline, names=labels,
                     test=list(tests) or "randomization", permutations=permutations, seed=seed,
                     correction=correction, alpha=alpha, resamples=resamples, relevance_level=relevance_level,
                     missing=missing, allow_mismatch=allow_query_mismatch)
    sweeps = [ksweep(judged, loaded, m, max_k=max_k or 20, names=labels, relevance_level=relevance_level,
                     missing=missing)
              for m in _sweep_names(sweep_metrics, result.metrics, html_path, plot_path)]
    html_options = {}
    if html_path:
        html_options = {"runs": dict(zip(labels, loaded, strict=True)), "qrels": judged, "queries": queries_path,
                        "corpus": corpus_path, "title": title or f"rankwise compare: {', '.join(result.systems)}"}
    emit_comparison(result, fmt=fmt, sweeps=sweeps, per_query=per_query, html=html_path, plot=plot_path,
                    html_options=html_options)
    _log_mlflow(mlflow_opts, result, html=html_path)


@main.command("compare-rag")
@_mlflow_options
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--source", "--relevance", "source", default="containment", show_default=True,
              help="Verdict source the metrics are computed from (containment, span, fuzzy, ids, human, llm ...).")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Human labels (CSV/JSONL) for --source human; graded qrels for --source ids.")
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="Grade from which an id/qrels grade counts as relevant.")
@click.option("--allow-mismatch", is_flag=True, help="Compare only the cases every file holds.")
@click.option("--min-evidence-chars", type=click.IntRange(min=0), default=None,
              help="Containment/fuzzy: letters/digits a chunk lying inside a reference passage must hold to "
                   "count (0: any fragment counts; default 20). Given, it also re-judges containment/fuzzy "
                   "verdicts stored in records.")
@click.option("--probe-sources", default=None,
              help="HTML probe: one or two verdict sources, e.g. human,llm (default: --source).")
@click.option("--ppi", is_flag=True, help="Paired prediction-powered differences: --source verdicts on every case "
                                          "corrected by the human --labels (docs/ppi.md).")
@click.option("--by", "by", default=None, metavar="FIELD",
              help="Also each system's means and each candidate's differences per slice of the cases by FIELD of the "
                   "test set (style, difficulty ...), with bootstrap intervals (docs/compare.md).")
@_compare_options
def compare_rag_command(records, source, labels, relevance_level, allow_mismatch, min_evidence_chars, probe_sources, ppi,
                        by, names, baseline, metrics, tests, correction, alpha, permutations, resamples, seed, fmt,
                        per_query, html_path, plot_path, sweep_metrics, max_k, title, force, mlflow_opts):
    """Compare RAG systems on per-case RECORDS files (from eval-rag/judge --records) or test sets:
    any metric, computed from the verdicts of one source, cases matched by id."""
    from rankwise._outputs import check_outputs
    from rankwise.analysis.compare import compare_records, load_record_sets
    from rankwise.analysis.ksweep import ksweep_records
    from rankwise.report.compare_console import emit_comparison

    check_outputs({"--html": html_path, "--plot": plot_path}, [*records, labels], force=force)
    if ppi:
        from rankwise.analysis.ppi import ppi_compare

        _ppi_unsupported(**{"--html": html_path, "--plot": plot_path, "--sweep": sweep_metrics, "--test": tests,
                            "--per-query": per_query, "--mlflow": mlflow_opts["log"], "--by": by})

        sets = load_record_sets(list(records), list(names) or None, source=source, relevance_level=relevance_level)
        _emit_ppi(ppi_compare(sets, source, labels=labels, baseline=baseline, metrics=_split_metrics(metrics) or None,
                              alpha=alpha, relevance_level=relevance_level, allow_mismatch=allow_mismatch), fmt)
        return
    sets = load_record_sets(list(records), list(names) or None, source=source, labels=labels,
                            relevance_level=relevance_level, min_evidence_chars=min_evidence_chars)
    result = compare_records(sets, source, _split_metrics(metrics) or None, baseline=baseline,
                             allow_mismatch=allow_mismatch, test=list(tests) or "randomization",
                             permutations=permutations, seed=seed, correction=correction, alpha=alpha,
                             resamples=resamples, relevance_level=relevance_level)
    slices = None
    if by is not None:
        from rankwise.analysis.diagnosis import slice_comparison_by

        slices = slice_comparison_by(result, by, sets)  # also in the JSON summary
    depth = max((len(r.chunks) for recs in sets.values() for r in recs), default=1) or 1
    sweeps = [ksweep_records(sets, source, m, max_k=max_k or depth, relevance_level=relevance_level)
              for m in _sweep_names(sweep_metrics, result.metrics, html_path, plot_path)]
    html_options = {}
    if html_path:
        html_options = {"records": sets, "title": title or f"rankwise compare-rag: {', '.join(result.systems)}",
                        "probe_sources": [s.strip() for s in probe_sources.split(",") if s.strip()]
                        if probe_sources else [source], "slices": slices}
    emit_comparison(result, fmt=fmt, sweeps=sweeps, per_query=per_query, html=html_path, plot=plot_path,
                    html_options=html_options)
    if slices is not None:
        from rankwise.report.slices import emit_slices

        emit_slices(slices, fmt)
    _log_mlflow(mlflow_opts, result, html=html_path, records=list(records))


@main.command("gate")
@_mlflow_options
@click.option("--baseline", "baseline_path", required=True, type=click.Path(dir_okay=False),
              help="Baseline run (with --qrels), saved result (`rankwise eval --format json --per-query`), "
                   "RAG records file or test set.")
@click.option("--candidate", "candidate_path", required=True, type=click.Path(dir_okay=False),
              help="Candidate run (with --qrels), saved result, RAG records file or test set.")
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric to guard, repeatable or comma-separated.")
@click.option("--min", "floors", multiple=True, metavar="METRIC=VALUE",
              help="Absolute floor: fail when the candidate's mean is below VALUE, significant or not "
                   "(repeatable, e.g. --min ndcg@10=0.40).")
@click.option("--relevance", "--source", "relevance", default=None,
              help="Verdict source for RAG records/test sets (default containment).")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Human labels (--relevance human) or graded qrels (--relevance ids) for RAG inputs.")
@click.option("--max-drop", type=float, default=0.01, show_default=True,
              help="Largest tolerated drop of a mean (absolute, in metric units).")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="A drop over budget fails only if significant at this level.")
@click.option("--qrels", type=click.Path(dir_okay=False), help="Qrels, needed when BASE/CAND are runs.")
@click.option("--allow-query-mismatch", is_flag=True,
              help="Compare the shared queries when the query sets differ (otherwise exit 2).")
@click.option("--test", type=click.Choice(["randomization", "t", "wilcoxon"]), default="randomization",
              show_default=True)
@click.option("--correction", type=click.Choice(["none", "holm", "bonferroni"]), default="none",
              show_default=True, help="Correction across the guarded metrics.")
@click.option("--permutations", type=int, default=10_000, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True)
@click.option("--min-evidence-chars", type=click.IntRange(min=0), default=None,
              help="Containment/fuzzy: letters/digits a chunk lying inside a reference passage must hold to "
                   "count (0: any fragment counts; default 20). Given, it also re-judges containment/fuzzy "
                   "verdicts stored in records.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True)
@click.option("--worst", type=int, default=5, show_default=True, help="Most-dropped queries shown per metric.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--ppi", is_flag=True, help="Decide with paired PPI: --relevance verdicts (default llm) on every case "
                                          "corrected by the human --labels (docs/ppi.md).")
def gate_command(baseline_path, candidate_path, metrics, floors, relevance, labels, max_drop, alpha, qrels,
                 allow_query_mismatch, test, correction, permutations, seed, relevance_level, min_evidence_chars,
                 missing, worst, fmt, ppi, mlflow_opts):
    """Fail (exit 1) when a metric drops by more than --max-drop AND the drop is significant, or
    falls below its --min floor; exit 0 otherwise, 2 on bad input (including different query sets).
    """
    from rankwise.analysis.gate import gate, parse_floors

    if ppi:
        typed = click.get_current_context().get_parameter_source
        # the randomization test's options: PPI decides by its own interval, so a value typed here
        # would be ignored
        _ppi_unsupported(**{"--mlflow": mlflow_opts["log"]},
                         **{f"--{name}": typed(name) == click.core.ParameterSource.COMMANDLINE
                            for name in ("test", "correction", "permutations", "seed", "missing", "worst")})
        _ppi_gate(baseline_path, candidate_path, metrics, floors, relevance, labels, max_drop, alpha,
                  allow_query_mismatch, fmt, qrels)

    result = gate(baseline_path, candidate_path, _split_metrics(metrics), max_drop=max_drop, alpha=alpha,
                  qrels=qrels, allow_query_mismatch=allow_query_mismatch, test=test, permutations=permutations,
                  seed=seed, correction=correction, relevance_level=relevance_level, missing=missing,
                  worst=worst, floors=parse_floors(floors), relevance=relevance, labels=labels,
                  min_evidence_chars=min_evidence_chars)
    if fmt == "json":
        from rankwise.report.compare_text import gate_json

        click.echo(gate_json(result))
    else:
        from rankwise.report.compare_console import print_gate

        print_gate(result)
    _log_mlflow(mlflow_opts, result)
    sys.exit(result.exit_code)
