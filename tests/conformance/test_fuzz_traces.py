"""The fuzz net over trace import (issue 33 item 3): nothing ``import-traces`` writes is refused by
``eval-rag``.

A seeded mutator makes mutants of a valid trace file in each of the five formats — structural edits
of the JSON (a value replaced by another type, an offset past 2**63 or negative, a kind as a list, a
key dropped, a span or a document repeated) and byte edits (``test_fuzz_inputs.mutate``). Every
mutant ``import-traces`` accepts (exit 0) writes a test set that ``eval-rag`` reads and scores (exit
0: references from a ``--testset`` are lent to the traces); every one it refuses is exit 2 with one
line. No mutant gives a traceback or a hang (each run is bounded by an alarm). The mutants that
broke it once are kept below, as regressions.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import signal

import pytest
from click.testing import CliRunner

from _extras import need
from conformance.test_fuzz_inputs import TRACES_CONSOLE, TRACES_LANGSMITH, TRACES_MLFLOW, TRACES_OTLP, mutate
from rankwise.cli import main

MUTANTS = int(os.environ.get("RANKWISE_FUZZ_MUTANTS", "300")) // 5
SECONDS = 30  # a mutant that takes longer is a hang
LABELS = [{"id": "q1", "question": "a?", "reference_contexts": [{"text": "alpha beta", "doc_id": "d1", "start": 0,
                                                                  "end": 10}]}]
VALUES = [None, "", "x", "RETRIEVER", "retriever", ["RETRIEVER"], {"k": "RETRIEVER"}, 0, -40, 1e30, 2.5, -0.0,
          10**30, 2**63, True, [], {}, [1, 2], "1e30", "-40", "abc", "\u0000", "é" * 3, {"source": "d1"},
          '{"source": "d1", "start_index": 1e30}', '{"source": "d1", "start_index": -40}',
          '{"source": 3, "start_index": "7"}', '{"start_index": [1]}', '[1]', 'null', '{"documents": []}']

#: the fields the readers read: edits go there more often than elsewhere
KEYS = ("start_index", "end", "source", "id", "content", "score", "metadata", "openinference.span.kind", "run_type",
        "mlflow.spanType", "span_type", "page_content", "documents", "value", "stringValue", "intValue", "spanId",
        "span_id", "traceId", "trace_id", "parent_id", "parentSpanId", "droppedAttributesCount", "input.value",
        "mlflow.spanOutputs", "outputs")
NEW_KEYS = ["start_index", "end", "start", "source", "doc_id", "id", "droppedAttributesCount", "span_type"]


def _otlp_phoenix_free() -> dict:
    """The five seeds (Phoenix's Parquet is made from the console spans' rows)."""
    return {"otlp": TRACES_OTLP, "console": TRACES_CONSOLE, "langsmith": TRACES_LANGSMITH, "mlflow": TRACES_MLFLOW}


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _open(value):
    """JSON-encoded strings (attributes, metadata) opened as ``{"__json__": value}`` so edits reach
    inside."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return {"__json__": _open(json.loads(value))}
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: _open(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_open(v) for v in value]
    return value


def _close(value):
    if isinstance(value, dict):
        if set(value) == {"__json__"}:
            return json.dumps(_close(value["__json__"]))
        return {k: _close(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_close(v) for v in value]
    return value


def _edit(doc, rng: random.Random):
    """One structural edit of a parsed JSON value (in place; the new root returned): a value
    replaced by another (of another type, an impossible offset, a kind as a list), a key dropped, an
    item repeated."""
    paths = [p for p in _paths(doc) if p and p[-1] != "__json__"]
    if not paths:
        return doc
    keyed = [p for p in paths if any(str(k) in KEYS or str(k).endswith(KEYS) for k in p[-3:])]
    path = rng.choice(keyed if keyed and rng.random() < 0.6 else paths)  # mostly where the readers look
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    op = rng.randrange(6)
    if op <= 2:
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    elif op == 3 and isinstance(parent, dict):
        del parent[key]
    elif op == 4 and isinstance(parent, dict):  # a field the seed does not have
        parent[rng.choice(NEW_KEYS)] = copy.deepcopy(rng.choice(VALUES))
    elif isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))  # a span, a run, a document repeated
    return doc


