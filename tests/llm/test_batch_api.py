"""``rankwise judge --batch-api`` against a loopback Batch API server (files + batches): verdicts
equal to the online judge's, a restart mid-poll resumes the same batch (one create), expired and
partially failed batches counted and retried online; and ``--shard i/N`` workers in real processes
merged by ``rankwise cache merge`` without loss."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from _forked import cli_popen
from batch_server import start_server
from rankwise.cli import main
from rankwise.data.records import load_records

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
TEXTS = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
         "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]


def _testset(path: Path, n_cases: int = 3) -> Path:
    with open(path, "w") as fh:
        for i in range(n_cases):
            fh.write(json.dumps({"id": f"q{i + 1}", "user_input": QUESTION, "reference": REFERENCE,
                                 "retrieved_contexts": [{"id": f"q{i + 1}c{j + 1}", "text": f"{t} (case {i})"}
                                                        for j, t in enumerate(TEXTS)]}) + "\n")
    return path


@pytest.fixture(scope="module")
def _batch_server():
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server(_batch_server):
    """One server process for the file, its state (files, batches, settings, counts) reset for each
    test."""
    _batch_server.reset()
    return _batch_server


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
    assert batch_cost == pytest.approx(online_cost / 2, rel=0.02, abs=6e-5)  # both printed to 4 decimals
    db = sqlite3.connect(tmp_path / "batch.sqlite")
    rows = db.execute("SELECT part, parts, requests, batch_id, state, batch_status FROM batch_parts").fetchall()
    assert rows == [(0, 1, 12, "batch_1", "ingested", "completed")]
    assert db.execute("SELECT COUNT(*) FROM batch_results").fetchone() == (0,)  # merged into the verdicts


def test_restart_mid_poll_resumes_without_resubmitting(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"polls": 10**6})  # stays in_progress until released
    env = {**os.environ, "RANKWISE_BATCH_POLL": "0.05"}
    cmd = ["judge", str(tmp_path / "ts.jsonl"), "--model", "m",
           "--base-url", server.base_url, "--api-key", "k", "--cache", str(tmp_path / "c.sqlite"),
           "--records", str(tmp_path / "r.jsonl"), "--batch-api", "--quiet"]
    proc = cli_popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while server.call("/stats")["polls"] < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert server.call("/stats")["creates"] == 1
    server.call("/config", {"polls": 0})  # the batch ends at the next poll
    done = CliRunner().invoke(main, cmd, env={"RANKWISE_BATCH_POLL": "0.05"})  # the restart: in-process
    assert done.exit_code == 0, done.output
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
    # rerun without the cap: only the 4 failed items are called (online), nothing resubmitted as a
    # batch
    _judge(server, tmp_path)
    stats = server.call("/stats")
    assert stats["chat"] == 4 and stats["creates"] == 1


def test_shards_in_processes_merge_without_loss(server, tmp_path):
    _testset(tmp_path / "ts.jsonl", n_cases=9)
    procs = [cli_popen(["judge", str(tmp_path / "ts.jsonl"),
                        "--model", "m", "--base-url", server.base_url, "--api-key", "k",
                        "--shard", f"{i}/3", "--cache", str(tmp_path / f"part{i}.sqlite"),
                        "--records", str(tmp_path / f"part{i}.jsonl"), "--quiet"],
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
    from rankwise.llm.cache import ResponseCache
    from rankwise.llm.shard import merge_caches

    fields = dict(grade=None, model="m", mode="question", scale="binary", prompt_version="v1", style="single",
                  call="single")
    with ResponseCache(tmp_path / "a.sqlite") as a:
        a.put("k1", verdict=0, reason="old", **fields)
        a.put("k2", verdict=1, reason="same", **fields)
    time.sleep(0.01)
    with ResponseCache(tmp_path / "b.sqlite") as b:
        b.put("k1", verdict=1, reason="new", **fields)
        b.put("k2", verdict=1, reason="same", **fields)
        b.put("k3", verdict=0, reason="only b", **fields)
    r = merge_caches([tmp_path / "a.sqlite", tmp_path / "b.sqlite"], tmp_path / "c.sqlite")
    assert (r.read, r.added, r.identical, r.conflicts, r.replaced, r.total) == (5, 3, 1, 1, 1, 3)
    with ResponseCache(tmp_path / "c.sqlite") as c:
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
                                    "--records", str(tmp_path / "o.jsonl"), "--batch-api", "--max-retries", "1", "--quiet"])
    assert res.exit_code == 2 and res.stdout == ""
    *retries, error = res.stderr.splitlines()
    assert error.startswith("rankwise: error: batch API POST /files (upload of batch 1/1): cannot reach "
                            "http://127.0.0.1:") and "gave up after 2 attempts" in error
    assert len(retries) == 1 and "retry 1/1" in retries[0]


# ---------------------------------------------------------------------------------------- limits,
# retries, options
def _cmd(srv, tmp_path, *extra, name="c"):
    return ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url",
            srv.base_url, "--api-key", "k", "--cache", str(tmp_path / f"{name}.sqlite"), "--records",
            str(tmp_path / f"{name}.jsonl"), "--batch-api", "--quiet", *extra]


def _parts(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT part, parts, first, requests, batch_id, state FROM batch_parts "
                          "ORDER BY part").fetchall()


def _greedy(sizes: list[int], max_requests: int, max_bytes: int) -> list[int]:
    """Requests per batch of an in-order split at the limits (the test's own reckoning)."""
    out: list[int] = []
    n = size = 0
    for s in sizes:
        if n and (n == max_requests or size + s > max_bytes):
            out.append(n)
            n = size = 0
        n, size = n + 1, size + s
    return [*out, n] if n else out


def test_split_by_request_limit_into_three_batches(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    online = _judge(server, tmp_path, name="online")
    out = _judge(server, tmp_path, "--batch-api", "--batch-max-requests", "5", name="batch")
    stats = server.call("/stats")
    assert [(c["id"], c["requests"], c["first"]) for c in stats["created"]] == [
        ("batch_1", 5, "r0"), ("batch_2", 5, "r5"), ("batch_3", 2, "r10")]
    assert stats["uploads"] == 3 and stats["chat"] == 12  # the 12 of the online run, none after the batches
    assert "3 batches (batch_1, batch_2, batch_3): completed; 12 requests for 12 chunks, 12 verdicts, 0 failed" in out
    assert _verdicts(tmp_path / "batch.jsonl") == _verdicts(tmp_path / "online.jsonl")  # merged back by custom_id
    online_cost = float(online.split("$")[1].split()[0])
    assert float(out.split("cost $")[1].split()[0]) == pytest.approx(online_cost / 2, rel=0.02, abs=6e-5)
    assert _parts(tmp_path / "batch.sqlite") == [(0, 3, 0, 5, "batch_1", "ingested"), (1, 3, 5, 5, "batch_2", "ingested"),
                                                 (2, 3, 10, 2, "batch_3", "ingested")]


def test_split_by_byte_limit_into_three_batches(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    _judge(server, tmp_path, "--batch-api", name="probe")  # one batch: the size of each request line
    sizes = server.call("/stats")["created"][0]["line_bytes"]
    assert len(sizes) == 12 and len(set(sizes)) > 1
    limit = sum(sizes[:5])  # the 6th line does not fit in the first batch
    want = _greedy(sizes, 10**9, limit)
    assert len(want) == 3
    server.call("/reset", {})
    res = CliRunner().invoke(main, _cmd(server, tmp_path, "--batch-max-bytes", str(limit)))
    assert res.exit_code == 0, res.output
    created = server.call("/stats")["created"]
    assert [c["requests"] for c in created] == want and want[0] == 5
    assert all(sum(c["line_bytes"]) <= limit for c in created)
    assert f"12 requests split into 3 batches (at most 50000 requests and {limit} bytes each)" in res.stderr
    assert "3/3 batches done" in res.stderr and "12 verdicts, 0 failed" in res.stdout
    assert all(v is not None for v in _verdicts(tmp_path / "c.jsonl").values())


def test_request_over_the_byte_limit_is_one_line_error_before_any_call(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    res = CliRunner().invoke(main, _cmd(server, tmp_path, "--batch-max-bytes", "100"))
    assert res.exit_code == 2
    assert res.stderr.startswith("rankwise: error: request r0 is ")
    assert res.stderr.count("\n") == 1 and server.call("/stats")["uploads"] == 0


def test_kill_after_second_batch_created_restart_creates_only_the_third(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"stall_upload_from": 3, "polls": 2})
    cmd = _cmd(server, tmp_path, "--batch-max-requests", "5", "--batch-poll", "0.05")
    proc = cli_popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while server.call("/stats")["creates"] < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)  # the 3rd upload is stalled at the server
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    stats = server.call("/stats")
    assert (stats["uploads"], stats["creates"], stats["polls"]) == (2, 2, 0)
    assert _parts(tmp_path / "c.sqlite") == [(0, 3, 0, 5, "batch_1", "submitted"), (1, 3, 5, 5, "batch_2", "submitted"),
                                             (2, 3, 10, 2, None, "pending")]
    server.call("/config", {"stall_upload_from": None})
    done = CliRunner().invoke(main, cmd)  # the restart: in-process (the kill is what needs a process)
    assert done.exit_code == 0, done.output
    stats = server.call("/stats")
    assert (stats["uploads"], stats["creates"], stats["chat"]) == (3, 3, 0)  # only the 3rd created, no online call
    assert [c["first"] for c in stats["created"]] == ["r0", "r5", "r10"]
    assert stats["polled"]["batch_1"] >= 3 and stats["polled"]["batch_2"] >= 3  # polled to their end
    assert "batch batch_1 resumed (batch 1/3, 5 requests)" in done.stderr
    assert "batch batch_3 submitted (batch 3/3, 2 requests" in done.stderr
    assert "3 batches (batch_1, batch_2, batch_3): completed (resumed); 12 requests for 12 chunks, 12 verdicts" \
        in done.stdout
    assert sorted(_verdicts(tmp_path / "c.jsonl").values()) == [0] * 6 + [1] * 6


def test_429_and_503_on_every_batch_call_are_retried(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    faults = [{"status": 429, "retry_after": "0.2"}, {"status": 503}]
    server.call("/config", {"faults": {op: list(faults) for op in ("upload", "create", "retrieve", "download")}})
    t0 = time.monotonic()
    res = CliRunner().invoke(main, _cmd(server, tmp_path, "--batch-max-requests", "5", "--batch-poll", "0.05"))
    assert res.exit_code == 0, res.output
    assert time.monotonic() - t0 >= 4 * 0.2  # each Retry-After waited
    stats = server.call("/stats")
    assert stats["faults"] == {"upload": 2, "create": 2, "retrieve": 2, "download": 2}
    assert (stats["uploads"], stats["creates"], stats["downloads"], stats["chat"]) == (3, 3, 3, 0)
    assert "8 Batch-API calls retried" in res.stdout and "12 verdicts, 0 failed" in res.stdout
    assert "batch API POST /files (upload of batch 1/3): HTTP 429: " in res.stderr and "retry 1/4 in 0.2 s" in \
        res.stderr
    assert "batch API POST /batches (create of batch 1/3): HTTP 503: " in res.stderr
    assert "(poll of batch batch_1, batch 1/3): HTTP 429" in res.stderr
    assert sorted(_verdicts(tmp_path / "c.jsonl").values()) == [0] * 6 + [1] * 6


def test_dropped_and_late_replies_are_retried_and_a_lost_create_is_not_repeated(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"faults": {"upload": [{"drop": True}], "create": [{"drop_after": True}],
                                       "retrieve": [{"delay": 1.5}], "download": [{"drop": True}]}})
    res = CliRunner().invoke(main, _cmd(server, tmp_path, "--timeout", "0.5", "--batch-poll", "0.05"))
    assert res.exit_code == 0, res.output
    stats = server.call("/stats")
    assert stats["faults"] == {"upload": 1, "create": 1, "retrieve": 1, "download": 1}
    assert stats["creates"] == 1  # the create whose reply was lost was found in the batch list, not sent again
    assert "no reply within 0.5 s" in res.stderr and "connection to http://127.0.0.1:" in res.stderr
    assert "batch batch_1: completed; 12 requests for 12 chunks, 12 verdicts, 0 failed" in res.stdout
    assert "3 Batch-API calls retried" in res.stdout  # upload, poll, download; the create was recovered


def test_exhausted_retries_exit_2_keep_the_cache_and_a_rerun_resumes(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"faults": {"download": [{"pass": True}] + [{"status": 503}] * 3}})
    cmd = _cmd(server, tmp_path, "--batch-max-requests", "5", "--batch-poll", "0.05", "--max-retries", "2")
    res = CliRunner().invoke(main, cmd)
    assert res.exit_code == 2 and res.stdout == ""
    error = res.stderr.splitlines()[-1]
    assert error.startswith("rankwise: error: batch API GET /files/")
    assert ("/content (download of the output file of batch batch_2, batch 2/3): HTTP 503: " in error
            and "gave up after 3 attempts; 3 of 3 batches created, their ids and the results received are kept in "
            f"{tmp_path / 'c.sqlite'}: rerun the same command to resume" in error)
    assert not (tmp_path / "c.jsonl").exists()
    assert [p[4:] for p in _parts(tmp_path / "c.sqlite")] == [("batch_1", "done"), ("batch_2", "submitted"),
                                                               ("batch_3", "submitted")]
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT part, kind FROM batch_results").fetchall() == [(0, "output_file_id")]
        assert db.execute("SELECT COUNT(*) FROM verdicts").fetchone() == (0,)
    assert server.call("/stats")["downloads"] == 1
    res = CliRunner().invoke(main, cmd)
    assert res.exit_code == 0, res.output
    stats = server.call("/stats")
    assert (stats["uploads"], stats["creates"], stats["downloads"], stats["chat"]) == (3, 3, 3, 0)
    assert "(resumed)" in res.stdout and "12 verdicts, 0 failed" in res.stdout


def test_batch_options_precedence_flag_env_config_default(tmp_path):
    from rankwise.errors import InputError
    from rankwise.llm.batch_api import resolve_batch_settings

    conf = tmp_path / "rankwise.toml"
    conf.write_text("[llm]\nbatch_poll = 7\nbatch_discount = 0.3\nbatch_max_requests = 5\n")
    env = {"RANKWISE_BATCH_POLL": "11", "RANKWISE_BATCH_DISCOUNT": "0.2"}

    def got(**kw):
        s = resolve_batch_settings(**kw)
        return (s.poll_seconds, s.discount, s.max_requests, s.max_bytes)

    assert got(config=conf, env=env, poll_seconds=2, discount=0.1) == (2.0, 0.1, 5, 200_000_000)  # flags
    assert got(config=conf, env=env) == (11.0, 0.2, 5, 200_000_000)  # the environment over the file
    assert got(config=conf, env={}) == (7.0, 0.3, 5, 200_000_000)  # the file
    assert got(config=None, env={}, max_bytes=1000) == (30.0, 0.5, 50_000, 1000)  # the defaults
    conf.write_text("[llm]\nbatch_discount = 1.5\n")
    with pytest.raises(InputError, match=r"rankwise.toml: field 'batch_discount': batch_discount must be a "
                                         r"fraction from 0 to 1"):
        resolve_batch_settings(config=conf, env={})
    conf.write_text("[llm]\nbatch_max_requests = \"many\"\n")
    with pytest.raises(InputError, match="field 'batch_max_requests': batch_max_requests must be an integer"):
        resolve_batch_settings(config=conf, env={})
    with pytest.raises(InputError, match=r"field 'RANKWISE_BATCH_POLL': \$RANKWISE_BATCH_POLL must be a number"):
        resolve_batch_settings(config=None, env={"RANKWISE_BATCH_POLL": "soon"})
    with pytest.raises(InputError, match="field 'RANKWISE_BATCH_POLL': RANKWISE_BATCH_POLL must be > 0"):
        resolve_batch_settings(config=None, env={"RANKWISE_BATCH_POLL": "0"})


def test_batch_options_on_the_command_line(server, tmp_path, monkeypatch):
    _testset(tmp_path / "ts.jsonl")
    conf = tmp_path / "rankwise.toml"
    conf.write_text("[llm]\nbatch_max_requests = 5\nbatch_discount = 0.25\nbatch_poll = 0.05\n")
    monkeypatch.delenv("RANKWISE_BATCH_POLL")
    price = ("--price-in", "100", "--price-out", "200")  # the last --price-in given wins: costs of 4 digits
    online = _judge(server, tmp_path, *price, name="online")
    online_cost = float(online.split("$")[1].split()[0])
    out = _judge(server, tmp_path, *price, "--batch-api", "--config", str(conf), name="a")  # the config file's
    assert "3 batches (" in out
    assert float(out.split("cost $")[1].split()[0]) == pytest.approx(online_cost * 0.25, rel=0.02)
    monkeypatch.setenv("RANKWISE_BATCH_DISCOUNT", "0.4")  # the environment over the file
    out = _judge(server, tmp_path, *price, "--batch-api", "--config", str(conf), "--batch-max-requests", "12", name="b")
    assert "batch batch_4: completed" in out  # the flag over the file: one batch
    assert float(out.split("cost $")[1].split()[0]) == pytest.approx(online_cost * 0.4, rel=0.02)
    out = _judge(server, tmp_path, *price, "--batch-api", "--config", str(conf), "--batch-discount", "1", name="c")
    assert float(out.split("cost $")[1].split()[0]) == pytest.approx(online_cost, rel=0.02)  # the flag over all
    res = CliRunner().invoke(main, ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url",
                                    server.base_url, "--records", str(tmp_path / "x.jsonl"), "--batch-poll", "5"])
    assert res.exit_code == 2 and "--batch-poll needs --batch-api" in res.stderr
    res = CliRunner().invoke(main, _cmd(server, tmp_path, "--batch-discount", "2", name="d"))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "--batch-discount must be a fraction from 0 to 1" in res.stderr  # the flag, in the user's words


