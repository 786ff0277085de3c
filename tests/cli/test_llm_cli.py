"""``rankwise judge`` / ``cache`` end to end against the loopback Chat Completions server, including
a run killed with SIGKILL midway that resumes without redoing a verdict, and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from _forked import cli_popen
from rankwise.cli import main
from rankwise.data.records import load_records

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
TEXTS = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
         "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]


def _testset(path: Path, n_cases: int = 2, texts=TEXTS) -> Path:
    with open(path, "w") as fh:
        for i in range(n_cases):
            fh.write(json.dumps({"id": f"q{i + 1}", "user_input": QUESTION, "reference": REFERENCE,
                                 "retrieved_contexts": [{"id": f"q{i + 1}c{j + 1}", "text": f"{t} (case {i})"}
                                                        for j, t in enumerate(texts)]}) + "\n")
    return path


def _run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result


def _judge_args(srv, testset, cache, records, *extra):
    return ["judge", testset, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache,
            "--records", records, "--quiet", *extra]


def test_judge_writes_records_and_rerun_is_free(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl")
    cache, out = tmp_path / "c.sqlite", tmp_path / "out.jsonl"
    r = _run(*_judge_args(srv, ts, cache, out, "--price-in", "0.15", "--price-out", "0.60"))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"judged 8 chunks of 2 cases with judge-test at {srv.base_url} (mode reference, "
                               "binary, prompt reference-binary-v4+")
    assert lines[1] == "  verdicts: 8 ok (0 from cache, 8 new), 0 failed, 0 missing"
    assert lines[2] == "  calls: 8 requests made, 0 cache hits, 0 retries, 0 repairs"
    assert lines[3].startswith("  tokens: ") and "; cost $0.000" in lines[3]
    assert lines[-1] == f"records: {out} (2 cases, verdict source 'llm')"
    assert srv.stats()["requests"] == 8
    records = load_records(out)
    assert [r.verdicts("llm") for r in records] == [[1, 0, 0, 1], [1, 0, 0, 1]]
    v = records[0].chunks[0].verdicts["llm"]
    assert v.reason == "the chunk mentions 1889, completed" and v.meta["model"] == "judge-test"
    assert v.meta["mode"] == "reference" and v.meta["prompt_version"].startswith("reference-binary-v4+")
    assert records[0].status["llm"] == "ok"

    srv.reset()
    r = _run(*_judge_args(srv, ts, cache, tmp_path / "out2.jsonl"))
    assert r.exit_code == 0, r.output
    assert "  verdicts: 8 ok (8 from cache, 0 new), 0 failed, 0 missing" in r.stdout
    assert "  calls: 0 requests made, 8 cache hits" in r.stdout
    assert srv.stats()["requests"] == 0
    assert (tmp_path / "out2.jsonl").read_text() == out.read_text()

    # the RAG engineer's scorer reads the verdicts back
    r = _run("eval-rag", out, "--relevance", "llm", "-k", "4", "--format", "json")
    assert r.exit_code == 0, r.output
    mean = json.loads(r.stdout)["mean"]
    assert mean["precision@4"] == pytest.approx(0.5)
    assert mean["mrr"] == pytest.approx(1.0)


def test_failures_are_counted_in_the_summary_and_records(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 1, TEXTS + ["completed [[refuse]]", "completed [[malformed]]"])
    out = tmp_path / "out.jsonl"
    r = _run(*_judge_args(srv, ts, tmp_path / "c.sqlite", out))
    assert r.exit_code == 0, r.output
    assert "  verdicts: 4 ok (0 from cache, 4 new), 2 failed, 0 missing" in r.stdout
    assert "  not had: refused 1, unparseable 1 (not cached: the same command tries them again)" in r.stdout
    rec = load_records(out)[0]
    assert rec.verdicts("llm") == [1, 0, 0, 1, None, None]
    assert rec.status["llm"] == "incomplete: 2 failed verdicts"
    assert rec.chunks[4].verdicts["llm"].error.startswith("refused: I'm sorry")
    r = _run(*_judge_args(srv, ts, tmp_path / "c.sqlite", out, "--strict"))
    assert r.exit_code == 1


def test_dry_run_and_max_calls(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 3)
    cache = tmp_path / "c.sqlite"
    r = _run("judge", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache, "--dry-run",
             "--price-in", "0.15", "--price-out", "0.6")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "dry run: 3 cases, 12 chunks; 0 already in the cache, 0 cannot be judged (no text / " \
                       "question / reference)"
    assert lines[1].startswith(f"would make 12 calls to judge-test at {srv.base_url}")
    assert lines[2].startswith("estimated tokens: ~") and lines[3].startswith("estimated cost: $0.00")
    assert srv.stats()["requests"] == 0
    r = _run("judge", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache, "--dry-run",
             "--batch")
    assert "would make 3 calls" in r.stdout

    out = tmp_path / "out.jsonl"
    r = _run(*_judge_args(srv, ts, cache, out, "--max-calls", "5", "--concurrency", "1"))
    assert r.exit_code == 0, r.output
    assert "  verdicts: 5 ok (0 from cache, 5 new), 0 failed, 7 missing" in r.stdout
    assert "  not had: max-calls 7 (not cached" in r.stdout
    assert srv.stats()["requests"] == 5
    statuses = [c.verdicts["llm"].status for rec in load_records(out) for c in rec.chunks]
    assert statuses.count("missing") == 7
    r = _run("judge", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache, "--dry-run")
    assert r.stdout.splitlines()[0].startswith("dry run: 3 cases, 12 chunks; 5 already in the cache")


def test_batch_cli(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 5)
    r = _run(*_judge_args(srv, ts, tmp_path / "c.sqlite", tmp_path / "out.jsonl", "--batch"))
    assert r.exit_code == 0, r.output
    assert "  calls: 5 requests made, 0 cache hits, 0 retries, 0 repairs; 5 batch calls, 0 fell back" in r.stdout
    assert [rec.verdicts("llm") for rec in load_records(tmp_path / "out.jsonl")] == [[1, 0, 0, 1]] * 5


def test_judging_a_records_file_keeps_other_verdicts(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 1)
    first = tmp_path / "ref.jsonl"
    assert _run(*_judge_args(srv, ts, tmp_path / "c.sqlite", first)).exit_code == 0
    second = tmp_path / "both.jsonl"
    r = _run(*_judge_args(srv, first, tmp_path / "c.sqlite", second, "--mode", "question", "--source",
                          "llm_question"))
    assert r.exit_code == 0, r.output
    rec = load_records(second)[0]
    assert rec.verdicts("llm") == [1, 0, 0, 1]
    assert rec.verdicts("llm_question") == [1, 0, 1, 0]


def test_cache_stats_and_clear(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 1)
    cache = tmp_path / "c.sqlite"
    _run(*_judge_args(srv, ts, cache, tmp_path / "o.jsonl"))
    _run(*_judge_args(srv, ts, cache, tmp_path / "o.jsonl", "--mode", "question"))
    r = _run("cache", "stats", "--cache", cache, "--format", "json")
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout)
    assert stats["verdicts"] == 8
    assert sorted((g["mode"], g["verdicts"], g["relevant"]) for g in stats["groups"]) == [("question", 4, 2),
                                                                                         ("reference", 4, 2)]
    r = _run("cache", "stats", "--cache", cache)
    assert f"cache: {cache}" in r.stdout and "8 verdicts" in r.stdout
    r = _run("cache", "clear", "--cache", cache, "--prompt-version", stats["groups"][0]["prompt_version"])
    assert r.stdout.strip() == f"cleared 4 verdicts from {cache} (4 left)"
    r = _run("cache", "clear", "--cache", cache)
    assert r.stdout.strip() == f"cleared 4 verdicts from {cache} (0 left)"
    r = _run("cache", "stats", "--cache", tmp_path / "none.sqlite")
    assert r.stdout.strip() == f"no cache at {tmp_path / 'none.sqlite'} (0 verdicts)"


def test_errors_are_one_line(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _run("judge", ts, "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--cache",
             tmp_path / "c.sqlite", "--records", tmp_path / "o.jsonl", "--quiet")
    assert r.exit_code == 2
    assert r.stderr.startswith(f"rankwise: error: cannot reach the LLM endpoint http://127.0.0.1:{port}/v1: ")
    assert "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1
    r = _run("judge", ts, "--model", "m", "--base-url", srv.base_url, "--cache", tmp_path / "c.sqlite")
    assert r.exit_code == 2 and "give --records OUT.jsonl" in r.stderr
    no_ref = tmp_path / "noref.jsonl"
    no_ref.write_text(json.dumps({"id": "q1", "user_input": "q?", "retrieved_contexts": ["a"]}) + "\n")
    r = _run(*_judge_args(srv, no_ref, tmp_path / "c.sqlite", tmp_path / "o.jsonl"))
    assert r.exit_code == 2
    assert "mode 'reference' needs a reference per case" in r.stderr and "in mode 'question'" in r.stderr


def test_config_file_supplies_endpoint(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 1)
    cfg = tmp_path / "judge.toml"
    cfg.write_text(f'[llm]\nmodel = "judge-test"\nbase_url = "{srv.base_url}"\nmode = "question"\n'
                   f'concurrency = 2\ncache = "{tmp_path / "cfg-cache.sqlite"}"\n')
    r = _run("judge", ts, "--config", cfg, "--records", tmp_path / "o.jsonl", "--quiet")
    assert r.exit_code == 0, r.output
    assert "(mode question, binary" in r.stdout
    assert (tmp_path / "cfg-cache.sqlite").exists()
    assert load_records(tmp_path / "o.jsonl")[0].verdicts("llm") == [1, 0, 1, 0]


# ----------------------------------------------------------------------- kill -9 and Ctrl-C, for
# real


def _cached(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(str(cache)) as db:
            return db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _spawn(srv, ts, cache, out, *extra):
    cmd = ["judge", str(ts), "--model", "judge-test", "--base-url",
           srv.base_url, "--cache", str(cache), "--records", str(out), "--quiet", "--concurrency", "2", *extra]
    return cli_popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=os.environ | {"PYTHONUNBUFFERED": "1"})


def _wait_for(cache: Path, n: int, proc, limit: float = 60.0) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = _cached(cache)
        if got >= n:
            return got
        if proc.poll() is not None:
            pytest.fail(f"judge ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"fewer than {n} verdicts cached after {limit} s")


def test_sigkill_midway_then_resume_redoes_nothing(srv, tmp_path):
    srv.configure(latency=0.25)
    ts = _testset(tmp_path / "ts.jsonl", 6)  # 24 chunks, 2 at a time, 0.25 s each: ~3 s in all
    cache, out = tmp_path / "c.sqlite", tmp_path / "out.jsonl"
    proc = _spawn(srv, ts, cache, out)
    _wait_for(cache, 6, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    done = _cached(cache)
    sent = srv.stats()["requests"]
    assert 6 <= done < 24
    # lost: at most the 2 calls in flight, plus a verdict the writer thread had not committed yet
    assert sent - done <= 3

    srv.reset()
    srv.configure(latency=0.0)
    again = _run(*_judge_args(srv, ts, cache, out, "--concurrency", "2"))  # the resume: in-process
    assert again.exit_code == 0, again.output
    assert srv.stats()["requests"] == 24 - done  # not one finished verdict asked again
    assert f"  verdicts: 24 ok ({done} from cache, {24 - done} new), 0 failed, 0 missing" in again.stdout
    assert [r.verdicts("llm") for r in load_records(out)] == [[1, 0, 0, 1]] * 6


def test_ctrl_c_stops_promptly_and_keeps_every_verdict_in_cache_and_records(srv, tmp_path):
    """SIGINT to a real `rankwise judge` with 64 calls in flight, twice (from an empty cache, then
    from the first one's): each time it exits 130 within 5 s, with one line on stderr, and the
    verdicts had are in the SQLite cache and in the records."""
    srv.configure(latency=0.3)
    ts = _testset(tmp_path / "ts.jsonl", 150)  # 600 chunks: ~3 s at 64 in flight and 0.3 s each
    cache = tmp_path / "c.sqlite"
    for attempt in range(2):
        out = tmp_path / f"out{attempt}.jsonl"
        before = _cached(cache)
        proc = _spawn(srv, ts, cache, out, "--concurrency", "64")
        _wait_for(cache, before + 40, proc)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("judge did not stop within 20 s of SIGINT")
        took = time.monotonic() - sent
        assert proc.returncode == 130, stderr
        assert took < 5.0, took
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
        done = _cached(cache)
        assert before + 40 <= done < 600
        records = load_records(out)
        ok = [c.verdicts["llm"] for rec in records for c in rec.chunks if c.verdicts["llm"].status == "ok"]
        assert len(ok) == done  # every verdict in the cache is in the records too
        assert all(c.verdicts["llm"].error == "interrupted" for rec in records for c in rec.chunks
                   if c.verdicts["llm"].status == "missing")
        assert stderr.strip() == (f"rankwise: interrupted; the {done} verdicts had are in {out} and the cache "
                                  f"({cache}, {done} verdicts): rerun the same command to resume")
        assert f"  verdicts: {done} ok ({before} from cache, {done - before} new), 0 failed, {600 - done} missing" \
            in stdout


def test_max_cost_stops_new_calls_and_a_rerun_goes_on(srv, tmp_path):
    ts = _testset(tmp_path / "ts.jsonl", 3)
    cache, out = tmp_path / "c.sqlite", tmp_path / "out.jsonl"
    prices = ["--price-in", "1000", "--price-out", "1000", "--concurrency", "1"]
    r = _run(*_judge_args(srv, ts, cache, out, *prices, "--max-cost", "0.25"))
    assert r.exit_code == 0, r.output
    made = srv.stats()["requests"]
    assert 0 < made < 12
    assert f"  verdicts: {made} ok (0 from cache, {made} new), 0 failed, {12 - made} missing" in r.stdout
    assert "  max-cost reached ($0.25 spent): the rest is missing; rerun with a higher --max-cost to go on" in r.stdout
    cost = float(r.stdout.split("; cost $")[1].split()[0])
    assert cost >= 0.25 and cost - cost / made < 0.25  # no call started once the cap was spent
    statuses = [c.verdicts["llm"].status for rec in load_records(out) for c in rec.chunks]
    assert statuses.count("missing") == 12 - made and statuses.count("ok") == made
    again = _run(*_judge_args(srv, ts, cache, out, *prices, "--force"))
    assert again.exit_code == 0, again.output
    assert f"  verdicts: 12 ok ({made} from cache, {12 - made} new), 0 failed, 0 missing" in again.stdout
    assert srv.stats()["requests"] == 12
    # the cap needs prices, and a batch job is priced before it is sent
    r = _run(*_judge_args(srv, ts, cache, tmp_path / "x.jsonl", "--max-cost", "1"))
    assert r.exit_code == 2 and "--max-cost needs prices" in r.output
    r = _run(*_judge_args(srv, ts, cache, tmp_path / "y.jsonl", *prices, "--max-cost", "1", "--batch-api"))
    assert r.exit_code == 2 and "--max-cost caps online calls" in r.output
