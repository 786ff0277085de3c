"""Traces from real instrumentation (issue 23): LangChain retrievers run under
openinference-instrumentation-langchain with the OpenTelemetry SDK, and MLflow traces, read back by
``rankwise.traces`` / ``rankwise import-traces``. The numbers from the traces equal those of the
same retriever run through ``rankwise.adapters.run_retriever``.
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
    kestrel_questions,
    kestrel_retriever,
    langchain_traces,
    rag_chain,
    two_step_agent,
    write_console,
    write_otlp,
    write_phoenix,
)
from rankwise.adapters import RetrieverRandomIdWarning, run_retriever
from rankwise.cli import main
from rankwise.data.testset import TestSet
from rankwise.datasets import bundled_files
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.traces import import_traces, load_traces

os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")


@pytest.fixture(scope="module", autouse=True)
def _instrumentation():
    """Every test here needs the instrumentation; imported here, not at module level (collection
    would pay it)."""
    need("openinference.instrumentation.langchain")

METRICS = ["hit_rate@1", "hit_rate@5", "precision@5", "recall@10", "mrr", "ndcg@10", "char_recall@10"]
QUESTIONS = str(bundled_files("kestrel").questions)


@pytest.fixture(scope="module")
def retriever():
    return kestrel_retriever()


@pytest.fixture(scope="module")
def questions():
    return kestrel_questions()


@pytest.fixture(scope="module")
def rag_spans(retriever, questions):
    chain = rag_chain(retriever)
    with langchain_traces() as exporter:
        for q in questions:
            chain.invoke(q["question"])
    return exporter.get_finished_spans()


@pytest.fixture(scope="module")
def agent_spans(retriever, questions):
    agent = two_step_agent(retriever)
    with langchain_traces() as exporter:
        for q in questions[:5]:
            agent.invoke(q["question"])
    return exporter.get_finished_spans()


@pytest.fixture(scope="module")
def adapter_result(retriever, questions):
    with pytest.warns(RetrieverRandomIdWarning):
        run = run_retriever(retriever, questions, k=KESTREL_K, concurrency=2)
    return run


def test_traced_langchain_retriever_scores_as_the_adapter_to_the_last_digit(tmp_path, rag_spans, adapter_result,
                                                                             questions):
    expected = adapter_result.evaluate("span", metrics=METRICS)
    ids = {r.question: [c.id for c in r.chunks] for r in adapter_result.records}
    for write, name in ((write_console, "spans.json"), (write_otlp, "otlp.json"), (write_phoenix, "spans.parquet")):
        path = write(rag_spans, tmp_path / name)
        imp = import_traces(path, testset=QUESTIONS)
        assert imp.format == {"spans.json": "console", "otlp.json": "otlp", "spans.parquet": "phoenix"}[name]
        s = imp.summary()
        assert (s["cases"], s["calls"], s["multi_call_cases"], s["labelled_from_testset"]) == (73, 73, 0, 73), name
        assert s["skipped"] == {} and s["id_from"] == {"offset": 73 * KESTREL_K}, name  # the uuids were not kept
        assert {c.question: [x.id for x in c.chunks] for c in imp.testset} == ids, name
        assert all(c.calls == [] for c in imp.testset)  # one call: an ordinary single-list case
        got = evaluate_rag(imp.testset, "span", metrics=METRICS)
        assert got.summary["evaluated"] == expected.summary["evaluated"] == 73
        for m in METRICS:
            assert got.mean[m] == expected.mean[m], (name, m)
        assert expected.mean["mrr"] > 0.2
    # Phoenix's dataframe has context.span_id as its index: saved with it, it reads the same
    import pandas as pd

    pd.read_parquet(tmp_path / "spans.parquet").set_index("context.span_id").to_parquet(tmp_path / "indexed.parquet")
    assert import_traces(tmp_path / "indexed.parquet", testset=QUESTIONS).testset.cases == imp.testset.cases
    # the root span's input and output are the case's question and response
    case = imp.testset[0]
    assert case.question == questions[0]["question"] and case.response and case.response in case.chunks[0].text


def test_import_traces_cli_then_eval_rag_same_numbers(tmp_path, rag_spans, adapter_result):
    spans = write_otlp(rag_spans, tmp_path / "traces.json")
    out = tmp_path / "testset.jsonl"
    r = CliRunner().invoke(main, ["import-traces", str(spans), "-o", str(out), "--testset", QUESTIONS])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{out}: 73 cases from {spans} (otlp): 73 retrieval calls, 0 cases with more than one;"
                               f" 73 matched in {QUESTIONS}")
    r = CliRunner().invoke(main, ["eval-rag", str(out), "-r", "span", "--format", "json", "--quiet",
                                  *sum((["-m", m] for m in METRICS), [])])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    expected = adapter_result.evaluate("span", metrics=METRICS)
    for m in METRICS:
        assert got["mean"][m] == expected.mean[m], m


def test_two_step_agent_gives_one_case_with_two_calls(tmp_path, agent_spans, retriever, questions):
    imp = import_traces(write_console(agent_spans, tmp_path / "agent.json"), testset=QUESTIONS)
    s = imp.summary()
    assert (s["cases"], s["calls"], s["multi_call_cases"], s["labelled_from_testset"]) == (5, 10, 5, 5)
    retriever_spans = {format(x.context.span_id, "016x"): x for x in agent_spans
                       if x.attributes.get("openinference.span.kind") == "RETRIEVER"}
    for case, q in zip(imp.testset, questions[:5], strict=True):
        assert case.question == q["question"]
        first, second = case.calls
        assert (first.position, second.position) == (0, 1)
        rewritten = q["question"].replace("`", "").rstrip("?")
        assert first.query == rewritten and second.query.startswith(rewritten + " ")
        assert retriever_spans[first.span_id].start_time < retriever_spans[second.span_id].start_time
        assert case.id == q["id"] and first.trace_id == second.trace_id == imp.trace_ids[case.id]
        # each call's list is what the retriever gives for that call's query
        for call in case.calls:
            direct = retriever.invoke(call.query)
            assert [c.text for c in call.chunks] == [d.page_content for d in direct]
        # the merged list: interleaved by rank, each chunk once
        merged = [c.id for c in case.chunks]
        assert len(merged) == len(set(merged)) == len({c.id for call in case.calls for c in call.chunks})
        assert merged[:2] == [first.chunks[0].id, second.chunks[0].id] or first.chunks[0].id == second.chunks[0].id
    # and through the test-set file: the calls survive
    out = tmp_path / "agent.jsonl"
    r = CliRunner().invoke(main, ["import-traces", str(tmp_path / "agent.json"), "-o", str(out)])
    assert r.exit_code == 0 and "10 retrieval calls, 5 cases with more than one" in r.stdout
    row = json.loads(out.read_text().splitlines()[0])
    first_case = import_traces(tmp_path / "agent.json").testset[0]
    assert row["id"] == first_case.id and "retrieved_contexts" not in row  # the chunks are the calls merged
    assert [(c["position"], c["query"], c["span_id"]) for c in row["calls"]] == [
        (c.position, c.query, c.span_id) for c in first_case.calls]
    back = load_traces(tmp_path / "agent.json")
    assert [len(c.calls) for c in back] == [2] * 5


def test_mlflow_traces_read_back(tmp_path, retriever, questions, monkeypatch, request):
    mlflow = need("mlflow")
    from mlflow.entities import Document, SpanType

    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    # an experiment of this store: the active one another test's store left (mlflow keeps it
    # globally) does not exist here, and traces logged to it are dropped
    mlflow.set_experiment("rankwise-traces")
    request.addfinalizer(lambda: mlflow.set_tracking_uri(before))

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(query: str):
        return [Document(page_content=d.page_content, metadata=d.metadata) for d in retriever.invoke(query)]

    @mlflow.trace
    def answer(question: str):
        docs = retrieve(question)
        return docs[0].page_content.split(".")[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace_ids = []
        for q in questions[:4]:
            answer(q["question"])
            trace_ids.append(mlflow.get_last_active_trace_id())
        traces = [mlflow.get_trace(t) for t in trace_ids]
    path = tmp_path / "mlflow.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in traces), encoding="utf-8")
    imp = import_traces(path, testset=QUESTIONS)
    assert imp.format == "mlflow" and [c.id for c in imp.testset] == ["q01", "q02", "q03", "q04"]
    assert [imp.trace_ids[c.id] for c in imp.testset] == trace_ids
    assert imp.summary()["labelled_from_testset"] == 4
    with pytest.warns(RetrieverRandomIdWarning):
        run = run_retriever(retriever, questions[:4], k=KESTREL_K, concurrency=1)
    for case, rec in zip(imp.testset, run.records, strict=True):
        assert case.question == rec.question and case.response == rec.chunks[0].text.split(".")[0]
        assert [c.id for c in case.chunks] == [c.id for c in rec.chunks]
    expected = run.evaluate("span", metrics=METRICS)
    got = evaluate_rag(imp.testset, "span", metrics=METRICS)
    assert all(got.mean[m] == expected.mean[m] for m in METRICS)
    # a whole trace as Trace.to_json(pretty=True), and a JSON array of them, read the same
    (tmp_path / "one.json").write_text(traces[0].to_json(pretty=True), encoding="utf-8")
    assert [c.id for c in import_traces(tmp_path / "one.json").testset] == trace_ids[:1]
    (tmp_path / "many.json").write_text("[" + ",".join(t.to_json() for t in traces) + "]", encoding="utf-8")
    assert len(import_traces(tmp_path / "many.json").testset) == 4


LANGSMITH_RUNS = [
    {"id": "00000000-0000-4000-8000-000000000001", "trace_id": "00000000-0000-4000-8000-000000000001",
     "parent_run_id": None, "run_type": "chain", "name": "rag", "start_time": "2026-01-01T00:00:00.000000",
     "inputs": {"question": "Where is Paris?"}, "outputs": {"output": "In France."},
     "extra": {"metadata": {"case_id": "q7"}}},
    {"id": "00000000-0000-4000-8000-000000000003", "trace_id": "00000000-0000-4000-8000-000000000001",
     "parent_run_id": "00000000-0000-4000-8000-000000000001", "run_type": "retriever", "name": "hop2",
     "start_time": "2026-01-01T00:00:02.000000", "inputs": {"query": "France capital"},
     "outputs": {"documents": [{"page_content": "France is in Europe.", "metadata": {"source": "eu.md",
                                                                                     "start_index": 0}}]}},
    {"id": "00000000-0000-4000-8000-000000000002", "trace_id": "00000000-0000-4000-8000-000000000001",
     "parent_run_id": "00000000-0000-4000-8000-000000000001", "run_type": "retriever", "name": "hop1",
     "start_time": "2026-01-01T00:00:01.000000", "inputs": {"query": "Paris"},
     "outputs": {"documents": [{"page_content": "Paris is in France.", "metadata": {"source": "fr.md",
                                                                                    "start_index": 10},
                                "type": "Document"}, {"page_content": "Lyon too.", "metadata": {}}]}},
]


def test_langsmith_runs_calls_in_time_order_and_case_id_label(tmp_path):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(LANGSMITH_RUNS), encoding="utf-8")
    testset = tmp_path / "testset.jsonl"
    testset.write_text(json.dumps({"id": "q7", "question": "Paris?", "reference_context_ids": ["fr.md#10-29"]}) + "\n")
    imp = import_traces(path, testset=testset)
    case = imp.testset["q7"]  # matched by its case_id metadata: the test set's name
    assert imp.format == "langsmith" and case.question == "Where is Paris?" and case.response == "In France."
    assert [(c.query, c.meta["name"]) for c in case.calls] == [("Paris", "hop1"), ("France capital", "hop2")]
    assert [c.id for c in case.chunks] == ["fr.md#10-29", "eu.md#0-20", "text:" + case.chunks[2].id[5:]]
    assert case.reference_context_ids == ["fr.md#10-29"] and imp.labelled == 1  # matched by case_id, not text
    res = evaluate_rag(imp.testset, "ids", metrics=["precision@1", "recall@3"])
    assert res.mean == {"precision@1": 1.0, "recall@3": 1.0}


def test_verdicts_export_as_phoenix_document_evaluations(tmp_path, agent_spans, rag_spans):
    import pyarrow.parquet as pq

    spans = write_console(list(rag_spans)[:40] + list(agent_spans), tmp_path / "spans.json")
    testset, records, evals = tmp_path / "t.jsonl", tmp_path / "records.jsonl", tmp_path / "evals.parquet"
    run = CliRunner().invoke
    assert run(main, ["import-traces", str(spans), "-o", str(testset), "--testset", QUESTIONS]).exit_code == 0
    r = run(main, ["eval-rag", str(testset), "-r", "span", "--records", str(records), "--quiet", "--format", "json"])
    assert r.exit_code == 0, r.output
    r = run(main, ["export-verdicts", str(records), "--traces", str(spans), "--phoenix", str(evals),
                   "--testset", QUESTIONS])
    assert r.exit_code == 0, r.output
    table = pq.read_table(evals)
    assert table.column_names == ["context.span_id", "document_position", "label", "score", "explanation",
                                  "annotation_name", "annotator_kind"]
    rows = table.to_pylist()
    imp = import_traces(spans, testset=QUESTIONS)
    n_docs = sum(len(c.chunks) for calls in imp.calls.values() for c in calls)
    assert len(rows) == n_docs and r.stdout.startswith(f"{evals}: {n_docs} document evaluations on ")
    # every row is the record's verdict on the chunk at that position of that span
    from rankwise.data.records import load_records

    recs = {x.id: x for x in load_records(records)}
    by_span = {c.span_id: (case_id, c) for case_id, calls in imp.calls.items() for c in calls}
    for row in rows:
        case_id, call = by_span[row["context.span_id"]]
        chunk = call.chunks[row["document_position"]]
        verdict = next(c for c in recs[case_id].chunks if c.id == chunk.id).verdicts["span"].verdict
        assert row["score"] == float(verdict) and row["label"] == ("relevant" if verdict else "irrelevant")
        assert row["annotation_name"] == "span" and row["annotator_kind"] == "CODE"
    assert {r["score"] for r in rows} == {0.0, 1.0}
    # JSON Lines too, one source named
    out = tmp_path / "evals.jsonl"
    r = run(main, ["export-verdicts", str(records), "--traces", str(spans), "--phoenix", str(out), "--source", "span",
                   "--testset", QUESTIONS])
    assert r.exit_code == 0 and [json.loads(x) for x in out.read_text().splitlines()] == rows


def test_export_of_records_from_other_traces_is_one_line(tmp_path, agent_spans):
    spans = write_console(agent_spans, tmp_path / "spans.json")
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "q1", "question": "?", "chunks": []}) + "\n")
    r = CliRunner().invoke(main, ["export-verdicts", str(records), "--traces", str(spans), "--phoenix",
                                  str(tmp_path / "e.parquet")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "no record's case id is a case of these traces (first record: 'q1')" in r.stderr


def _console_span(trace, span, parent=None, kind="RETRIEVER", **attrs):
    return {"name": "s", "context": {"trace_id": trace, "span_id": span}, "parent_id": parent,
            "start_time": "2026-01-01T00:00:00Z", "attributes": {"openinference.span.kind": kind, **attrs}}


T1, T2, T3 = "0x" + "1" * 32, "0x" + "2" * 32, "0x" + "3" * 32


def test_bad_traces_are_counted_skips_with_reasons(tmp_path):
    doc = {"retrieval.documents.0.document.content": "alpha", "input.value": "q?"}
    spans = [
        _console_span(T1, "0x" + "a" * 16, kind="CHAIN", **{"input.value": "root question"}),
        _console_span(T1, "0x" + "b" * 16, parent="0x" + "a" * 16, **doc),
        _console_span(T1, "0x" + "c" * 16, parent="0x" + "a" * 16, **{"input.value": "no docs"}),
        _console_span(T2, "0x" + "d" * 16, parent="0x" + "9" * 16, **doc),  # its root is not in the file
        _console_span(T3, "0x" + "e" * 16, kind="LLM"),  # no retriever at all
    ]
    path = tmp_path / "spans.json"
    path.write_text("\n".join(json.dumps(s, indent=2) for s in spans))
    imp = import_traces(path)
    assert imp.summary()["skipped"] == {"retriever span without documents": 1,
                                        "trace without a root span (kept; question from its first call)": 1,
                                        "trace without a retriever span": 1}
    assert [c.question for c in imp.testset] == ["root question", "q?"]
    assert [len(v) for v in imp.calls.values()] == [1, 1]
    with pytest.warns(UserWarning, match="1 retriever span without documents; 1 trace without a root"):
        load_traces(path)
    r = CliRunner().invoke(main, ["import-traces", str(path), "-o", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0
    assert "skipped: 1 retriever span without documents" in r.stderr
    assert "retriever span cccccccccccccccc holds no documents" in r.stderr


@pytest.mark.parametrize("text, fmt, message", [
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab"', "auto", "spans.json:1: truncated JSON"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "' + "b" * 16 + '"}]}]}]}', "auto",
     "spans.json:1: field 'resourceSpans[0].scopeSpans[0].spans[0].traceId': missing id"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + "a" * 32 + '", "spanId": "' + "b" * 16
     + '", "attributes": {"k": 1}}]}]}]}', "auto",
     "field 'resourceSpans[0].scopeSpans[0].spans[0].attributes': expected a list of {key, value} attributes"),
    ('\n\n' + json.dumps(_console_span(T1, "0x" + "b" * 16, **{"retrieval.documents.0.document.metadata": "[1]"})),
     "auto", "spans.json:3: field 'retrieval.documents.0.document.metadata': expected a JSON object of metadata"),
    (json.dumps(_console_span(T1, "0x" + "b" * 16, **{"retrieval.documents.0.document.score": 0.5})), "auto",
     "document 0 has neither content nor id"),
    ('{"hello": 1}', "auto", "spans.json:1: not a trace export rankwise knows"),
    ('[{"run_type": "retriever", "id": "r1", "outputs": {"documents": "x"}}]', "auto",
     "spans.json:1: field '[0].outputs.documents': expected a list of documents"),
    ('{"info": {"trace_id": "tr-1"}, "data": {"spans": [{"span_id": "AAAAAAAAAAE=", "attributes": '
     '{"mlflow.spanType": "\\"RETRIEVER\\"", "mlflow.spanOutputs": "\\"text\\""}}]}}', "auto",
     "field 'data.spans[0].attributes.mlflow.spanOutputs': a RETRIEVER span's outputs must be a list"),
    (json.dumps(_console_span(T1, "0x" + "b" * 16, kind="LLM")), "auto",
     "no trace holds a retriever call with documents (1 traces: 1 trace without a retriever span)"),
    ('{"resourceSpans": []}', "langsmith", "field 'id': missing id"),
])
def test_bad_trace_files_are_one_line_errors(tmp_path, text, fmt, message):
    path = tmp_path / "spans.json"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        import_traces(path, format=fmt)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    r = CliRunner().invoke(main, ["import-traces", str(path), "-o", str(tmp_path / "t.jsonl"), "--format", fmt])
    assert r.exit_code == 2 and r.stderr.startswith("rankwise: error: ") and r.stderr.count("\n") == 1, r.output
    assert message in r.stderr or message.split(": ", 1)[-1][:40] in r.stderr


def test_phoenix_parquet_without_its_columns_is_one_line(tmp_path):
    import pandas as pd

    path = tmp_path / "spans.parquet"
    pd.DataFrame({"span_id": ["a"], "name": ["x"]}).to_parquet(path)
    with pytest.raises(InputError, match=r"spans.parquet: field 'context.trace_id': no column 'context.trace_id'"):
        import_traces(path)


@pytest.mark.parametrize("mode", ["response", "question"])
def test_unlabelled_traces_judged_and_exported_to_phoenix(tmp_path, agent_spans, srv, mode):
    """No test set: the LLM judge (loopback server) judges each traced chunk against the traced
    answer or the question; its verdicts, reasons included, go back onto every retriever span that
    retrieved the chunk."""
    spans = write_console(agent_spans, tmp_path / "agent.json")
    testset, records, evals = tmp_path / "t.jsonl", tmp_path / "judged.jsonl", tmp_path / "evals.jsonl"
    run = CliRunner().invoke
    assert run(main, ["import-traces", str(spans), "-o", str(testset)]).exit_code == 0
    r = run(main, ["judge", str(testset), "--mode", mode, "--model", "judge-test", "--base-url", srv.base_url,
                   "--cache", str(tmp_path / "c.sqlite"), "--records", str(records), "--quiet"])
    assert r.exit_code == 0, r.output
    imp = import_traces(spans)
    merged = sum(len(c.chunks) for c in imp.testset)
    assert f"judged {merged} chunks of 5 cases" in r.stdout  # a chunk two calls retrieved is judged once
    r = run(main, ["export-verdicts", str(records), "--traces", str(spans), "--phoenix", str(evals)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in evals.read_text().splitlines()]
    n_docs = sum(len(c.chunks) for calls in imp.calls.values() for c in calls)
    assert len(rows) == n_docs > merged and {x["annotator_kind"] for x in rows} == {"LLM"}
    assert all(x["explanation"] for x in rows) and {x["label"] for x in rows} <= {"relevant", "irrelevant"}
    # the verdict on a chunk is the same on every span that retrieved it
    by_chunk: dict = {}
    for x in rows:
        case_id = next(k for k, calls in imp.calls.items() if any(c.span_id == x["context.span_id"] for c in calls))
        call = next(c for c in imp.calls[case_id] if c.span_id == x["context.span_id"])
        by_chunk.setdefault((case_id, call.chunks[x["document_position"]].id), set()).add(x["score"])
    assert all(len(v) == 1 for v in by_chunk.values()) and len(by_chunk) == merged
    if mode == "response":  # the traced answer is the response the chunks were judged against
        assert all(c.response for c in imp.testset)


def test_case_id_metadata_from_langchain_config_names_the_case(tmp_path, retriever, questions):
    """``config={"metadata": {"case_id": ...}}`` (what a team sets to link a trace to its test case)
    matches although the traced question differs from the test set's."""
    chain = rag_chain(retriever)
    with langchain_traces() as exporter:
        chain.invoke("tell me: " + questions[4]["question"], config={"metadata": {"case_id": questions[4]["id"]}})
        chain.invoke("an unknown question")
    imp = import_traces(write_console(exporter.get_finished_spans(), tmp_path / "s.json"), testset=QUESTIONS)
    assert imp.testset.ids[0] == questions[4]["id"] and imp.labelled == 1
    assert imp.testset[0].reference_contexts and not imp.testset[1].has_ground_truth
    assert imp.testset.ids[1] == imp.trace_ids[imp.testset.ids[1]]  # unmatched: named by its trace id