def structural(seed: bytes, rng: random.Random) -> bytes:
    values = [json.loads(line) for line in seed.decode().splitlines() if line.strip()] \
        if seed.lstrip()[:1] != b"[" and b"\n{" in seed.strip() and not seed.lstrip().startswith(b'{\n') \
        else None
    if values is None:  # one JSON document (maybe pretty): edit it whole
        dec = json.JSONDecoder()
        text, i, values = seed.decode(), 0, []
        while i < len(text):
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            v, i = dec.raw_decode(text, i)
            values.append(v)
    values = [_open(v) for v in values]
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(values))
        values[k] = _edit(values[k], rng)
    values = [_close(v) for v in values]
    if rng.random() < 0.15:
        values = values + values  # the exporter appended twice
    return "".join(json.dumps(v) + "\n" for v in values).encode()


@contextlib.contextmanager
def _bounded(what: str):
    def hang(*_):
        raise TimeoutError(f"{what}: no answer in {SECONDS} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _invoke(args: list[str], what: str):
    with _bounded(what):
        r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        import traceback

        pytest.fail(f"{what}: {type(r.exception).__name__} escaped:\n"
                    + "".join(traceback.format_exception(r.exception)))
    assert "Traceback" not in r.output, what
    return r


def check_mutant(tmp_path, data: bytes, name: str, what: str) -> str:
    """import-traces on ``data``: refused in one line, or accepted and read back by eval-rag (exit
    0)."""
    path = tmp_path / name
    path.write_bytes(data)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in LABELS))
    out = tmp_path / "out.jsonl"
    r = _invoke(["import-traces", path, "-o", out, "--testset", labels, "--force"], what)
    assert r.exit_code in (0, 2), f"{what}: exit {r.exit_code}: {r.output[-400:]}"
    if r.exit_code == 2:
        err = r.stderr.strip("\n").split("\n")
        assert len(err) == 1 and err[0].startswith("rankwise: error: "), f"{what}: {err}"
        return "refused"
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").split("\n") if x]  # not splitlines: U+2028
    # every case scorable: the labels' passage lent to those the test set did not match
    for row in rows:
        row.setdefault("reference_contexts", LABELS[0]["reference_contexts"])
        if not row["reference_contexts"]:
            row["reference_contexts"] = LABELS[0]["reference_contexts"]
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    read = []
    for relevance in ("span", "containment"):
        back = _invoke(["eval-rag", scored, "-r", relevance, "-k", "1,3", "--quiet"], what)
        if back.exit_code == 2 and f"so no '{relevance}' verdict could be given" in back.stderr:
            continue  # no chunk carries what this source reads (offsets, text): said with the fix, exit 2,
            # never means of 0 (docs/context-metrics.md, "When nothing can match"); the file itself
            # reads
        assert back.exit_code == 0, f"{what}: import-traces wrote what eval-rag -r {relevance} refuses: " \
                                    f"{back.output[-600:]}"
        read.append(relevance)
    return "read back" if read else "read back; no source can judge its chunks (said)"


def _shown(data: bytes) -> str:
    return repr(data if len(data) < 400 else data[:400] + b"...")


@pytest.mark.parametrize("fmt", sorted(_otlp_phoenix_free()))
def test_every_accepted_mutant_reads_back_through_eval_rag(tmp_path, fmt):
    seed = _otlp_phoenix_free()[fmt]
    rng = random.Random(f"traces-{fmt}")
    outcomes: dict[str, int] = {}
    for i in range(MUTANTS):
        data = structural(seed, rng) if i % 3 else mutate(seed, rng)
        got = check_mutant(tmp_path, data, "traces.json", f"{fmt} mutant {i} {_shown(data)}")
        outcomes[got] = outcomes.get(got, 0) + 1
    assert outcomes.get("read back", 0) > MUTANTS // 5 and outcomes.get("refused", 0) > 0, outcomes