def test_a_create_whose_reply_was_lost_is_found_on_rerun_not_created_again(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    # the batch is created but its reply lost, and the batch list cannot be read then: the run gives
    # up
    server.call("/config", {"faults": {"create": [{"drop_after": True}], "list": [{"status": 503}]}})
    cmd = _cmd(server, tmp_path, "--max-retries", "0", "--batch-poll", "0.05")
    res = CliRunner().invoke(main, cmd)
    assert res.exit_code == 2
    assert res.stderr.startswith("rankwise: error: batch API POST /batches (create of batch 1/1): connection to ")
    assert "0 of 1 batches created" in res.stderr and res.stderr.count("\n") == 1
    assert _parts(tmp_path / "c.sqlite") == [(0, 1, 0, 12, None, "uploaded")]
    assert server.call("/stats")["creates"] == 1
    res = CliRunner().invoke(main, cmd)  # the rerun finds batch_1 by its input file in the list
    assert res.exit_code == 0, res.output
    stats = server.call("/stats")
    assert (stats["uploads"], stats["creates"], stats["chat"]) == (1, 1, 0)
    assert "batch batch_1: completed; 12 requests for 12 chunks, 12 verdicts, 0 failed" in res.stdout


def test_dry_run_shows_the_batches_and_calls_nothing(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    res = CliRunner().invoke(main, [*_cmd(server, tmp_path, "--batch-max-requests", "5", "--price-in", "1",
                                          "--price-out", "2"), "--dry-run"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("batch API:"))
    assert server.call("/stats") == {"uploads": 0, "creates": 0, "polls": 0, "chat": 0, "downloads": 0,
                                     "created": [], "polled": {}, "faults": {}, "authorization": None}
    _judge(server, tmp_path, "--batch-api", "--batch-max-requests", "5")  # the batches the run then creates
    created = server.call("/stats")["created"]
    sizes = ", ".join(str(sum(c["line_bytes"])) for c in created)
    assert [c["requests"] for c in created] == [5, 5, 2]
    assert line.startswith(f"batch API: 12 requests in 3 batches of 5, 5, 2 requests ({sizes} bytes); estimated "
                           "cost $")


def test_ctrl_c_while_polling_keeps_the_batches_and_says_how_to_resume(server, tmp_path):
    _testset(tmp_path / "ts.jsonl")
    server.call("/config", {"polls": 10**6})
    proc = cli_popen(_cmd(server, tmp_path, "--batch-poll", "0.05"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while server.call("/stats")["polls"] < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert err.splitlines()[-1] == (f"rankwise: interrupted; the batch ids are kept in the cache "
                                    f"({tmp_path / 'c.sqlite'}): rerun the same command to resume polling")
    assert [p[4:] for p in _parts(tmp_path / "c.sqlite")] == [("batch_1", "submitted")]


def test_duplicate_unknown_and_missing_custom_ids_are_counted_failures(server, tmp_path):
    """A misbehaving provider: every result twice (the first one wrong), ids never sent, ids left
    out. No duplicate is trusted (neither line is used), unknown lines are counted, missing ids
    fail; with --max-calls 0 those chunks stay missing, and a rerun judges them online to the online
    verdicts."""
    _testset(tmp_path / "ts.jsonl")
    _judge(server, tmp_path, name="online")
    want = _verdicts(tmp_path / "online.jsonl")
    server.call("/config", {"misbehave": {"duplicate": True, "unknown": 2}})
    out = _judge(server, tmp_path, "--batch-api", "--max-calls", "0", name="dup")
    assert "0 verdicts, 12 failed (duplicate custom_id 12, unknown custom_id 2)" in out
    got = [c.verdicts["llm"].status for r in load_records(tmp_path / "dup.jsonl") for c in r.chunks]
    assert got == ["missing"] * 12
    chat = server.call("/stats")["chat"]
    _judge(server, tmp_path, name="dup")  # online, the failed ones
    assert server.call("/stats")["chat"] == chat + 12
    assert _verdicts(tmp_path / "dup.jsonl") == want
    server.call("/config", {"misbehave": {"drop": 3}})
    out = _judge(server, tmp_path, "--batch-api", "--max-calls", "0", name="drop")
    assert "9 verdicts, 3 failed (no result 3)" in out
    got = {c.id: c.verdicts["llm"].verdict for r in load_records(tmp_path / "drop.jsonl") for c in r.chunks}
    assert [v for v in got.values() if v is not None] == [want[k] for k, v in got.items() if v is not None]
    assert list(got.values()).count(None) == 3


SECRET = "Zq7SECRETpw"


def test_batch_api_sends_url_credentials_as_basic_auth_and_never_shows_the_password(server, tmp_path):
    import base64

    _testset(tmp_path / "ts.jsonl")
    url = server.base_url.replace("http://", f"http://ann:{SECRET}@")
    args = ["judge", str(tmp_path / "ts.jsonl"), "--model", "m", "--base-url", url, "--cache",
            str(tmp_path / "c.sqlite"), "--records", str(tmp_path / "r.jsonl"), "--batch-api"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    stats = server.call("/stats")
    assert stats["creates"] == 1 and stats["chat"] == 0 and "12 verdicts, 0 failed" in r.stdout
    assert stats["authorization"] == "Basic " + base64.b64encode(f"ann:{SECRET}".encode()).decode()
    assert "ann:***@" in r.stdout
    # a Batch-API call that fails for good: its message names the URL, masked
    server.call("/config", {"faults": {"upload": [{"status": 503}] * 9}})
    r = CliRunner().invoke(main, [*args[:6], "--cache", str(tmp_path / "c2.sqlite"), "--records",
                                  str(tmp_path / "r2.jsonl"), "--batch-api", "--max-retries", "1"])
    assert r.exit_code == 2 and r.stderr.splitlines()[-1].startswith("rankwise: error: batch API POST /files")
    assert SECRET not in r.stdout and SECRET not in r.stderr
    # an endpoint that is not there: named, masked
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = f"http://ann:{SECRET}@127.0.0.1:{port}/v1"
    r = CliRunner().invoke(main, [*args[:5], gone, "--cache", str(tmp_path / "c3.sqlite"), "--records",
                                  str(tmp_path / "r3.jsonl"), "--batch-api", "--max-retries", "0"])
    assert r.exit_code == 2 and f"cannot reach http://ann:***@127.0.0.1:{port}/v1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and SECRET not in r.stdout + r.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def test_the_judge_runs_from_python_with_shards_batch_api_and_resume(server, tmp_path):
    """`rankwise.judge` is `rankwise judge` from Python: one LLMConfig passed whole, shards, the
    Batch API, records written, and a second call answered from the cache (resume)."""
    import rankwise
    from rankwise.llm.batch_api import resolve_batch_settings
    from rankwise.llm.config import resolve_llm_config

    ts = _testset(tmp_path / "ts.jsonl", n_cases=6)
    ids = []
    for i in range(2):
        cfg = resolve_llm_config(model="m", base_url=server.base_url, api_key="k", env={},
                                 cache=tmp_path / f"part{i}.sqlite")
        run = rankwise.judge(ts, cfg, records_out=tmp_path / f"part{i}.jsonl", shard=f"{i}/2",
                             batch_api=resolve_batch_settings(env={}, poll_seconds=0.05))
        assert run.batch_report is not None and run.result.summary.complete
        ids.append([r.id for r in load_records(tmp_path / f"part{i}.jsonl")])
        again = rankwise.judge(ts, cfg, records_out=tmp_path / f"part{i}.jsonl", shard=f"{i}/2")
        assert again.result.summary.cached == again.result.summary.ok == run.result.summary.ok  # resumed: no call
    assert sorted(ids[0] + ids[1]) == [f"q{k}" for k in range(1, 7)] and not set(ids[0]) & set(ids[1])


@pytest.mark.parametrize("batch", [False, True])
def test_batch_requests_ask_for_the_reply_schema_the_online_path_asks_for(batch, tmp_path):
    """Each Batch-API line carries ``response_format`` with the verdict schema the online call sends
    (before: none, so a batch reply was free text where the online one was constrained); ``text``
    sends none."""
    from rankwise.llm.batch_api import build_requests
    from rankwise.llm.cache import ResponseCache
    from rankwise.llm.client import CallPolicy, Endpoint, response_format_body
    from rankwise.llm.parse import verdict_schema
    from rankwise.relevance.llm_judge import Judge, JudgeCase, JudgeUnit, PromptSettings

    judge = Judge(Endpoint("m", "http://127.0.0.1:9/v1", "k"), PromptSettings(mode="reference", graded=batch),
                  CallPolicy(), ResponseCache(tmp_path / "c.sqlite"))
    case = JudgeCase("q1", QUESTION, list(TEXTS[:3]), REFERENCE)
    units = [JudgeUnit(case, [0, 1, 2], True)] if batch else [JudgeUnit(case, [i], False) for i in range(3)]
    lines = build_requests(judge, units)
    schema = verdict_schema(batch, 3 if batch else None)
    assert [line["body"]["response_format"] for line in lines] == [response_format_body("json_schema", schema)] * len(units)
    # OpenAI's strict mode refuses string lengths: the reason's bound is left out at this level,
    # nothing else is
    sent = lines[0]["body"]["response_format"]["json_schema"]["schema"]
    assert json.dumps(sent) == json.dumps(schema).replace(', "minLength": 4, "maxLength": 80', "")
    assert all("response_format" not in line["body"] for line in build_requests(judge, units, response_format="text"))
