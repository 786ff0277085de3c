"""Fuzzing every input kind (issue 10, items 7-11): a seeded mutator makes a few hundred mutants of
each small, valid file; each mutant is read by the library and must give a result or an InputError
(never another exception); TREC mutants are read by the fast (Arrow) path and by the exact
line-by-line reader, which must agree (same run/qrels or the same error); a share of the mutants
goes through the CLI, which must exit 0, or 2 with one line on stderr, and never print a traceback.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import random
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data import text, trec
from rankwise.data.load import load_qrels, load_run
from rankwise.data.records import load_records
from rankwise.data.stream import NotGrouped, _text_batches, iter_run_blocks
from rankwise.data.testset import load_testset
from rankwise.data.text import normalize_lines
from rankwise.errors import InputError
from rankwise.relevance.human import read_labels
from rankwise.traces import import_traces

MUTANTS = int(os.environ.get("RANKWISE_FUZZ_MUTANTS", "300"))
CLI_SHARE = 4  # every 4th mutant also goes through the CLI in-process

TREC_RUN = b"q1 Q0 d1 1 2.5 sys\nq1 Q0 d2 2 1.5 sys\n# a comment\nq2 Q0 d3 1 0.75 sys\nq2 Q0 d1 2 0.25 sys\n"
TREC_QRELS = b"q1 0 d1 1\nq1 0 d3 0\nq2 0 d3 2\nq2 0 d9 1\n"
CSV_RUN = b"query_id,doc_id,score\nq1,d1,2.5\nq1,d2,1.5\nq2,d3,0.75\nq2,d1,0.25\n"
TSV_QRELS = b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t0\nq2\td3\t2\n"
JSONL_RUN = (b'{"query_id": "q1", "doc_id": "d1", "score": 2.5}\n{"query_id": "q1", "doc_id": "d2", "score": 1.5}\n'
             b'{"query_id": "q2", "doc_id": 3, "score": 0.75}\n')
JSONL_QRELS = (b'{"query_id": "q1", "doc_id": "d1", "relevance": 1}\n{"query_id": "q2", "doc_id": 3, "relevance": 2}\n'
               b'{"query_id": "q2", "doc_id": "d9", "relevance": 0}\n')
TESTSET_JSONL = (
    b'{"id": "q1", "user_input": "a?", "reference": "alpha beta", "retrieved_contexts": [{"id": "c1", '
    b'"text": "alpha beta gamma", "doc_id": "d1", "start": 0, "end": 16, "score": 0.5}, "plain chunk"], '
    b'"reference_contexts": ["alpha beta"]}\n'
    b'{"id": "q2", "user_input": "b?", "retrieved_contexts": [{"id": "c2", "text": "delta"}], '
    b'"reference_contexts": [{"text": "delta", "doc_id": "d2", "start": 0, "end": 5}]}\n'
)
TESTSET_CSV = (b'id,user_input,retrieved_contexts,reference_contexts\n'
               b'q1,a?,"[""alpha beta"", ""gamma""]","[""alpha""]"\nq2,b?,"[""delta""]","[""delta""]"\n')
RECORDS_JSONL = (
    b'{"id": "q1", "question": "a?", "reference_contexts": ["alpha"], "chunks": [{"rank": 1, "id": "c1", '
    b'"text": "alpha beta", "doc_id": "d1", "start": 0, "end": 10, "score": 0.5, "verdicts": {"llm": '
    b'{"verdict": 1, "grade": 2, "reason": "r"}}}, {"rank": 2, "id": "c2", "text": "gamma"}]}\n'
    b'{"id": "q2", "question": "b?", "reference_contexts": [{"text": "delta", "doc_id": "d2", "start": 0, '
    b'"end": 5}], "chunks": [{"rank": 1, "id": "c3", "text": "delta", "doc_id": "d2", "start": 0, "end": 5}]}\n'
)
TESTSET_CALLS_JSONL = (
    b'{"id": "q1", "user_input": "a?", "calls": [{"position": 0, "query": "a first", "span_id": "s1", '
    b'"trace_id": "t1", "chunks": [{"id": "c1", "text": "alpha beta", "score": 0.9}, "gamma"]}, {"position": 1, '
    b'"query": "a then", "chunks": [{"id": "c1", "text": "alpha beta"}, {"id": "c2", "text": "delta", '
    b'"doc_id": "d2", "start": 0, "end": 5}]}], "reference_contexts": [{"text": "alpha beta", "hop": 0}, '
    b'{"text": "delta", "doc_id": "d2", "start": 0, "end": 5, "hop": 1}]}\n'
    b'{"id": "q2", "user_input": "b?", "retrieved_contexts": ["delta"], "reference_contexts": ["delta"]}\n'
)
RECORDS_CALLS_JSONL = (
    b'{"id": "q1", "question": "a?", "reference_contexts": [{"text": "alpha", "hop": 0}, {"text": "gamma", '
    b'"hop": 1}], "chunks": [{"rank": 1, "id": "c1", "text": "alpha beta", "verdicts": {"llm": {"verdict": 1}}}, '
    b'{"rank": 2, "id": "c2", "text": "gamma"}], "calls": [{"position": 0, "query": "x", "span_id": "s", '
    b'"trace_id": "t", "chunks": [{"rank": 1, "id": "c1", "text": "alpha beta"}]}, {"position": 1, "query": "y", '
    b'"chunks": [{"rank": 1, "id": "c2", "text": "gamma"}]}]}\n'
)
LABELS_CSV = b"query_id,chunk_id,rank,verdict,type,grade\nq1,c1,1,1,answer,2\nq1,,2,0,irrelevant,0\nq2,c2,1,yes,,1\n"

def _otlp_attr(k, v):
    return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}


TRACES_OTLP = json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"},
    "spans": [
        {"traceId": "5d27cd8d41ef33f30305e646ad80c2aa", "spanId": "66167d1ebddcdb15", "parentSpanId": "",
         "name": "agent", "startTimeUnixNano": "1000", "attributes": [_otlp_attr("openinference.span.kind", "CHAIN"),
                                                                      _otlp_attr("input.value", "a?")]},
        {"traceId": "5d27cd8d41ef33f30305e646ad80c2aa", "spanId": "fbd159065a44841f",
         "parentSpanId": "66167d1ebddcdb15", "name": "r", "startTimeUnixNano": "2000", "attributes": [
             _otlp_attr("openinference.span.kind", "RETRIEVER"), _otlp_attr("input.value", "alpha"),
             _otlp_attr("retrieval.documents.0.document.content", "alpha beta"),
             _otlp_attr("retrieval.documents.0.document.id", "c1"),
             _otlp_attr("retrieval.documents.0.document.metadata", '{"source": "d1", "start_index": 0}'),
             _otlp_attr("retrieval.documents.1.document.content", "gamma")]},
        {"traceId": "5d27cd8d41ef33f30305e646ad80c2aa", "spanId": "bf631c861b96ae86",
         "parentSpanId": "66167d1ebddcdb15", "name": "r", "startTimeUnixNano": "3000", "attributes": [
             _otlp_attr("openinference.span.kind", "RETRIEVER"), _otlp_attr("input.value", "beta"),
             _otlp_attr("retrieval.documents.0.document.content", "delta"),
             _otlp_attr("retrieval.documents.0.document.score", 2)]}]}]}]}).encode() + b"\n"
TRACES_CONSOLE = (json.dumps({"name": "rag", "context": {"trace_id": "0x5d27cd8d41ef33f30305e646ad80c2aa",
                                                        "span_id": "0x66167d1ebddcdb15"}, "parent_id": None,
                              "start_time": "2026-01-01T00:00:00.000000Z",
                              "attributes": {"openinference.span.kind": "CHAIN", "input.value": "a?",
                                             "output.value": "alpha"}}, indent=4) + "\n" +
                  json.dumps({"name": "r", "context": {"trace_id": "0x5d27cd8d41ef33f30305e646ad80c2aa",
                                                      "span_id": "0xfbd159065a44841f"},
                              "parent_id": "0x66167d1ebddcdb15", "start_time": "2026-01-01T00:00:01.000000Z",
                              "attributes": {"openinference.span.kind": "RETRIEVER", "input.value": "a?",
                                             "retrieval.documents.0.document.content": "alpha beta",
                                             "retrieval.documents.0.document.metadata": '{"source": "d1"}',
                                             "output.value": '{"documents": [{"id": "c1"}]}'}}, indent=4)
                  + "\n").encode()
TRACES_LANGSMITH = json.dumps([
    {"id": "r1", "trace_id": "r1", "parent_run_id": None, "run_type": "chain", "start_time": "2026-01-01T00:00:00",
     "inputs": {"question": "a?"}, "outputs": {"output": "alpha"}, "extra": {"metadata": {"case_id": "q1"}}},
    {"id": "r2", "trace_id": "r1", "parent_run_id": "r1", "run_type": "retriever", "start_time": "2026-01-01T00:00:01",
     "inputs": {"query": "a"}, "outputs": {"documents": [{"page_content": "alpha beta", "metadata": {
         "source": "d1", "start_index": 0}}, {"page_content": "gamma", "metadata": {}}]}}], indent=1).encode()
TRACES_MLFLOW = json.dumps({"info": {"trace_id": "tr-1", "trace_metadata": {"case_id": "q1"}}, "data": {"spans": [
    {"trace_id": "KjuBEADv/EB7nkjQHmI0lQ==", "span_id": "Bua8hayUHf0=", "parent_span_id": None, "name": "agent",
     "start_time_unix_nano": 1, "attributes": {"mlflow.spanType": '"CHAIN"', "mlflow.spanInputs": '{"question": "a?"}',
                                               "mlflow.spanOutputs": '"alpha"'}},
    {"trace_id": "KjuBEADv/EB7nkjQHmI0lQ==", "span_id": "C3ALIIS7JNs=", "parent_span_id": "Bua8hayUHf0=",
     "name": "retrieve", "start_time_unix_nano": 2, "attributes": {
         "mlflow.spanType": '"RETRIEVER"', "mlflow.spanInputs": '{"query": "a"}',
         "mlflow.spanOutputs": '[{"page_content": "alpha beta", "metadata": {"doc_uri": "d1"}, "id": "c1"}]'}}]}}
).encode() + b"\n"

TOKENS = [
    b" ", b"  ", b"\t", b"\r", b"\n", b"\r\n", b"\x00", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"#", b'"', b",", b"{",
    b"}", b"[", b"]", b":", b"\\", b'"\\ud800"', b"\\udc00", b"null", b"true", b"false", b"[]", b"{}", b"1.5", b"-1",
    b"inf", b"-inf", b"nan", b"1e400", b"-1e400", b"0x10", b"1_0", b"+3", b"2.0", b"99999999999999999999",
    b"1" + b"0" * 400, b"[" * 3000, b'{"a":' * 3000, b"x" * 140_000, b'"' + b"y" * 140_000 + b'"',
    b"\xe2\x80\xa8", b"\x0b", b"\x0c", b"\xc2\xa0", b"\xd9\xa3", b"\xed\xa0\x80", b"<!--<script>", b"Q0", b"\"\"",
]
FIELD = re.compile(rb"[^ \t\r\n,:{}\[\]\"]+")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random edits: tokens inserted or swapped in, bytes and lines dropped, doubled,
    moved, line endings changed, a byte-order mark added."""
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(10)
        pos = rng.randrange(len(data) + 1)
        if op == 0:
            data = data[:pos] + rng.choice(TOKENS) + data[pos:]
        elif op in (1, 2):  # replace one field (an id, a number, a word) by a token
            fields = list(FIELD.finditer(data))
            if fields:
                m = rng.choice(fields)
                data = data[: m.start()] + rng.choice(TOKENS) + data[m.end():]
        elif op == 3 and data:
            data = data[:pos] + data[pos + rng.randint(1, 4):]
        elif op == 4:
            lines = data.split(b"\n")
            i = rng.randrange(len(lines))
            action = rng.randrange(3)
            if action == 0:
                lines.insert(i, lines[i])
            elif action == 1:
                del lines[i]
            else:
                j = rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif op == 5:
            data = data.replace(b"\n", rng.choice([b"\r", b"\r\n", b"\n\n"]))
        elif op == 6:
            data = b"\xef\xbb\xbf" + data
        elif op == 7:
            data = data.replace(b" ", b"  ", 1) if rng.random() < 0.5 else data.replace(b" ", b"\t")
        elif op == 8 and data:
            data = data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1:]
        else:
            data = data[:pos] + rng.choice(TOKENS) * rng.randint(1, 3) + data[pos:]
    return data


