"""OTLP as OpenTelemetry itself writes it (issue 38, items 5, 19, 21): the trace tests' OTLP JSON is
OpenTelemetry's own encoder's; ``rankwise.traces.OTLPJsonFileExporter`` writes what
``import-traces`` reads (and docs/traces.md's snippet with it runs as shown); OTLP protobuf
(``.pb``, alone or length-delimited) reads as its JSON does; a big file shows a progress bar on
stderr that ``--quiet`` hides.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from _extras import need
from _traces import (
    kestrel_questions,
    kestrel_retriever,
    langchain_traces,
    otlp_request,
    phoenix_rows,
    rag_chain,
    write_app_traces,
    write_console,
    write_otlp,
    write_otlp_pb,
)
from rankwise.cli import main
from rankwise.datasets import bundled_files
from rankwise.metrics.rag import evaluate_rag
from rankwise.traces import import_traces

os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")
QUESTIONS = str(bundled_files("kestrel").questions)
REPO = Path(__file__).resolve().parents[2]
METRICS = ["hit_rate@1", "recall@10", "mrr", "ndcg@10"]


@pytest.fixture(scope="module")
def retriever():
    need("openinference.instrumentation.langchain")
    return kestrel_retriever()


@pytest.fixture(scope="module")
def rag_spans(retriever):
    chain = rag_chain(retriever)
    with langchain_traces(seed=38) as exporter:
        for q in kestrel_questions()[:12]:
            chain.invoke(q["question"])
    return exporter.get_finished_spans()


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _cases(path, **kw):
    imp = import_traces(path, testset=QUESTIONS, quiet=True, **kw)
    return imp, imp.testset.cases


def test_the_otlp_json_the_tests_read_is_opentelemetrys_own(tmp_path, rag_spans):
    """Item 21: ``write_otlp`` writes OpenTelemetry's own request (a hand-made serialiser wrote hex
    ids, which protobuf's JSON mapping reads as other bytes: the request parsed back would differ).
    """
    from google.protobuf.json_format import Parse
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    lines = write_otlp(rag_spans, tmp_path / "otlp.json").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert Parse(lines[0], ExportTraceServiceRequest()) == encode_spans(rag_spans) == otlp_request(rag_spans)


def test_otlp_json_file_exporter_writes_what_import_traces_reads(tmp_path, retriever):
    """Item 5: the exporter on a real provider (batched, several requests a file, appended across
    providers) gives the cases the SDK's console exporter gives for the same spans, and the same
    numbers."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rankwise.traces import OTLPJsonFileExporter

    path = tmp_path / "app.json"
    chain = rag_chain(retriever)
    questions = kestrel_questions()[:12]
    spans = []
    for half in (questions[:6], questions[6:]):  # two runs of the application, one file
        provider, memory = TracerProvider(), InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        provider.add_span_processor(BatchSpanProcessor(OTLPJsonFileExporter(path), max_export_batch_size=16))
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            for q in half:
                chain.invoke(q["question"])
        finally:
            instrumentor.uninstrument()
            provider.shutdown()
        spans += memory.get_finished_spans()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 2 and all(json.loads(line)["resourceSpans"] for line in lines)  # a request a batch
    imp, cases = _cases(path)
    _, expected = _cases(write_console(spans, tmp_path / "console.json"))
    assert imp.format == "otlp" and len(cases) == 12 and cases == expected
    r = _cli("import-traces", path, "-o", tmp_path / "t.jsonl", "--testset", QUESTIONS)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{tmp_path / 't.jsonl'}: 12 cases from {path} (otlp): 12 retrieval calls")
    got = evaluate_rag(imp.testset, "span", metrics=METRICS).mean
    assert got == evaluate_rag(import_traces(tmp_path / "console.json", testset=QUESTIONS).testset, "span",
                               metrics=METRICS).mean and got["mrr"] > 0.2


def test_the_docs_exporter_snippet_runs_and_imports(tmp_path):
    """Item 5: docs/traces.md's ``# app.py`` block, run as shown, writes OTLP JSON that
    import-traces reads."""
    need("opentelemetry.exporter.otlp.proto.common")
    path = write_app_traces(tmp_path)
    imp = import_traces(path, quiet=True)
    assert imp.format == "otlp" and [c.question for c in imp.testset] == [
        "How many cards does each player draw?", "Who plays first?"]
    assert [(c.chunks[0].doc_id, c.chunks[0].start, c.chunks[0].end) for c in imp.testset] == [
        ("rules.md", 120, 149), ("rules.md", 151, 182)]