def test_an_empty_retriever_result_is_an_empty_call_not_a_skip(tmp_path):
    spans = [_console_span(T1, "0x" + "a" * 16, kind="CHAIN", **{"input.value": "q?"}),
             _console_span(T1, "0x" + "b" * 16, parent="0x" + "a" * 16,
                           **{"input.value": "q?", "output.value": '{"documents": []}'}),
             _console_span(T1, "0x" + "c" * 16, parent="0x" + "a" * 16,
                           **{"input.value": "q2", "retrieval.documents.0.document.content": "x"})]
    path = tmp_path / "s.json"
    path.write_text("\n".join(json.dumps(s) for s in spans))
    imp = import_traces(path)
    assert imp.skipped == {} and [len(c.chunks) for c in imp.calls[T1[2:]]] == [0, 1]


def test_langsmith_runs_from_langchain_tracer_score_as_the_adapter(tmp_path, retriever, questions):
    """The runs LangChain's tracer builds for LangSmith (``collect_runs``: the RunTree objects it
    would post), written as JSON Lines: one case per root run, the same chunks and numbers as the
    adapter path."""
    from langchain_core.tracers.context import collect_runs

    chain = two_step_agent(retriever)
    single = rag_chain(retriever)
    with collect_runs() as collector:
        for q in questions[:6]:
            single.invoke(q["question"])
        chain.invoke(questions[6]["question"])

    def flat(run):
        yield run
        for child in run.child_runs:
            yield from flat(child)

    rows = [r.model_dump_json(exclude={"child_runs", "parent_run"}) for root in collector.traced_runs
            for r in flat(root)]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    imp = import_traces(path, testset=QUESTIONS)
    assert imp.format == "langsmith" and imp.testset.ids == [q["id"] for q in questions[:7]]
    assert [len(imp.calls[i]) for i in imp.testset.ids] == [1] * 6 + [2]
    with pytest.warns(RetrieverRandomIdWarning):
        run = run_retriever(retriever, questions[:6], k=KESTREL_K, concurrency=1)
    assert [[c.id for c in imp.testset[i].chunks] for i in range(6)] == [[c.id for c in r.chunks] for r in run.records]
    got = evaluate_rag(TestSet(imp.testset.cases[:6]), "span", metrics=METRICS)
    expected = run.evaluate("span", metrics=METRICS)
    assert all(got.mean[m] == expected.mean[m] for m in METRICS)
    assert imp.testset[6].calls[0].query == questions[6]["question"].replace("`", "").rstrip("?")
