"""``rankwise judge --batch-api`` against a loopback Batch API server (files + batches): verdicts equal to
the online judge's, a restart mid-poll resumes the same batch (one create), expired and partially failed
batches counted and retried online; and ``--shard i/N`` workers in real processes merged by
``rankwise cache merge`` without loss."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch_server import start_server
from rankwise.cli import main
from rankwise.data.records import load_records

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
TEXTS = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
         "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _testset(path: Path, n_cases: int = 3) -> Path:
    with open(path, "w") as fh:
        for i in range(n_cases):
            fh.write(json.dumps({"id": f"q{i + 1}", "user_input": QUESTION, "reference": REFERENCE,
                                 "retrieved_contexts": [{"id": f"q{i + 1}c{j + 1}", "text": f"{t} (case {i})"}
                                                        for j, t in enumerate(TEXTS)]}) + "\n")
    return path


@pytest.fixture
def server():
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _fast_poll(monkeypatch):
    monkeypatch.setenv("RANKWISE_BATCH_POLL", "0.05")


def _judge(srv, tmp_path, *extra, name="out"):
    args = ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url", srv.base_url, "--api-key", "k",
            "--cache", str(tmp_path / f"{name}.sqlite"), "--records", str(tmp_path / f"{name}.jsonl"),
            "--price-in", "1", "--price-out", "2", "--quiet", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


def _verdicts(path: Path) -> dict[str, int | None]:
    return {c.id: c.verdicts["llm"].verdict for r in load_records(path) for c in r.chunks}


def test_batch_equals_online_and_costs_half(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    online = _judge(server, tmp_path, name="online")
    assert server.call("/stats")["chat"] == 12
    out = _judge(server, tmp_path, "--batch-api", name="batch")
    stats = server.call("/stats")
    assert stats["creates"] == 1 and stats["uploads"] == 1 and stats["chat"] == 12  # no online call
    want = _verdicts(tmp_path / "online.jsonl")
    assert _verdicts(tmp_path / "batch.jsonl") == want
    assert sorted(want.values()) == [0] * 6 + [1] * 6  # the server's keyword rule, not all one value
    assert "12 verdicts, 0 failed" in out
    # the batch cost is half the online cost for the same tokens
    online_cost = float(online.split("$")[1].split()[0])
    batch_cost = float(out.split("cost $")[1].split()[0])
    assert batch_cost == pytest.approx(online_cost / 2, rel=0.02)
    db = sqlite3.connect(tmp_path / "batch.sqlite")
    rows = db.execute("SELECT part, parts, requests, batch_id, state, batch_status FROM batch_parts").fetchall()
    assert rows == [(0, 1, 12, "batch_1", "ingested", "completed")]
    assert db.execute("SELECT COUNT(*) FROM batch_results").fetchone() == (0,)  # merged into the verdicts


def test_restart_mid_poll_resumes_without_resubmitting(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"polls": 10**6})  # stays in_progress until released
    env = {**os.environ, "PYTHONPATH": SRC, "RANKWISE_BATCH_POLL": "0.05"}
    cmd = [sys.executable, "-m", "rankwise.cli", "judge", str(tmp_path / "ts.jsonl"), "--model", "m",
           "--base-url", server.base_url, "--api-key", "k", "--cache", str(tmp_path / "c.sqlite"),
           "--records", str(tmp_path / "r.jsonl"), "--batch-api", "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while server.call("/stats")["polls"] < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert server.call("/stats")["creates"] == 1
    server.call("/config", {"polls": 0})  # the batch ends at the next poll
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "(resumed)" in done.stdout and "batch batch_1: completed" in done.stdout
    stats = server.call("/stats")
    assert stats["creates"] == 1 and stats["uploads"] == 1 and stats["chat"] == 0
    assert all(v is not None for v in _verdicts(tmp_path / "r.jsonl").values())


def test_expired_batch_items_retried_online(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"mode": "expire", "answered": 5})
    out = _judge(server, tmp_path, "--batch-api")
    assert "batch batch_1: expired" in out and "5 verdicts, 7 failed (expired 7)" in out
    assert server.call("/stats")["chat"] == 7  # exactly the expired items, online
    assert all(v is not None for v in _verdicts(tmp_path / "out.jsonl").values())


def test_partially_failed_batch_counted_and_left_missing_with_max_calls_0(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"mode": "partial", "fail_every": 3})
    out = _judge(server, tmp_path, "--batch-api", "--max-calls", "0")
    assert "8 verdicts, 4 failed (HTTP 500 4)" in out
    assert server.call("/stats")["chat"] == 0
    got = [c.verdicts["llm"].status for r in load_records(tmp_path / "out.jsonl") for c in r.chunks]
    assert got.count("ok") == 8 and got.count("missing") == 4
    # rerun without the cap: only the 4 failed items are called (online), nothing resubmitted as a batch
    _judge(server, tmp_path)
    stats = server.call("/stats")
    assert stats["chat"] == 4 and stats["creates"] == 1


def test_shards_in_processes_merge_without_loss(server, tmp_path):
    _testset(tmp_path / "ts.jsonl", n_cases=9)
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [subprocess.Popen([sys.executable, "-m", "rankwise.cli", "judge", str(tmp_path / "ts.jsonl"),
                               "--model", "m", "--base-url", server.base_url, "--api-key", "k",
                               "--shard", f"{i}/3", "--cache", str(tmp_path / f"part{i}.sqlite"),
                               "--records", str(tmp_path / f"part{i}.jsonl"), "--quiet"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    ids = [[r.id for r in load_records(tmp_path / f"part{i}.jsonl")] for i in range(3)]
    assert sorted(sum(ids, [])) == sorted(f"q{k}" for k in range(1, 10))  # disjoint and complete
    assert all(ids)
    assert server.call("/stats")["chat"] == 36
    runner = CliRunner()
    parts = [str(tmp_path / f"part{i}.sqlite") for i in range(3)]
    res = runner.invoke(main, ["cache", "merge", *parts, parts[0], "--into", str(tmp_path / "all.sqlite")])
    assert res.exit_code == 0, res.output
    n0 = len(ids[0]) * 4
    assert f"{36 + n0} rows read, 36 added, {n0} identical kept once, 0 conflicts" in res.output
    # the merged cache answers the whole job: no call
    _judge(server, tmp_path, name="all")
    assert server.call("/stats")["chat"] == 36


def test_merge_conflict_keeps_newest(tmp_path):
    from rankwise.relevance.llm.cache import VerdictCache
    from rankwise.relevance.llm.shard import merge_caches

    fields = dict(grade=None, model="m", mode="question", scale="binary", prompt_version="v1", style="single",
                  call="single")
    with VerdictCache(tmp_path / "a.sqlite") as a:
        a.put("k1", verdict=0, reason="old", **fields)
        a.put("k2", verdict=1, reason="same", **fields)
    time.sleep(0.01)
    with VerdictCache(tmp_path / "b.sqlite") as b:
        b.put("k1", verdict=1, reason="new", **fields)
        b.put("k2", verdict=1, reason="same", **fields)
        b.put("k3", verdict=0, reason="only b", **fields)
    r = merge_caches([tmp_path / "a.sqlite", tmp_path / "b.sqlite"], tmp_path / "c.sqlite")
    assert (r.read, r.added, r.identical, r.conflicts, r.replaced, r.total) == (5, 3, 1, 1, 1, 3)
    with VerdictCache(tmp_path / "c.sqlite") as c:
        assert c.get("k1").reason == "new" and c.get("k3").verdict == 0


def test_bad_shard_is_one_line_error(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    res = CliRunner().invoke(main, ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url",
                                    server.base_url, "--records", str(tmp_path / "o.jsonl"), "--shard", "3/3"])
    assert res.exit_code == 2 and "0 <= i < N" in res.output


def test_unreachable_batch_api_is_one_line_error(tmp_path):
    import socket

    _testset(tmp_path / "ts.jsonl")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(main, ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url",
                                    f"http://127.0.0.1:{port}/v1", "--cache", str(tmp_path / "c.sqlite"),
                                    "--records", str(tmp_path / "o.jsonl"), "--batch-api", "--max-retries", "1"])
    assert res.exit_code == 2 and res.stdout == ""
    *retries, error = res.stderr.splitlines()
    assert error.startswith("rankwise: error: batch API POST /files (upload of batch 1/1): cannot reach "
                            "http://127.0.0.1:") and "gave up after 2 attempts" in error
    assert len(retries) == 1 and "retry 1/1" in retries[0]
