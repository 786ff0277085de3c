"""SIGTERM is handled like Ctrl-C (issue 20, item 8): ``timeout``, CI runners and container stops
send SIGTERM. Every command that pays for calls, run as a real process (forked from the test's,
tests/_forked.py) against a loopback server with latency and sent SIGTERM mid-run, exits 143 with
Ctrl-C's one-line message, keeps what it had in its records (or output) and cache, and a rerun
(in-process: the signal is what needs a real process) asks only for the rest."""

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
from rankwise.cli import main
from rankwise.data.records import load_records

REPO = Path(__file__).resolve().parents[2]
KESTREL = REPO / "src" / "rankwise" / "datasets" / "kestrel" / "corpus.jsonl"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
RESUME = "rerun the same command to resume"


@pytest.fixture(scope="module")
def generator():
    from generator_server import running_generator

    with running_generator() as gen:
        yield gen


@pytest.fixture(scope="module")
def synth_srv():
    from synth_server import running_server

    with running_server() as srv:
        yield srv


def _spawn(*args) -> subprocess.Popen:
    return cli_popen(list(map(str, args)), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _term_when(proc: subprocess.Popen, ready, limit: float = 60.0) -> tuple[str, str]:
    """SIGTERM once ``ready()``; (stdout, stderr) of the process, which must end within 20 s."""
    deadline = time.monotonic() + limit
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the command ended before SIGTERM: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("never got far enough to be sent SIGTERM")
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("did not stop within 20 s of SIGTERM")


def _rerun(args):
    """The rerun after SIGTERM, in-process: the signal is what needs a real process, not the resume.
    """
    again = CliRunner().invoke(main, [str(a) for a in args])
    assert again.exit_code == 0, again.output
    return again


def _rows(path: Path, table: str = "verdicts") -> int:
    try:
        with sqlite3.connect(str(path)) as db:
            return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return 0


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("rankwise: interrupted") and RESUME in last, stderr
    return last


def _testset(path: Path, n: int) -> Path:
    texts = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
             "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "user_input": "When was the Eiffel Tower completed?",
                                 "reference": "It was completed in 1889.",
                                 "retrieved_contexts": [f"{t} (case {i})" for t in texts]}) + "\n")
    return path


def test_judge(srv, tmp_path):
    srv.configure(latency=0.2)
    ts, cache, out = _testset(tmp_path / "ts.jsonl", 60), tmp_path / "c.sqlite", tmp_path / "out.jsonl"
    args = ["judge", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache, "--records", out,
            "--quiet", "--concurrency", "8"]
    proc = _spawn(*args)
    _, err = _term_when(proc, lambda: _rows(cache) >= 16)
    assert proc.returncode == 143, err
    done = _rows(cache)
    assert 16 <= done < 240
    assert err.strip() == (f"rankwise: interrupted; the {done} verdicts had are in {out} and the cache ({cache}, "
                           f"{done} verdicts): {RESUME}")
    ok = [c for rec in load_records(out) for c in rec.chunks if c.verdicts["llm"].status == "ok"]
    assert len(ok) == done
    srv.reset()
    srv.configure(latency=0.0)
    again = _rerun(args)
    assert srv.stats()["requests"] == 240 - done  # only the rest is asked
    assert f"verdicts: 240 ok ({done} from cache, {240 - done} new)" in again.stdout