def test_phoenix_mutants_read_back(tmp_path):
    pd = need("pandas")
    rng = random.Random("traces-phoenix")
    base = [{"context.trace_id": "1" * 32, "context.span_id": "a" * 16, "parent_id": None, "span_kind": "CHAIN",
             "name": "rag", "attributes.input.value": "a?", "start_time": 1},
            {"context.trace_id": "1" * 32, "context.span_id": "b" * 16, "parent_id": "a" * 16,
             "span_kind": "RETRIEVER", "name": "r", "attributes.input.value": "a?", "start_time": 2,
             "attributes.retrieval.documents": json.dumps([
                 {"document.id": "c1", "document.content": "alpha beta",
                  "document.metadata": {"source": "d1", "start_index": 0}}])}]
    counts: dict[str, int] = {}
    for i in range(MUTANTS // 2):
        rows = copy.deepcopy(base)
        rows = _edit(rows, rng)
        if rng.random() < 0.3:
            rows = rows + rows[1:]
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and isinstance(row.get("attributes.retrieval.documents"), str):
                with contextlib.suppress(ValueError):
                    row["attributes.retrieval.documents"] = json.loads(row["attributes.retrieval.documents"])
        try:
            frame = pd.DataFrame([r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else [])
            frame.to_parquet(tmp_path / "spans.parquet")
        except Exception:  # noqa: BLE001 - a mutant pandas/pyarrow cannot store is no Phoenix export
            continue
        got = check_mutant(tmp_path, (tmp_path / "spans.parquet").read_bytes(), "m.parquet", f"phoenix mutant {i}")
        counts[got] = counts.get(got, 0) + 1
    assert counts.get("read back", 0) > 5, counts


def _console_doc(**attrs) -> bytes:
    span = {"name": "r", "context": {"trace_id": "0x" + "5" * 32, "span_id": "0x" + "f" * 16}, "parent_id": None,
            "start_time": "2026-01-01T00:00:01Z",
            "attributes": {"openinference.span.kind": "RETRIEVER", "input.value": "a?", **attrs}}
    return json.dumps(span).encode()


#: mutants that once gave exit 0 at import and a refusal (or a traceback) afterwards
REGRESSIONS = {
    "no content, a uuid for id": _console_doc(**{"retrieval.documents.0.document.score": 0.5,
                                                 "retrieval.documents.0.document.id":
                                                     "f31616f7-d123-4bc9-a075-5f192c65937d",
                                                 "retrieval.documents.1.document.content": "alpha beta"}),
    "no content, no id": _console_doc(**{"retrieval.documents.0.document.score": 0.5,
                                             "retrieval.documents.0.document.metadata": '{"x": 1}',
                                             "retrieval.documents.1.document.content": "alpha beta"}),
    "start_index 1e30": _console_doc(**{"retrieval.documents.0.document.content": "alpha beta",
                                        "retrieval.documents.0.document.metadata":
                                            '{"source": "d1", "start_index": 1e30}'}),
    "start_index -40": _console_doc(**{"retrieval.documents.0.document.content": "alpha beta",
                                       "retrieval.documents.0.document.metadata":
                                           '{"source": "d1", "start_index": -40}'}),
    "start_index 2**63 - 2": _console_doc(**{"retrieval.documents.0.document.content": "alpha beta",
                                             "retrieval.documents.0.document.metadata":
                                                 '{"source": "d1", "start_index": 9223372036854775806}'}),
    "end past 2**63": _console_doc(**{"retrieval.documents.0.document.content": "alpha beta",
                                      "retrieval.documents.0.document.metadata":
                                          '{"source": "d1", "start_index": 0, "end": 1e19}'}),
    "score past a float's range": TRACES_OTLP.replace(b'{"intValue": "2"}', b'{"intValue": "1' + b"0" * 400 + b'"}'),
    "kind a list": TRACES_CONSOLE.replace(b'"RETRIEVER"', b'["RETRIEVER"]') + b"\n" + _console_doc(
        **{"retrieval.documents.0.document.content": "alpha beta"}),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_mutants_that_broke_it_read_back(tmp_path, name):
    assert check_mutant(tmp_path, REGRESSIONS[name], "traces.json", name) == "read back"


def test_a_chunk_placed_by_a_passage_near_2_63_is_left_unplaced(tmp_path):
    labels = [{"id": "q1", "question": "a?", "reference_contexts": [
        {"text": "alpha beta", "doc_id": "d1", "start": 2**63 - 12, "end": 2**63 - 2}]}]
    (tmp_path / "labels.jsonl").write_text(json.dumps(labels[0]) + "\n")
    text = "alpha beta" + "x" * 20  # placed at the passage's start, it would end past 2**63
    (tmp_path / "t.json").write_bytes(_console_doc(**{"retrieval.documents.0.document.content": text}))
    from rankwise.traces import import_traces

    imp = import_traces(tmp_path / "t.json", testset=tmp_path / "labels.jsonl")
    assert imp.testset[0].chunks[0].start is None and imp.summary()["located"] == {"not found": 1}
