"""Traces of LlamaIndex and Haystack retrievers (issue 32 item 4): real
``openinference-instrumentation-llama-index`` and ``-haystack`` spans, written by OpenTelemetry's
own exporters (the SDK's ``ConsoleSpanExporter``; the OTLP encoder's request in protobuf's JSON
mapping). Their documents carry no offsets; ``import-traces --corpus`` locates each chunk in its
document, and the traced retriever then scores under span what ``run-adapter``'s path
(:func:`rankwise.adapters.run_retriever`) gives for the same retriever.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
from click.testing import CliRunner

from _extras import need
from _traces import (
    KESTREL_K,
    instrumented,
    kestrel_haystack,
    kestrel_llamaindex,
    kestrel_questions,
    write_console,
    write_otlp,
)
from rankwise.adapters import RetrieverRandomIdWarning, run_retriever
from rankwise.cli import main
from rankwise.datasets import bundled_files
from rankwise.metrics.rag import evaluate_rag
from rankwise.traces import import_traces

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
METRICS = ["hit_rate@1", "hit_rate@5", "precision@5", "recall@10", "mrr", "ndcg@10", "char_recall@10"]
QUESTIONS = str(bundled_files("kestrel").questions)
CORPUS = str(bundled_files("kestrel").corpus)


@pytest.fixture(scope="module")
def questions():
    return kestrel_questions()


@pytest.fixture(scope="module")
def llama_spans(questions):
    li = need("openinference.instrumentation.llama_index")
    retriever = kestrel_llamaindex()
    with instrumented(li.LlamaIndexInstrumentor, seed=5) as exporter:
        for q in questions:
            retriever.retrieve(q["question"])
    return exporter.get_finished_spans()


@pytest.fixture(scope="module")
def llama_adapter(questions):
    need("llama_index.core")
    with pytest.warns(RetrieverRandomIdWarning):
        return run_retriever(kestrel_llamaindex(), questions, k=KESTREL_K, concurrency=1)


def _cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def test_llamaindex_trace_with_corpus_scores_as_run_adapter(tmp_path, llama_spans, llama_adapter):
    expected = llama_adapter.evaluate("span", metrics=METRICS)
    assert expected.mean["mrr"] > 0.2
    for write, name in ((write_console, "console.json"), (write_otlp, "otlp.json")):
        spans = write(llama_spans, tmp_path / name)
        out = tmp_path / f"{name}.jsonl"
        r = _cli("import-traces", spans, "-o", out, "--testset", QUESTIONS, "--corpus", CORPUS)
        n = 73 * KESTREL_K
        assert f"73 cases from {spans}" in r.stdout and "73 retrieval calls" in r.stdout, r.output
        assert f"located {n} of {n} chunks without offsets in {CORPUS}" in r.stdout, r.output
        # LlamaIndex's inner, empty retriever span (VectorIndexRetriever._retrieve) is no lost data
        assert "skipped" not in r.stderr and "warning" not in r.stderr, r.stderr
        got = json.loads(_cli("eval-rag", out, "-r", "span", "--format", "json", "--quiet",
                              *sum((["-m", m] for m in METRICS), [])).stdout)
        for m in METRICS:
            assert got["mean"][m] == expected.mean[m], (name, m)
        # the verdicts go back onto the traced spans when export-verdicts is given the same corpus
        records, evals = tmp_path / f"{name}.records.jsonl", tmp_path / f"{name}.evals.jsonl"
        _cli("eval-rag", out, "-r", "span", "--records", records, "--quiet", "--format", "json")
        r = _cli("export-verdicts", records, "--traces", spans, "--testset", QUESTIONS, "--corpus", CORPUS,
                 "--phoenix", evals)
        assert r.stdout.startswith(f"{evals}: {n} document evaluations on 73 retriever spans"), r.output
        # the same chunks as the adapter's, by id (document and located offsets; tied scores in
        # either order)
        imp = import_traces(spans, testset=QUESTIONS, corpus=CORPUS)
        ids = {r.question: sorted(c.id for c in r.chunks) for r in llama_adapter.records}
        assert {c.question: sorted(x.id for x in c.chunks) for c in imp.testset} == ids
    # without the corpus the traces have no offsets: every span verdict is missing, and the import
    # says so
    r = _cli("import-traces", spans, "-o", tmp_path / "bare.jsonl")
    assert "730 of 730 chunks carry no offsets in their document" in r.stderr and "pass --corpus DOCS" in r.stderr
    assert all(c.start is None for case in import_traces(spans).testset for c in case.chunks)
    # the test set's own documents where it has them: its located passages place the chunks that
    # touch them, and those are the chunks span verdicts find relevant (the others stay without
    # offsets: missing)
    r = _cli("import-traces", spans, "-o", tmp_path / "lent.jsonl", "--testset", QUESTIONS)
    imp = import_traces(spans, testset=QUESTIONS)
    placed = imp.summary()["located"]
    assert placed["in reference passages"] + placed["not found"] == 730 and placed["not found"] > 100
    assert f"located {placed['in reference passages']} of 730 chunks without offsets in {QUESTIONS}'s reference " \
           "passages" in r.stdout
    got = evaluate_rag(imp.testset, "span", metrics=METRICS)
    assert {m: got.mean[m] for m in METRICS} == {m: expected.mean[m] for m in METRICS}


def test_haystack_trace_scores_as_run_adapter_with_and_without_offsets(tmp_path, questions):
    hs = need("openinference.instrumentation.haystack")
    pipe = kestrel_haystack()
    with instrumented(hs.HaystackInstrumentor, seed=6) as exporter:
        for q in questions:
            pipe.run({"retriever": {"query": q["question"]}})
    expected = run_retriever(kestrel_haystack(), questions, k=KESTREL_K, concurrency=1).evaluate(
        "span", metrics=METRICS)
    assert expected.mean["mrr"] > 0.3
    spans = write_console(exporter.get_finished_spans(), tmp_path / "haystack.json")
    imp = import_traces(spans, testset=QUESTIONS)  # Haystack's splitter leaves split_idx_start in the metadata
    assert imp.summary()["skipped"] == {} and imp.summary()["calls"] == 73
    got = evaluate_rag(imp.testset, "span", metrics=METRICS)
    assert all(got.mean[m] == expected.mean[m] for m in METRICS)
    # a store fed plain chunks (no offsets): the corpus gives them back, and the same numbers
    bare = kestrel_haystack(offsets=False)
    with instrumented(hs.HaystackInstrumentor, seed=7) as exporter:
        for q in questions:
            bare.run({"retriever": {"query": q["question"]}})
    spans = write_otlp(exporter.get_finished_spans(), tmp_path / "bare.json")
    assert all(c.start is None for case in import_traces(spans).testset for c in case.chunks)
    imp = import_traces(spans, testset=QUESTIONS, corpus=CORPUS)
    assert imp.summary()["located"] == {"exact": 73 * KESTREL_K}
    got = evaluate_rag(imp.testset, "span", metrics=METRICS)
    assert {m: got.mean[m] for m in METRICS} == {m: expected.mean[m] for m in METRICS}


def test_span_that_lost_attributes_names_the_count_and_the_fix(tmp_path, questions, monkeypatch):
    li = need("openinference.instrumentation.llama_index")
    retriever = kestrel_llamaindex(k=50)  # 3 attributes a document: past OpenTelemetry's 128 per span
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK's "Attributes dict is full" on every dropped attribute
        with instrumented(li.LlamaIndexInstrumentor, seed=8) as exporter:
            for q in questions[:3]:
                retriever.retrieve(q["question"])
    for write, name, lost in ((write_otlp, "otlp.json", "lost 26 attributes"),
                              (write_console, "console.json", "holds exactly 128 attributes")):
        path = write(exporter.get_finished_spans(), tmp_path / name)
        r = CliRunner().invoke(main, ["import-traces", str(path), "-o", str(tmp_path / "t.jsonl"), "--force"])
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
        assert "3 retriever span that lost attributes to OpenTelemetry's limit (set OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" \
            in r.stderr and lost in r.stderr and "neither content nor id" not in r.stderr, r.stderr
        assert "incomplete. Set OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (e.g. 10000) where the traced application runs" \
            in r.stderr
        assert "LlamaIndex" not in r.stderr and "skipped" not in r.stderr  # the inner empty spans: not counted
    # the same limit raised where the application runs: every document kept, nothing skipped
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "10000")
    with instrumented(li.LlamaIndexInstrumentor, seed=8) as exporter:
        for q in questions[:3]:
            retriever.retrieve(q["question"])
    imp = import_traces(write_otlp(exporter.get_finished_spans(), tmp_path / "all.json"))
    assert [len(c.chunks) for c in imp.testset] == [50, 50, 50] and imp.skipped == {}