def test_pool(srv, tmp_path):
    """pool writes the pooled test set with the verdicts had, then exits 143; a rerun judges the
    rest."""
    srv.configure(latency=0.2)
    rows, runs = [], []
    for i in range(30):
        rows.append({"id": f"q{i}", "user_input": "When was the Eiffel Tower completed?",
                     "reference": "It was completed in 1889.",
                     "reference_contexts": [{"text": "x", "doc_id": f"d{i}", "start": 0, "end": 1}]})
        runs.append(dict(rows[-1], retrieved_contexts=[
            {"id": f"d{i}#{10 * j}", "text": f"The Eiffel Tower was completed in 1889 (case {i}, part {j}).",
             "doc_id": f"d{i}", "start": 10 * j + 10, "end": 10 * j + 19, "score": 1.0} for j in range(4)]))
    ts, run = tmp_path / "ts.jsonl", tmp_path / "sys.rag.jsonl"
    ts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run.write_text("".join(json.dumps(r) + "\n" for r in runs))
    cache, out = tmp_path / "c.sqlite", tmp_path / "pooled.jsonl"
    args = ["pool", ts, run, "--out", out, "--model", "judge-test", "--base-url", srv.base_url, "--cache", cache,
            "--quiet", "--concurrency", "4"]
    proc = _spawn(*args)
    _, err = _term_when(proc, lambda: _rows(cache) >= 8)
    assert proc.returncode == 143, err
    done = _rows(cache)
    assert _one_line(err) == f"rankwise: interrupted; the {done} verdicts had are in {out} and the cache: {RESUME}"
    judged = [j for line in out.read_text().splitlines() for j in json.loads(line).get("pool_judged", [])]
    assert len(judged) == done
    srv.reset()
    srv.configure(latency=0.0)
    _rerun(args)
    assert srv.stats()["requests"] == 120 - done


@pytest.mark.parametrize("command", ["answer", "utility", "position-curve"])
def test_generator_commands(generator, tmp_path, command):
    from generator_server import key_of, synthetic_cases, write_cases

    cases = synthetic_cases(40, k=5)
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, latency=0.1)
    ts, cache = write_cases(cases, tmp_path / "ts.jsonl"), tmp_path / "c.sqlite"
    out = tmp_path / ("curve.json" if command == "position-curve" else "records.jsonl")
    option = "--out" if command == "position-curve" else "--records"
    extra = ["-k", "5", "--score", "em"] if command == "position-curve" else []
    args = [command, ts, "--model", "sim", "--base-url", generator.base_url, "--cache", cache, "--quiet",
            "--concurrency", "4", option, out, *extra]
    distinct = sum(len(set(c["retrieved_contexts"])) for c in cases)  # a chunk twice in a case: one call
    total = {"answer": 40, "utility": distinct, "position-curve": 200}[command]
    proc = _spawn(*args)
    _, err = _term_when(proc, lambda: generator.stats()["requests"] >= 12)
    assert proc.returncode == 143, err
    line = _one_line(err)
    had = int(line.split("the ")[1].split(" replies")[0])
    assert 8 <= had < total and 0 < _rows(cache) <= had  # (a chunk twice in a case: one prompt, one row)
    if command == "answer":
        assert sum(1 for r in load_records(out) if r.response) == had
    elif command == "utility":
        verdicts = [c for r in load_records(out) for c in r.chunks if "utility" in c.verdicts
                    and c.verdicts["utility"].status == "ok"]
        assert len(verdicts) == had
    first = generator.stats()["requests"]
    generator.configure(latency=0.0)
    _rerun(args)
    repeated = generator.stats()["repeated_prompts"]
    assert repeated <= 4  # only the calls in flight at SIGTERM (--concurrency 4) are asked again
    assert generator.stats()["requests"] == total + repeated  # every reply had was kept: not asked again
    assert first - repeated <= had  # (utility: a chunk twice in a case is two replies of one call)


def test_synth(synth_srv, tmp_path):
    synth_srv.reset()
    synth_srv.configure(latency=0.1)
    out, cache = tmp_path / "ts.jsonl", tmp_path / "c.sqlite"
    args = ["synth", KESTREL, "--model", "gen", "--base-url", synth_srv.base_url, "-n", "40", "--cache", cache,
            "--out", out, "--concurrency", "2", "--quiet"]
    proc = _spawn(*args)

    def decided() -> int:
        return sum(len(p.read_text().splitlines()) for p in (out, tmp_path / "ts.rejected.jsonl") if p.exists())

    _, err = _term_when(proc, lambda: decided() >= 6)
    assert proc.returncode == 143, err
    assert _one_line(err) == (f"rankwise: interrupted; the samples decided are in {out} and every reply had is in "
                              f"the cache: {RESUME}")
    kept = decided()
    assert 6 <= kept < 40
    synth_srv.configure(latency=0.0)
    _rerun(args)
    stats = synth_srv.stats()
    assert stats["repeated"] <= 2  # the calls in flight at SIGTERM, at most --concurrency
    assert stats["generations"] - stats["repeated"] == 40
    assert decided() == 40
