"""rankwise pool: the union of several systems' top k, unlabelled chunks judged by the LLM judge
over a loopback server, relevant ones added as span labels, judged@k before and after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _inprocess import run_cli

REPO = Path(__file__).resolve().parents[2]
KESTREL = REPO / "src" / "rankwise" / "datasets" / "kestrel" / "corpus.jsonl"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = run_cli(args, env=ENV)  # in-process (tests/_inprocess.py), as the process would finish
    assert proc.returncode == 0, proc.stderr
    return proc


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from synth_server import running_server

    with running_server() as srv:
        yield srv


def test_pool_judges_unlabelled_chunks_and_raises_judged_at_k(gen, tmp_path):
    ts = tmp_path / "ts.jsonl"
    cache = str(tmp_path / "c.sqlite")
    cli("synth", str(KESTREL), "--model", "gen", "--base-url", gen.base_url, "-n", "30", "--cache", cache,
        "--out", str(ts), "--quiet")
    runs = []
    for size in (400, 1500):
        rag = tmp_path / f"bm25-{size}.jsonl"
        cli("run", "--corpus", str(KESTREL), "--queries", str(ts), "--chunk-size", str(size), "--out",
            str(tmp_path / f"r{size}.trec"), "--rag-out", str(rag), "--quiet")
        runs.append(rag)
    gen.reset()
    out = tmp_path / "pooled.jsonl"
    args = ["pool", str(ts), *map(str, runs), "-k", "5", "--out", str(out), "--model", "judge", "--base-url",
            gen.base_url, "--cache", cache, "--json", "--quiet", "--names", "small,large"]
    plan = json.loads(cli(*args, "--dry-run").stdout)
    assert gen.stats()["requests"] == 0 and not out.exists()
    s = json.loads(cli(*args).stdout)
    assert plan["plan"]["calls"] == s["calls"] == plan["pooled"] - plan["labelled"]
    stats = gen.stats()
    original, pooled = rows(ts), rows(out)
    assert [r["id"] for r in pooled] == [r["id"] for r in original]
    # the pool: every distinct span of the two systems' top 5, labelled or judged (one call each)
    distinct = 0
    for r in original:
        spans = {(c["doc_id"], c["start"], c["end"]) for rag in runs for row in rows(rag) if row["id"] == r["id"]
                 for c in row["retrieved_contexts"][:5]}
        distinct += len(spans)
    assert s["pooled"] == distinct == s["labelled"] + s["judged"] + s["failed"]
    assert s["judged"] == stats["judged"] == s["calls"] > 0 and s["failed"] == 0, (s, stats)
    added = sum(len(p["reference_contexts"]) - len(o["reference_contexts"]) for o, p in zip(original, pooled,
                                                                                               strict=True))
    assert added == s["relevant"] > 0
    assert sum(len(p.get("pool_judged", [])) for p in pooled) == s["judged"]
    corpus = {json.loads(line)["id"]: json.loads(line)["text"] for line in KESTREL.read_text().splitlines()}
    for p in pooled:
        for ref in p["reference_contexts"]:
            assert corpus[ref["doc_id"]][ref["start"]:ref["end"]] == ref["text"]
    for name in ("small", "large"):
        assert s["judged_after"][name] > s["judged_before"][name]
        assert s["judged_after"][name] == pytest.approx(1.0)  # the whole pool is labelled now
    # a rerun is free: every verdict is in the cache
    gen.reset()
    again = json.loads(cli(*args).stdout)
    assert again["calls"] == 0 and again["cached"] == s["judged"] and gen.stats()["requests"] == 0
    assert rows(out) == pooled
    # --max-calls on a fresh cache: 3 calls, the rest unjudged and counted; a rerun without the cap
    # goes on
    capped_args = [a if a != cache else str(tmp_path / "fresh.sqlite") for a in args]
    gen.reset()
    capped = json.loads(cli(*capped_args, "--max-calls", "3", "--concurrency", "1", "--rpm", "6000").stdout)
    # the cap counts HTTP requests, a retry of a first-time 429/500 (the server's, by prompt hash)
    # included
    stats = gen.stats()
    judged = 3 - sum(stats["faults"].values())
    assert stats["requests"] == 3 and capped["calls"] == capped["judged"] == judged > 0
    assert capped["failed"] == s["judged"] - judged
    rest = json.loads(cli(*capped_args).stdout)
    assert rest["calls"] == s["judged"] - judged and rest["cached"] == judged and rest["failed"] == 0
    assert rows(out) == pooled
