"""``rankwise.adapters`` without any framework: callables, id resolution, failures, retries,
timeouts, duplicates, concurrency, the records file and ``check-adapter``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from _inprocess import run_cli
from rankwise.adapters import (
    RetrieverRandomIdWarning,
    check_adapter,
    detect,
    looks_random,
    resolve_id,
    run_retriever,
    text_id,
)
from rankwise.data.records import load_records
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag

DOCS = {"d1": "Paris is the capital of France. Lyon is a large city.",
        "d2": "Rome is the capital of Italy. Milan is in the north."}
CASES = [
    {"id": "q1", "question": "capital of France",
     "reference_contexts": [{"text": "Paris is the capital of France.", "doc_id": "d1", "start": 0, "end": 31}]},
    {"id": "q2", "question": "capital of Italy",
     "reference_contexts": [{"text": "Rome is the capital of Italy.", "doc_id": "d2", "start": 0, "end": 29}]},
]
SPANS = [("d1", 0, 31), ("d1", 32, 54), ("d2", 0, 29), ("d2", 30, 52)]


def search(q: str) -> list[dict]:
    """Word-overlap search over four sentence chunks, items as dicts with offsets (no ids)."""
    words = set(q.lower().split())
    out = []
    for d, s, e in SPANS:
        text = DOCS[d][s:e]
        out.append({"text": text, "doc_id": d, "start": s, "score": len(words & set(text.lower().rstrip(".").split()))})
    return sorted(out, key=lambda x: -x["score"])


def test_callable_offsets_ids_and_span_metrics():
    run = run_retriever(search, CASES, k=2)
    assert detect(search) == "callable"
    assert [c.id for c in run.records[0].chunks] == ["d1#0-31", "d2#0-29"]
    assert run.records[0].chunks[0].end == 31  # end = start + len(text) when only the start is known
    assert run.summary["id_strategy"] == {"offset": 4} and run.summary["failed"] == 0
    info = run.records[0].extra["retrieval"]
    assert info["status"] == "ok" and info["attempts"] == 1 and info["latency_ms"] >= 0
    assert info["items"][0]["id_from"] == "offset" and info["returned"] == 4
    res = run.evaluate("span", k=[1, 2])
    # by hand: both cases find their passage at rank 1; rank 2 is the other country's capital
    assert res.mean["hit_rate@1"] == 1.0 and res.mean["precision@2"] == 0.5 and res.mean["mrr"] == 1.0


def test_id_resolution_order():
    rand = str(uuid.uuid4())
    assert looks_random(rand) and looks_random(rand.replace("-", "")) and not looks_random("chunk-7")
    assert resolve_id("chunk-7", {"cid": "x"}, "d", 0, 5, "t") == ("chunk-7", "id")
    assert resolve_id(rand, {"cid": "x"}, "d", 0, 5, "t", id_key="cid") == ("x", "id_key")
    assert resolve_id(rand, {}, "d", 0, 5, "t") == ("d#0-5", "offset")
    assert resolve_id(rand, {}, "d", 3, None, "t") == ("d#3", "offset")
    assert resolve_id(rand, {}, None, 0, 5, " a\n b ") == (text_id("a b"), "text")
    assert resolve_id(rand, {}, "d", 0, 5, "t", strategy="id") == (rand, "id")
    assert resolve_id(None, {}, "d", 0, 5, "t", strategy="id") == (None, "none")
    assert text_id("Paris  is\nhere") == text_id("Paris is here") != text_id("paris is here")


def test_random_ids_warn_with_the_fix_and_fall_back():
    def uuids(q):
        return [{"id": str(uuid.uuid4()), **x} for x in search(q)]

    with pytest.warns(RetrieverRandomIdWarning, match=r"8 of 8 chunk ids look like random uuids.*Fix"):
        run = run_retriever(uuids, CASES, k=4)
    assert run.summary["random_ids"] == 8 and run.summary["id_strategy"] == {"offset": 8}
    assert [c.id for c in run.records[1].chunks][:1] == ["d2#0-29"]
    with pytest.warns(RetrieverRandomIdWarning, match="kept as ids"):
        forced = run_retriever(uuids, CASES, k=4, id_strategy="id")
    assert forced.summary["id_strategy"] == {"id": 8}
    # check_adapter sees the ids change between two runs (same texts, same ranks)
    check = check_adapter(uuids, CASES, k=4, id_strategy="id")
    assert len(check.changed_ids) == 8 and not check.changed_order and not check.stable
    assert "ids NOT stable" in "\n".join(check.lines()) and check.deterministic
    assert check_adapter(uuids, CASES, k=4).stable  # offsets survive


def test_id_key_and_text_hash_rules():
    def items(q):
        return [{"text": x["text"], "metadata": {"chunk_id": f"c-{x['doc_id']}-{x['start']}"}} for x in search(q)]

    run = run_retriever(items, CASES, k=3, id_key="chunk_id")
    assert run.summary["id_strategy"] == {"id_key": 6} and run.records[0].chunks[0].id == "c-d1-0"
    plain = run_retriever(lambda q: [x["text"] for x in search(q)], CASES, k=3)
    assert plain.summary["id_strategy"] == {"text": 6}
    assert plain.records[0].chunks[0].id == text_id("Paris is the capital of France.")
    assert plain.summary["no_offsets"] == 6 and any("start offset" in w for w in plain.warnings)
    # containment needs no offsets: it scores plain texts
    assert plain.evaluate("containment", k=[1]).mean["hit_rate@1"] == 1.0
    with pytest.raises(InputError, match="needs id_key"):
        run_retriever(items, CASES, id_strategy="id_key")


def test_retries_then_success_and_failed_query_is_kept_and_counted():
    calls: dict[str, int] = {}

    def flaky(q):
        calls[q] = calls.get(q, 0) + 1
        if q == "capital of Italy":
            raise ConnectionError("vector store unreachable")
        if calls[q] < 3:
            raise TimeoutError("try again")
        return search(q)

    run = run_retriever(flaky, CASES, k=2, retries=2, backoff=0.01)
    ok, bad = run.records
    assert ok.extra["retrieval"]["status"] == "ok" and ok.extra["retrieval"]["attempts"] == 3
    assert bad.chunks == [] and bad.extra["retrieval"]["attempts"] == 3
    assert bad.extra["retrieval"]["status"] == "failed: ConnectionError: vector store unreachable"
    assert run.summary["failed"] == 1 and run.summary["failed_cases"] == {"q2": "ConnectionError: vector store "
                                                                                 "unreachable"}
    res = run.evaluate("span", k=[1])
    # the failed case is not dropped: it is unscorable (no chunk), scored 0 and kept in the mean
    assert res.summary["cases"] == 2 and res.summary["unscorable"] == 1
    assert res.mean["hit_rate@1"] == 0.5


def test_timeout_never_hangs_and_bad_items_are_failures():
    def slow(q):
        time.sleep(3)
        return []

    t0 = time.perf_counter()
    run = run_retriever(slow, CASES, k=2, retries=0, timeout=0.2)
    assert time.perf_counter() - t0 < 1.5
    assert run.summary["failed"] == 2
    assert run.records[0].extra["retrieval"]["status"] == "failed: TimeoutError: no answer within 0.2 s"
    odd = run_retriever(lambda q: [object()], CASES, k=2, retries=0)
    assert odd.summary["failed"] == 2 and "cannot read a retrieved item" in odd.records[0].extra["retrieval"]["status"]
    notlist = run_retriever(lambda q: "just a string", CASES, retries=0)
    assert "not a list of items" in notlist.records[0].extra["retrieval"]["status"]
    with pytest.raises(InputError, match="cannot use a int as a retriever"):
        run_retriever(42, CASES)
    with pytest.raises(InputError, match="k must be"):
        run_retriever(search, CASES, k=0)


def test_duplicates_are_flagged_and_kept():
    def fused(q):  # what a careless fusion gives: the same chunk twice
        items = search(q)
        return [items[0], items[1], items[0]]

    run = run_retriever(fused, CASES, k=3)
    assert run.summary["duplicates"] == 2
    assert run.records[0].extra["retrieval"]["duplicates"] == [3]
    assert [c.rank for c in run.records[0].chunks] == [1, 2, 3]


def test_concurrency_is_bounded_and_used():
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def counted(q):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return search(q)

    cases = [{"id": f"q{i}", "question": "capital of France"} for i in range(12)]
    run = run_retriever(counted, cases, k=1, concurrency=3)
    assert 2 <= state["max"] <= 3
    assert [r.id for r in run.records] == [f"q{i}" for i in range(12)]  # test-set order kept


def test_async_retriever_failures_recorded():
    class AsyncRetriever:  # the LlamaIndex shape: retrieve + aretrieve
        async def aretrieve(self, q):
            if "Italy" in q:
                raise RuntimeError("index closed")
            return [(x, float(x["score"])) for x in search(q)]

        def retrieve(self, q):
            raise AssertionError("the async path is used outside an event loop")

    run = run_retriever(AsyncRetriever(), CASES, k=2, retries=1, backoff=0.01)
    assert detect(AsyncRetriever()) == "llamaindex"
    assert run.records[0].chunks[0].id == "d1#0-31" and run.records[0].chunks[0].score == 3.0
    assert run.records[1].extra["retrieval"]["status"] == "failed: RuntimeError: index closed"
    assert run.records[1].extra["retrieval"]["attempts"] == 2


def test_records_file_round_trip_and_eval_rag_cli(tmp_path: Path):
    run = run_retriever(search, CASES, k=2)
    path = run.write_records(tmp_path / "adapter.jsonl")
    back = load_records(path)
    assert back[0].extra["retrieval"]["items"][0]["id_from"] == "offset"
    expected = run.evaluate("span", k=[1, 2])
    assert evaluate_rag(back, "span", k=[1, 2]).mean == expected.mean
    out = run_cli(["eval-rag", str(path), "-r", "span", "-k", "1,2",
                   "--format", "json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["mean"]["precision@2"] == expected.mean["precision@2"] == 0.5


def test_check_adapter_cli(tmp_path: Path):
    mod = tmp_path / "my_retriever.py"
    mod.write_text("import uuid\n"
                   "def build():\n"
                   "    texts = ['Paris is the capital of France.', 'Rome is the capital of Italy.']\n"
                   "    ids = {t: str(uuid.uuid4()) for t in texts}\n"
                   "    return lambda q: [{'id': ids[t], 'text': t} for t in texts]\n")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    env_path = {"PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[2] / 'src'}"}
    import os

    env = {**os.environ, **env_path}
    bad = subprocess.run([sys.executable, "-m", "rankwise.cli", "check-adapter", "my_retriever:build", str(cases),
                          "--depth", "2", "--id-strategy", "id"], capture_output=True, text=True, env=env)
    assert bad.returncode == 1, bad.stderr
    assert "ids changed between two runs: 4 of 4" in bad.stdout
    good = subprocess.run([sys.executable, "-m", "rankwise.cli", "check-adapter", "my_retriever:build", str(cases),
                           "--depth", "2"], capture_output=True, text=True, env=env)
    assert good.returncode == 0 and "ids are stable across reruns" in good.stdout
    assert "random uuids" in good.stdout
    records = tmp_path / "records.jsonl"
    ran = subprocess.run([sys.executable, "-m", "rankwise.cli", "run-adapter", "my_retriever:build", str(cases),
                          "--depth", "2", "-o", str(records)], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["cases"] == 2 and summary["failed"] == 0 and summary["id_strategy"] == {"text": 4}
    assert summary["random_ids"] == 4 and "random uuids" in ran.stderr
    assert [c.text for c in load_records(records)[1].chunks] == ["Paris is the capital of France.",
                                                                 "Rome is the capital of Italy."]
    missing = subprocess.run([sys.executable, "-m", "rankwise.cli", "check-adapter", "my_retriever:nope",
                              str(cases)], capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope" in missing.stderr


def test_no_framework_imported_at_load():
    code = ("import sys, rankwise.adapters, rankwise.workflows.sweep_run\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain_core', 'langchain', 'llama_index', 'haystack', 'torch', 'transformers'))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_retriever_that_fails_everywhere_says_why_in_run_adapter_and_eval_rag(tmp_path, monkeypatch):
    """run-adapter counts failures by exception type with the first message; eval-rag on those
    records says the retriever failed (not "no ground truth ... try containment")."""
    import json as _json

    from _inprocess import run_cli

    (tmp_path / "broken_retriever.py").write_text(
        "def retrieve(question):\n    raise ValueError('the index is not loaded')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(_json.dumps({"id": f"q{i}", "question": f"question {i}",
                                          "reference_contexts": ["some passage text here"]}) + "\n" for i in range(3)))
    done = run_cli(["run-adapter", "broken_retriever:retrieve", cases, "-o", tmp_path / "rec.jsonl"])
    assert done.returncode == 0, done.stderr
    assert ("warning: 3 of 3 cases failed: ValueError (3, first case 'q0': ValueError: the index is not loaded)"
            in done.stderr)
    summary = _json.loads(done.stdout)
    assert summary["failure_kinds"] == {"ValueError": {"cases": 3, "first_case": "q0",
                                                       "message": "ValueError: the index is not loaded"}}
    scored = run_cli(["eval-rag", tmp_path / "rec.jsonl", "-r", "containment"])
    assert scored.returncode == 2
    assert "the retriever failed on every case (case 'q0': ValueError: the index is not loaded)" in scored.stderr
    assert "try containment" not in scored.stderr and "Traceback" not in scored.stderr