def mutants(seed_data: bytes, seed: int, n: int = MUTANTS) -> list[bytes]:
    rng = random.Random(seed)
    return [mutate(seed_data, rng) for _ in range(n)]


def _outcome(read, path: Path):
    """What reading gives: ("ok", comparable value) or ("error", message); any other exception
    fails."""
    try:
        value = read(path)
    except InputError as exc:
        assert "\n" not in str(exc), f"multi-line error: {exc!r}"
        return "error", str(exc)
    return "ok", value


def _run_key(run):
    scores = None if run.scores is None else run.scores.tolist()
    return run.queries, run.offsets.tolist(), run.doc_ids.to_pylist(), scores, run.kind, run.tag


def _qrels_key(qrels):
    return qrels.queries, qrels.offsets.tolist(), qrels.doc_ids.to_pylist(), qrels.grades.tolist()


def _both_paths(read, key, path: Path):
    fast = _outcome(read, path)
    trec._EXACT_ONLY = True
    try:
        exact = _outcome(read, path)
    finally:
        trec._EXACT_ONLY = False
    if fast[0] == "ok":
        fast = ("ok", key(fast[1]))
    if exact[0] == "ok":
        exact = ("ok", key(exact[1]))
    return fast, exact


def _takes_fast(data: bytes, kind: str) -> bool:
    """True when the fast path reads ``data`` itself (no fallback to the exact reader)."""
    import pyarrow as pa

    try:
        data = normalize_lines(data, "x")
    except InputError:
        return False
    if kind == "run":
        return trec._fast_columns(data, trec._RUN_FIELDS, {"query_id": pa.string(), "doc_id": pa.string(),
                                                            "score": pa.float64()}) is not None
    cols = trec._fast_columns(data, trec._QRELS_FIELDS, {"query_id": pa.string(), "doc_id": pa.string(),
                                                          "relevance": pa.string()})
    return cols is not None and trec._decimal_ints(cols["relevance"]) is not None


@pytest.fixture(autouse=True, scope="module")
def _unfreeze():
    """Objects :func:`_check_cli` froze are the collector's again after this module."""
    yield
    gc.unfreeze()


def _check_cli(args: list[str], what: str):
    gc.collect()  # objects leaked by earlier tests are reclaimed here, not inside this mutant's capture
    gc.freeze()  # and what lives on is not scanned again by the next call's collect (5x faster checks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(main, args)
    # a warning is one more line on a real process's stderr
    assert not caught, f"{what}: warnings {[str(w.message)[:200] for w in caught]}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"{what}: {type(result.exception).__name__} escaped the CLI:\n{tb}")
    assert result.exit_code in (0, 2), f"{what}: exit {result.exit_code}: {result.output[-500:]}"
    assert "Traceback" not in result.output, what
    if result.exit_code == 2:
        err = result.stderr.strip("\n")
        *warned, last = err.split("\n")  # one-line warnings (rankwise: warning: ...) may come first
        assert all(w.startswith("rankwise: warning: ") for w in warned), f"{what}: stderr {err[:500]!r}"
        assert last.startswith("rankwise: error: "), f"{what}: stderr {err[:500]!r}"
    return result


def _shown(data: bytes) -> str:
    return repr(data if len(data) < 300 else data[:300] + b"...")


# ----------------------------------------------------------------------------------- TREC: two
# readers
@pytest.mark.parametrize("mapped", [False, True], ids=["read", "mapped"])
@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_trec_fast_and_exact_readers_agree_on_every_mutant(tmp_path, monkeypatch, kind, mapped):
    if mapped:  # every mutant memory-mapped, as a large file is (data/text.read_lines)
        monkeypatch.setattr(text, "MAP_AT_LEAST", 0)
    seed_data, read, key = ((TREC_RUN, trec.read_trec_run, _run_key) if kind == "run"
                            else (TREC_QRELS, trec.read_trec_qrels, _qrels_key))
    other = tmp_path / ("qrels.txt" if kind == "run" else "run.trec")
    other.write_bytes(TREC_QRELS if kind == "run" else TREC_RUN)
    counts = Counter()
    for i, data in enumerate(mutants(seed_data, seed=7 if kind == "run" else 8)):
        path = tmp_path / f"m{i}.{'trec' if kind == 'run' else 'qrels'}"
        path.write_bytes(data)
        fast, exact = _both_paths(read, key, path)
        assert fast == exact, f"readers disagree on {_shown(data)}:\nfast  {fast}\nexact {exact}"
        if kind == "run" and fast[0] == "ok":  # the tag from the bytes read is the file end's
            assert fast[1][-1] == trec.run_tag(path), _shown(data)
        counts[(fast[0], "fast" if _takes_fast(data, kind) else "exact")] += 1
        if i % CLI_SHARE == 0:
            args = ["eval", str(other), str(path)] if kind == "run" else ["eval", str(path), str(other)]
            code = _check_cli(args + ["-m", "map,P@1"], _shown(data)).exit_code
            assert (code == 0) == (fast[0] == "ok"), _shown(data)
    # the mutants exercise both outcomes and both paths
    assert counts[("ok", "fast")] > 20 and counts[("ok", "exact")] > 20 and counts[("error", "exact")] > 20, counts


# ------------------------------------------------------------------------ every other input kind
def _eval_args(kind: str, path: Path, tmp: Path) -> list[str]:
    qrels = tmp / "seed.qrels.txt"
    run = tmp / "seed.run.trec"
    qrels.write_bytes(TREC_QRELS)
    run.write_bytes(TREC_RUN)
    if kind.endswith("run"):
        return ["eval", str(qrels), str(path), "-m", "map,ndcg@3"]
    return ["eval", str(path), str(run), "-m", "map,ndcg@3"]


def _traces_args(kind: str, path: Path, tmp: Path) -> list[str]:
    return ["import-traces", str(path), "-o", str(path) + ".out.jsonl", "--force"]


def _rag_args(kind: str, path: Path, tmp: Path) -> list[str]:
    if kind == "labels_csv":
        testset = tmp / "seed.testset.jsonl"
        testset.write_bytes(TESTSET_JSONL)
        return ["eval-rag", str(testset), "-r", "human", "--labels", str(path), "-k", "1,2", "--quiet"]
    return ["eval-rag", str(path), "-k", "1,2", "--quiet"]


KINDS = {
    "csv_run": ("run.csv", CSV_RUN, lambda p: _run_key(load_run(p)), _eval_args),
    "tsv_qrels": ("qrels.tsv", TSV_QRELS, lambda p: _qrels_key(load_qrels(p)), _eval_args),
    "jsonl_run": ("run.jsonl", JSONL_RUN, lambda p: _run_key(load_run(p)), _eval_args),
    "jsonl_qrels": ("qrels.jsonl", JSONL_QRELS, lambda p: _qrels_key(load_qrels(p)), _eval_args),
    "testset_jsonl": ("testset.jsonl", TESTSET_JSONL, lambda p: len(load_testset(p)), _rag_args),
    "testset_csv": ("testset.csv", TESTSET_CSV, lambda p: len(load_testset(p)), _rag_args),
    "labels_csv": ("labels.csv", LABELS_CSV, lambda p: len(read_labels(p)), _rag_args),
    "records_jsonl": ("records.jsonl", RECORDS_JSONL, lambda p: len(load_records(p)), _rag_args),
    "with_calls_testset": ("testset.jsonl", TESTSET_CALLS_JSONL, lambda p: len(load_testset(p)), _rag_args),
    "with_calls_records": ("records.jsonl", RECORDS_CALLS_JSONL, lambda p: len(load_records(p)), _rag_args),
    "traces_otlp": ("traces.json", TRACES_OTLP, lambda p: len(import_traces(p).testset), _traces_args),
    "traces_console": ("spans.json", TRACES_CONSOLE, lambda p: len(import_traces(p).testset), _traces_args),
    "traces_langsmith": ("runs.json", TRACES_LANGSMITH, lambda p: len(import_traces(p).testset), _traces_args),
    "traces_mlflow": ("mlflow.json", TRACES_MLFLOW, lambda p: len(import_traces(p).testset), _traces_args),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_mutant_reads_or_fails_with_one_line(tmp_path, kind):
    name, seed_data, read, cli_args = KINDS[kind]
    outcomes = Counter()
    for i, data in enumerate(mutants(seed_data, seed=sorted(KINDS).index(kind) + 100)):
        path = tmp_path / f"m{i}.{name}"
        path.write_bytes(data)
        outcomes[_outcome(read, path)[0]] += 1
        if i % CLI_SHARE == 0:
            _check_cli(cli_args(kind, path, tmp_path), f"{kind} {_shown(data)}")
    assert outcomes["ok"] > 10 and outcomes["error"] > 10, outcomes


def test_a_sample_through_real_processes(tmp_path):
    """A few mutants of each kind through the installed entry point, in real processes."""
    rng = random.Random(5)
    procs = []
    for kind, (name, seed_data, _, cli_args) in sorted(KINDS.items()):
        for j, data in enumerate(mutants(seed_data, seed=rng.randrange(10**6), n=1)):
            path = tmp_path / f"p{j}.{name}"
            path.write_bytes(data)
            args = cli_args(kind, path, tmp_path)
            procs.append((kind, data, subprocess.Popen([sys.executable, "-m", "rankwise.cli", *args],
                                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
        while len(procs) > 1 and procs[-2][2].poll() is None:
            procs[-2][2].wait()
    for kind, data, proc in procs:
        out, err = proc.communicate(timeout=120)
        text = err.decode("utf-8", "replace")
        assert proc.returncode in (0, 2), f"{kind} {_shown(data)}: rc {proc.returncode}: {text[-800:]}"
        assert "Traceback" not in text
        if proc.returncode == 2:
            lines = text.splitlines()
            assert all(w.startswith("rankwise: warning: ") for w in lines[:-1]), text
            assert lines[-1].startswith("rankwise: error: ") and text.endswith("\n"), text


# ------------------------------------------------------------------ each defect of items 7-11, by
# name
def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _same_both_paths(read, key, path):
    fast, exact = _both_paths(read, key, path)
    assert fast == exact
    return fast


def test_cr_only_and_crlf_trec_files(tmp_path):
    qrels = _write(tmp_path, "q.txt", b"q1 0 d1 1\rq1 0 d2 1\r")
    for ending in (b"\r", b"\r\n"):
        run = _write(tmp_path, "r.trec", b"q1 Q0 d1 1 2 s" + ending + b"q1 Q0 d2 2 1 s" + ending)
        got = _same_both_paths(trec.read_trec_run, _run_key, run)
        assert got[1][2] == ["d1", "d2"]
        assert _same_both_paths(trec.read_trec_qrels, _qrels_key, qrels)[1][3] == [1, 1]
        result = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "map,num_ret", "--format", "json"])
        assert result.exit_code == 0 and '"map": 1.0' in result.stdout.replace(" 1,", " 1.0,")


def test_bom_is_dropped_by_every_reader(tmp_path):
    bom = b"\xef\xbb\xbf"
    run = _write(tmp_path, "r.trec", bom + b"q1 Q0 d1 1 2 s\nq1 Q0 d2 2 1 s\n")
    assert _same_both_paths(trec.read_trec_run, _run_key, run)[1][0] == ["q1"]
    run2 = _write(tmp_path, "r2.trec", bom + b"q1  Q0 d1 1 2 s\nq1 Q0 d2 2 1 s\n")  # the exact path
    assert _same_both_paths(trec.read_trec_run, _run_key, run2)[1][0] == ["q1"]
    assert _same_both_paths(trec.read_trec_qrels, _qrels_key, _write(tmp_path, "q", bom + b"q1 0 d1 1\n"))[1][0] == ["q1"]
    assert load_run(_write(tmp_path, "r.csv", bom + b"query_id,doc_id,score\nq1,d1,1\n")).queries == ["q1"]
    assert load_qrels(_write(tmp_path, "q.tsv", bom + b"query-id\tcorpus-id\tscore\nq1\td1\t1\n")).queries == ["q1"]
    assert load_run(_write(tmp_path, "r.jsonl", bom + b'{"query_id": "q1", "doc_id": "d1"}\n')).queries == ["q1"]
    assert load_qrels(_write(tmp_path, "q.jsonl", bom + b'{"qid": "q1", "doc_id": "d", "rel": 1}\n')).queries == ["q1"]
    assert len(load_testset(_write(tmp_path, "t.jsonl", bom + TESTSET_JSONL))) == 2
    assert len(load_testset(_write(tmp_path, "t.csv", bom + TESTSET_CSV))) == 2
    assert len(read_labels(_write(tmp_path, "l.csv", bom + LABELS_CSV))) == 3


@pytest.mark.parametrize("data, problem", [
    (b"q1\t0\td1\t1\n\t0\td2\t1\n", "expected 4 fields"),  # no query id: the fast path read ""
    (b"q1 0 d1 1\nq1 0 d2 0x10\n", "not an integer: '0x10'"),
    (b"q1 0 d1 1\nq1 0 d2 99999999999999999999\n", "out of range"),
    (b"q1 0 d1 1\nq1 0 d2 1_0\n", "not an integer"),
    (b"q1 0 d1 1\nq1 0 d2 \xd9\xa3\n", "not an integer"),
    (b"q1 0 d1 1\nq1 0 d\xff2 1\n", "not UTF-8"),
    (b"q1 0 d1 1\nq1 0\xff d2 1\n", "not UTF-8"),
])
def test_trec_qrels_errors_in_both_paths(tmp_path, data, problem):
    kind, message = _same_both_paths(trec.read_trec_qrels, _qrels_key, _write(tmp_path, "q.txt", data))
    assert kind == "error" and ":2:" in message and problem in message, message


@pytest.mark.parametrize("score", [b"inf", b"1e400", b"-1e400", b"nan", b"1" + b"0" * 400, b"1_0", b"Infinity"])
def test_trec_scores_beyond_float_are_errors(tmp_path, score):
    run = _write(tmp_path, "r.trec", b"q1 Q0 d1 1 2 s\nq1 Q0 d2 2 " + score + b" s\n")
    kind, message = _same_both_paths(trec.read_trec_run, _run_key, run)
    assert kind == "error" and "r.trec:2: field 'score'" in message


def test_a_doubled_space_changes_nothing(tmp_path):
    lines = [f"q{i % 7} Q0 d{i} {i} {1.0 / (i + 1)!r} s" for i in range(200)]
    plain = _write(tmp_path, "a.trec", ("\n".join(lines) + "\n").encode())
    lines[150] = lines[150].replace(" ", "  ", 1)
    doubled = _write(tmp_path, "b.trec", ("\n".join(lines) + "\n").encode())
    assert _run_key(trec.read_trec_run(plain)) == _run_key(trec.read_trec_run(doubled))
    # with a byte-order mark too: the doubled space used to switch readers, and only one dropped the
    # mark
    with_bom = [_write(tmp_path, f"{n}.trec", b"\xef\xbb\xbf" + p.read_bytes()) for n, p in (("c", plain), ("d", doubled))]
    assert _run_key(trec.read_trec_run(with_bom[0])) == _run_key(trec.read_trec_run(with_bom[1]))
    assert _run_key(trec.read_trec_run(with_bom[0])) == _run_key(trec.read_trec_run(plain))


@pytest.mark.parametrize("value, shown", [("null", "null"), ("true", "a boolean"), ("[1]", "a list"),
                                          ('{"a": 1}', "an object"), ("1.5", "a float"), ('""', "empty id")])
def test_jsonl_ids_must_be_strings_or_integers(tmp_path, value, shown):
    path = _write(tmp_path, "r.jsonl", b'{"query_id": "q1", "doc_id": "d1"}\n{"query_id": %s, "doc_id": "d2"}\n'
                  % value.encode())
    with pytest.raises(InputError) as err:
        load_run(path)
    assert err.value.line == 2 and err.value.field == "query_id" and shown in str(err.value)
    qrels = _write(tmp_path, "q.jsonl", b'{"query_id": "q1", "doc_id": %s, "relevance": 1}\n' % value.encode())
    with pytest.raises(InputError) as err:
        load_qrels(qrels)
    assert err.value.line == 1 and err.value.field == "doc_id"
    ok = load_run(_write(tmp_path, "ok.jsonl", b'{"query_id": 7, "doc_id": 8}\n'))
    assert ok.queries == ["7"] and ok.ranking("7") == ["8"]


@pytest.mark.parametrize("name, data, line", [
    ("q.jsonl", b'{"query_id": "q", "doc_id": "d", "relevance": 1e400}\n', 1),
    ("q.jsonl", b'{"query_id": "q", "doc_id": "d", "relevance": 99999999999999999999}\n', 1),
    ("q.tsv", b"query-id\tcorpus-id\tscore\nq\td\t99999999999999999999\n", 2),
    ("q.tsv", b"query-id\tcorpus-id\tscore\nq\td\tinf\n", 2),
    ("r.jsonl", b'{"query_id": "q", "doc_id": "d", "score": 1' + b"0" * 400 + b"}\n", 1),
    ("r.jsonl", b'{"query_id": "q", "doc_id": "d", "score": 1}\n{"query_id": "q", "doc_id": "e"}\n', 2),
    ("r.jsonl", b'{"query_id": "q", "doc_id": "\\ud800"}\n', 1),
    ("r.jsonl", b"[" * 100_000 + b"\n", 1),
    ("r.csv", b"query_id,doc_id,score\nq,d\r1,1\n", None),
])
def test_no_traceback_and_a_line(tmp_path, name, data, line):
    path = _write(tmp_path, name, data)
    with pytest.raises(InputError) as err:
        (load_run if name.startswith("r") else load_qrels)(path)
    if line is not None:
        assert err.value.line == line, str(err.value)


def test_lone_surrogates_in_every_json_input(tmp_path):
    cases = [("t.jsonl", b'{"id": "q1", "user_input": "\\ud800", "retrieved_contexts": ["a"]}\n', load_testset),
             ("t.csv", b'id,user_input,retrieved_contexts\nq1,a,"[""\\udc00x""]"\n', load_testset),
             ("t.json", b'[{"id": "q1", "user_input": "a", "retrieved_contexts": ["\\ud83d"]}]', load_testset),
             ("l.jsonl", b'{"query_id": "q1", "rank": 1, "verdict": 1, "reason": "\\ud800"}\n', read_labels)]
    for name, data, read in cases:
        with pytest.raises(InputError, match="lone surrogate"):
            read(_write(tmp_path, name, data))
    paired = load_testset(_write(tmp_path, "ok.jsonl", b'{"id": "q", "retrieved_contexts": ["\\ud83d\\ude00"]}\n'))
    assert paired["q"].chunks[0].text == "\U0001F600"


def test_long_csv_fields_and_cr_only_csv(tmp_path):
    long_id = "x" * 200_000
    run = load_run(_write(tmp_path, "r.csv", f"query_id,doc_id,score\rq1,{long_id},1\rq1,d2,0.5\r".encode()))
    assert run.ranking("q1") == [long_id, "d2"]
    ts = load_testset(_write(tmp_path, "t.csv", TESTSET_CSV.replace(b"\n", b"\r").replace(b"gamma", b"g" * 200_000)))
    assert len(ts) == 2
    quoted = load_run(_write(tmp_path, "r2.csv", b'query_id,doc_id,score\nq1,"d\r1",1\n'))
    assert quoted.ranking("q1") == ["d\r1"]


def test_errors_that_named_no_line_now_do(tmp_path):
    labels = _write(tmp_path, "l.csv", LABELS_CSV + b"q2,c\xff,2,1,,\n")
    with pytest.raises(InputError) as err:
        read_labels(labels)
    assert err.value.line == 5
    deep = _write(tmp_path, "t.json", b"[" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_testset(deep)


def test_directory_or_unreadable_input_is_one_line(tmp_path):
    qrels = _write(tmp_path, "q.txt", TREC_QRELS)
    for args in (["eval", str(qrels), str(tmp_path)], ["eval", str(tmp_path), str(qrels)],
                 ["eval-rag", str(tmp_path)], ["compare", str(qrels), str(tmp_path)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2
        assert result.stderr.startswith("rankwise: error: ") and result.stderr.count("\n") == 1, result.stderr
    if os.geteuid() != 0:
        locked = _write(tmp_path, "locked.trec", TREC_RUN)
        locked.chmod(0)
        result = CliRunner().invoke(main, ["eval", str(qrels), str(locked)])
        assert result.exit_code == 2 and result.stderr.count("\n") == 1


def test_fuzz_seeds_are_valid(tmp_path):
    """The seeds themselves read cleanly (so mutants start from valid files)."""
    for kind, (name, seed_data, read, _) in KINDS.items():
        assert _outcome(read, _write(tmp_path, name, seed_data))[0] == "ok", kind
    assert np.isclose(trec.read_trec_run(_write(tmp_path, "r.trec", TREC_RUN)).scores.sum(), 5.0)


def test_records_with_integers_beyond_64_bits(tmp_path):
    """A records file with a grade or an offset beyond int64 used to end in OverflowError in rag.py.
    """
    chunk = {"rank": 1, "id": "c1", "text": "alpha", "doc_id": "d", "start": 0, "end": 5,
             "verdicts": {"llm": {"verdict": 1, "grade": 2}}}
    for path, value in (("verdicts", {"llm": {"verdict": 1, "grade": 10**30}}), ("end", 10**30), ("start", -(10**30))):
        bad = dict(chunk, **{path: value})
        p = _write(tmp_path, "rec.jsonl", (json.dumps({"id": "q1", "chunks": [bad]}) + "\n").encode())
        with pytest.raises(InputError, match="out of range") as err:
            load_records(p)
        assert err.value.line == 1
        result = CliRunner().invoke(main, ["eval-rag", str(p), "-r", "llm", "-k", "1", "--quiet"])
        assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "out of range" in result.stderr


def test_cr_only_csv_picks_the_delimiter_from_the_header(tmp_path):
    tsv = _write(tmp_path, "q.tsv", b"query-id\tcorpus-id\tscore\rq1\td1\t1\r")
    assert load_qrels(tsv).judgements("q1") == {"d1": 1}
    csv_run = _write(tmp_path, "r.csv", b"query_id,doc_id,score\rq1,d\t1,2\rq1,d2,1\r")  # a tab in a later id
    assert load_run(csv_run).ranking("q1") == ["d\t1", "d2"]
    labels = _write(tmp_path, "l.csv", LABELS_CSV.replace(b"\n", b"\r"))
    assert len(read_labels(labels)) == 3


# ------------------------------------------------------- issue 20: --stream reads every mutant as
# memory does
@contextlib.contextmanager
def _unraisable():
    """Exceptions Python could only print ("Exception ignored in ..."), collected instead."""
    caught: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: caught.append(f"{u.exc_type.__name__}: {u.exc_value} in {u.object!r}")
    try:
        yield caught
    finally:
        sys.unraisablehook = previous


def _by_query(runs) -> dict:
    """{query: (ranking, scores)} of a run, or of the blocks of a streamed run."""
    out = {}
    for run in runs:
        for i, q in enumerate(run.queries):
            scores = None if run.scores is None else run.scores[run.offsets[i]:run.offsets[i + 1]].tolist()
            out[q] = (run.ranking(q), scores)
    return out


def _streamed(path: Path, **kwargs) -> list:
    """The blocks ``rankwise eval --stream`` reads: the file as it stands, partitioned when not
    grouped."""
    try:
        return list(iter_run_blocks(path, **kwargs))
    except NotGrouped:
        return list(iter_run_blocks(path, grouped=False, **kwargs))


def _read_forced(read, path: Path, exact: bool):
    trec._EXACT_ONLY = exact
    try:
        return _outcome(read, path)
    finally:
        trec._EXACT_ONLY = False


STREAM_WAYS = {"grouped": {}, "partitioned": {"grouped": False}, "small blocks": {"block_rows": 1}}


def _every_way(path: Path, in_memory) -> dict:
    """How each reader reads ``path``: the in-memory fast and exact readers, and the stream (read as
    it stands, partitioned, and in one-row blocks; and with its pieces read line by line)."""
    ways = {}
    for exact in (False, True):
        got = _read_forced(lambda p: [in_memory(p)], path, exact)
        ways[f"memory {'exact' if exact else 'fast'}"] = (got[0], _by_query(got[1])) if got[0] == "ok" else got
        for name, kwargs in STREAM_WAYS.items() if not exact else [("grouped", {})]:  # one piece reader
            got = _read_forced(lambda p, kw=kwargs: _streamed(p, **kw), path, exact)
            ways[f"stream {name}{' exact' if exact else ''}"] = (got[0], _by_query(got[1])) if got[0] == "ok" else got
    return ways


def _pieces(path: Path, rows: int):
    """The stream's rows of a TREC file read in pieces of about ``rows`` lines, joined: (ids, docs,
    scores, lines), or its error."""
    got = _outcome(lambda p: list(_text_batches(p, rows)), path)
    if got[0] == "error":
        return got
    joined = ([], [], [], [])
    for part in got[1]:
        for column, values in zip(joined, part, strict=True):
            column.extend(values.to_pylist() if hasattr(values, "to_pylist") else values.tolist())
    return "ok", joined


def test_stream_reads_every_trec_run_mutant_as_memory_does(tmp_path):
    qrels = _write(tmp_path, "qrels.txt", TREC_QRELS)
    counts = Counter()
    with _unraisable() as caught:
        for i, data in enumerate(mutants(TREC_RUN, seed=7)):
            path = _write(tmp_path, f"m{i}.trec", data)
            ways = _every_way(path, trec.read_trec_run)
            reference = ways["memory fast"]
            for name, got in ways.items():
                assert got == reference, f"{name} disagrees on {_shown(data)}:\nmemory {reference}\n{name} {got}"
            # read in pieces of about one line: the same rows, line numbers and errors as in one
            # piece
            assert _pieces(path, 1) == _pieces(path, 10**6), _shown(data)
            counts[reference[0]] += 1
            if i % CLI_SHARE == 0:
                code = _check_cli(["eval", str(qrels), str(path), "-m", "map,P@1", "--stream"], _shown(data)).exit_code
                assert (code == 0) == (reference[0] == "ok"), _shown(data)
    assert not caught, caught[:3]
    assert counts["ok"] > 20 and counts["error"] > 20, counts


# ----------------------------------------------------------- Parquet runs, qrels and test sets,
# mutated
def _parquet_bytes(table) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _parquet_run_tables() -> list:
    """Valid and invalid run tables a user's tools write: other id and score types, nulls, NaN,
    duplicated columns, no rows."""
    import pyarrow as pa

    q, d, s = ["q1", "q1", "q2", "q2"], ["d1", "d2", "d3", "d1"], [2.5, 1.5, 0.75, 0.25]
    ints = pa.array([1, 1, 2, 2]), pa.array([10, 11, 12, 10])
    tables = [
        pa.table({"query_id": q, "doc_id": d, "score": s}),
        pa.table({"query_id": ints[0], "doc_id": ints[1], "score": s}),
        pa.table({"query_id": pa.array(q).dictionary_encode(), "doc_id": pa.array(d).dictionary_encode(),
                  "score": s}),
        pa.table({"query_id": pa.array(q, pa.large_string()), "doc_id": d, "score": pa.array(s, pa.float32())}),
        pa.table({"query_id": q, "doc_id": d, "score": pa.array([2**64 - 1, 5, 2**63, 1], pa.uint64())}),
        pa.table({"query_id": q, "doc_id": d, "score": pa.array([4, 3, 2, 1], pa.int8())}),
        pa.table({"query_id": q, "doc_id": d, "score": pa.array(s).dictionary_encode()}),
        pa.table({"query_id": q, "doc_id": d, "score": [2.5, float("nan"), 1.0, 0.5]}),
        pa.table({"query_id": q, "doc_id": d, "score": [2.5, float("inf"), 1.0, 0.5]}),
        pa.table({"query_id": ["q1", None, "q2", "q2"], "doc_id": d, "score": s}),
        pa.table({"query_id": q, "doc_id": d, "score": [2.5, None, 1.0, 0.5]}),
        pa.table({"query_id": q, "doc_id": ["d1", "d1", "d3", "d1"], "score": s}),
        pa.table({"query_id": q, "doc_id": d, "score": ["2.5", "1.5", "0.75", "0.25"]}),
        pa.table({"query_id": [1.5, 1.5, 2.0, 2.0], "doc_id": d, "score": s}),
        pa.table({"query_id": pa.array([], pa.string()), "doc_id": pa.array([], pa.string()),
                  "score": pa.array([], pa.float64())}),
        pa.table({"qid": q, "doc_id": d, "score": s}),
        pa.Table.from_arrays([pa.array(q), pa.array(d), pa.array(s), pa.array(d)],
                             names=["query_id", "doc_id", "score", "doc_id"]),
        # no score column: the rows' order within a query ranks (issue 33: --stream refused these)
        pa.table({"query_id": q, "doc_id": d}),
        pa.table({"query_id": ["q1", "q2", "q1", "q2"], "doc_id": ["d1", "d3", "d2", "d1"], "rank": [1, 1, 2, 2]}),
        pa.table({"query_id": ints[0], "doc_id": ints[1], "run_id": ["t"] * 4}),
        pa.table({"query_id": q, "doc_id": ["d1", "d1", "d3", "d1"]}),
    ]
    return [_parquet_bytes(t) for t in tables]


def _byte_mutants(data: bytes, seed: int, n: int) -> list[bytes]:
    """Truncations, flipped bytes and the text mutator's edits of a binary file."""
    rng = random.Random(seed)
    out = [b"", data[:4], data[: len(data) // 2], data[:-1], data + b"\0"]
    while len(out) < n:
        op = rng.randrange(3)
        if op == 0:
            out.append(data[: rng.randrange(len(data))])
        elif op == 1:
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(bytes(b))
        else:
            out.append(mutate(data, rng))
    return out


def test_parquet_run_mutants_read_alike_in_memory_and_streamed(tmp_path):
    from rankwise.data.stream import read_parquet_run

    qrels = _write(tmp_path, "qrels.txt", TREC_QRELS)
    valid = _parquet_run_tables()
    counts = Counter()
    with _unraisable() as caught:
        for i, data in enumerate(valid + _byte_mutants(valid[0], seed=21, n=MUTANTS // 2)):
            path = _write(tmp_path, f"m{i}.parquet", data)
            ways = {k: v for k, v in _every_way(path, read_parquet_run).items() if "exact" not in k}
            reference = ways["memory fast"]
            for name, got in ways.items():
                assert got == reference, f"{name} disagrees on mutant {i}:\nmemory {reference}\n{name} {got}"
            counts[reference[0]] += 1
            if i < len(valid) or i % CLI_SHARE == 0:
                memory, streamed = (_check_cli(["eval", str(qrels), str(path), "-m", "map,P@1", *stream],
                                               f"mutant {i}") for stream in ([], ["--stream"]))
                assert (memory.exit_code, memory.stdout, memory.stderr) == \
                    (streamed.exit_code, streamed.stdout, streamed.stderr), f"mutant {i}: {reference}"
                if reference[0] == "error":
                    assert memory.stderr == f"rankwise: error: {reference[1]}\n"
    assert not caught, caught[:3]
    assert counts["ok"] >= 6 and counts["error"] > 20, counts


def test_parquet_qrels_and_testset_mutants_read_or_fail_with_one_line(tmp_path):
    import pyarrow as pa

    run = _write(tmp_path, "run.trec", TREC_RUN)
    qrels_seed = _parquet_bytes(pa.table({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d3", "d3"],
                                          "relevance": [1, 0, 2]}))
    grades = [pa.array([1.0, 1e30, 2.0]), pa.array([1, 2**63 + 5, 2], pa.uint64()), pa.array([1.0, 0.5, 2.0]),
              pa.array([1, None, 2]), pa.array(["1", "0", "2"]), pa.array([1, 0, 2], pa.uint8())]
    qrels_tables = [_parquet_bytes(pa.table({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d3", "d3"],
                                             "relevance": g})) for g in grades]
    testset_seed = _parquet_bytes(pa.table({
        "id": ["q1", "q2"], "user_input": ["a?", "b?"], "retrieved_contexts": [["alpha beta", "gamma"], ["delta"]],
        "reference_contexts": [["alpha"], ["delta"]]}))
    outcomes = Counter()
    for kind, seed, read, args in (
            ("qrels", qrels_seed, load_qrels, lambda p: ["eval", str(p), str(run), "-m", "map"]),
            ("testset", testset_seed, load_testset, lambda p: ["eval-rag", str(p), "-k", "1,2", "--quiet"])):
        extra = qrels_tables if kind == "qrels" else []
        for i, data in enumerate(extra + _byte_mutants(seed, seed=len(kind), n=MUTANTS // 3)):
            path = _write(tmp_path, f"m{i}.{kind}.parquet", data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcomes[(kind, _outcome(read, path)[0])] += 1
            if i < len(extra) or i % CLI_SHARE == 0:
                _check_cli(args(path), f"{kind} mutant {i}")
    assert all(outcomes[(k, "ok")] >= 2 and outcomes[(k, "error")] > 20 for k in ("qrels", "testset")), outcomes


def test_a_symlink_loop_as_any_input_is_one_line(tmp_path):
    """A loop of symbolic links (a -> b -> a) in place of each kind of input: one line naming the
    file."""
    kinds = dict(KINDS, trec_run=("run.trec", TREC_RUN, None, _eval_args),
                 trec_qrels=("qrels.txt", TREC_QRELS, None, _eval_args),
                 parquet_run=("run.parquet", b"", None, _eval_args),
                 testset_parquet=("testset.parquet", b"", None, _rag_args))
    for kind, (name, _, _, cli_args) in sorted(kinds.items()):
        loop = tmp_path / f"loop.{kind}.{name}"  # kinds may share a file name (records.jsonl)
        os.symlink(tmp_path / f"other.{kind}.{name}", loop)
        os.symlink(loop, tmp_path / f"other.{kind}.{name}")
        for extra in ([], ["--stream"]) if kind.endswith("run") else ([],):
            result = CliRunner().invoke(main, cli_args(kind, loop, tmp_path) + extra)
            assert result.exit_code == 2, (kind, extra, result.output)
            assert result.stderr == f"rankwise: error: {loop}: cannot read file: Too many levels of symbolic links\n", \
                (kind, extra, result.stderr)


def test_the_endpoint_format_memory_reads_any_mutant_as_a_level_or_nothing(tmp_path):
    """The file beside the LLM cache that remembers each endpoint's response_format level is
    rankwise's own state, not an input: a damaged one is never an error, only forgotten (the
    endpoint is probed again)."""
    import time as _time

    from rankwise.llm.client import RESPONSE_FORMATS, FormatMemory

    url, model = "http://127.0.0.1:8080/v1", "gemma-3-270m"
    seed = json.dumps({f"{url} {model}": {"response_format": "json_object", "checked": _time.time()}}).encode()
    assert FormatMemory(_memory_file(tmp_path / "seed.json", seed)).get(url, model) == "json_object"
    got = Counter()
    for i, data in enumerate(mutants(seed, seed=77)):
        level = FormatMemory(_memory_file(tmp_path / f"m{i}.json", data)).get(url, model)
        assert level is None or level in RESPONSE_FORMATS
        got[level] += 1
    assert got[None] > 10 and got["json_object"] > 0, got
    memory = FormatMemory(tmp_path / "m0.json")  # writing over a damaged file gives a good one
    memory.put(url, model, "text")
    assert FormatMemory(tmp_path / "m0.json").get(url, model) == "text"


def _memory_file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