@pytest.mark.parametrize("framing", [None, "fixed32", "varint"])
def test_otlp_protobuf_reads_as_its_json(tmp_path, rag_spans, framing):
    """Item 19: a ``.pb`` written by OpenTelemetry's encoder (``SerializeToString``), alone or one
    request per trace each after its length, gives the cases and numbers of the same request as OTLP
    JSON."""
    pb = write_otlp_pb(rag_spans, tmp_path / "traces.pb", framing)
    imp, cases = _cases(pb)
    ref, expected = _cases(write_otlp(rag_spans, tmp_path / "traces.json"))
    assert imp.format == "otlp" and len(cases) == 12 and cases == expected
    assert imp.summary() | {"source": None} == ref.summary() | {"source": None}
    r = _cli("import-traces", pb, "-o", tmp_path / "t.jsonl", "--testset", QUESTIONS)
    assert r.exit_code == 0, r.output
    assert f"12 cases from {pb} (otlp): 12 retrieval calls" in r.stdout
    if framing == "fixed32":  # the collector's framing starts with a 0 byte: read as OTLP whatever the file's name
        other = tmp_path / "collector-output.data"
        other.write_bytes(pb.read_bytes())
        assert _cases(other)[1] == expected


def test_bad_otlp_protobuf_is_one_line_naming_the_message(tmp_path, rag_spans):
    good = write_otlp_pb(rag_spans, tmp_path / "good.pb", "fixed32").read_bytes()
    first = int.from_bytes(good[:4], "big")
    cases = {"garbage.pb": (b"\xff" * 64, "not an OTLP protobuf trace export"),
             # the second message's bytes cut in its middle, the frame lengths still covering the
             # file
             "cut.pb": (good[:4 + first] + (8).to_bytes(4, "big") + good[4 + first + 4:4 + first + 12],
                        "message 2 (byte")}
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        r = _cli("import-traces", tmp_path / name, "-o", tmp_path / "x.jsonl")
        assert r.exit_code == 2 and r.stderr.startswith(f"rankwise: error: {tmp_path / name}: ") \
            and r.stderr.count("\n") == 1, r.output
        assert message in r.stderr, r.stderr


def test_a_big_trace_file_shows_a_progress_bar_that_quiet_hides(tmp_path, rag_spans, monkeypatch):
    """Item 19: reading a big file shows a bar on stderr (never stdout); ``--quiet`` hides it. The
    threshold is lowered so a small file counts as big."""
    from rankwise.data.traces import readers

    monkeypatch.setattr(readers, "PROGRESS_MIN_BYTES", 1)
    for path in (write_otlp(rag_spans, tmp_path / "traces.json"), write_otlp_pb(rag_spans, tmp_path / "t.pb")):
        r = _cli("import-traces", path, "-o", tmp_path / f"{path.stem}.jsonl", "--force")
        assert r.exit_code == 0, r.output
        assert f"reading {path.name}" in r.stderr and "reading" not in r.stdout, r.output
        size = path.stat().st_size
        assert f"{size}/{size}" in r.stderr, r.stderr  # read to the end
        r = _cli("import-traces", path, "-o", tmp_path / f"{path.stem}.jsonl", "--force", "--quiet")
        assert r.exit_code == 0 and "reading" not in r.stderr, r.output
    monkeypatch.undo()
    r = _cli("import-traces", tmp_path / "traces.json", "-o", tmp_path / "small.jsonl")
    assert r.exit_code == 0 and "reading" not in r.stderr, r.output  # a small file reads without one


def test_the_phoenix_layout_the_docs_name_is_the_one_the_tests_write(rag_spans):
    """Item 21: docs/traces.md names the Phoenix version whose span dataframe is read and its
    columns; the rows the tests write (Phoenix is not installed) have exactly those columns, and the
    documents those keys."""
    import re

    text = " ".join((REPO / "docs" / "traces.md").read_text(encoding="utf-8").split())
    said = text[text.index("layout of arize-phoenix 20.x"):]
    said = said[:said.index("rather than through Phoenix")]
    columns = re.findall(r"`([a-z_.]+)`", said.split("and one `attributes.*`")[0].split("columns ", 1)[1])
    rows = phoenix_rows(rag_spans)
    fixed = [c for c in rows[0] if not c.startswith("attributes.")]
    assert columns == fixed and len(columns) == 10
    keys = re.search(r"a list of `\{([^}]*)\}` objects", said).group(1).split(", ")
    docs = next(r["attributes.retrieval.documents"] for r in rows if r["attributes.retrieval.documents"])
    assert set(docs[0]) <= set(keys) and {"document.content", "document.metadata"} <= set(docs[0])  # LangChain: no id


def test_mutated_protobuf_reads_or_fails_in_one_line(tmp_path, rag_spans):
    """Item 19: a damaged ``.pb`` (bytes flipped, cut, framed wrongly) is read or refused as an
    InputError (one line, exit 2), never a traceback."""
    import random

    from rankwise.errors import InputError

    rng = random.Random(19)
    good = write_otlp_pb(rag_spans[:40], tmp_path / "good.pb", "fixed32").read_bytes()
    outcomes = {"read": 0, "refused": 0}
    for k in range(150):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            what, at = rng.random(), rng.randrange(len(data))
            if what < 0.5:
                data[at] = rng.randrange(256)
            elif what < 0.8:
                del data[at:at + rng.randint(1, 64)]
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        path = tmp_path / f"m{k}.pb"
        path.write_bytes(bytes(data))
        try:
            import_traces(path, quiet=True)
            outcomes["read"] += 1
        except InputError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)
            outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes
