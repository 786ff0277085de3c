"""``rankwise position-curve`` end to end against the simulated generator (tests/generator_server.py): a
planted RBP(p = 0.7) curve and a planted U-shape are recovered; --dry-run counts the calls and makes none;
a run stopped by Ctrl-C or SIGKILL resumes from the cache without asking the same context twice.

Tolerance: the server draws each question's "difficulty" from its own stratum of [0, 1) (see the server's
docstring), so accuracy by position is the planted curve to within 1/cases; with 150 cases the RBP fit must
name ``rbp`` with p within 0.03 of 0.7, and the U-shape must be named ``u_shape``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator_server import key_of, running_generator, synthetic_cases, write_cases
from rankwise.cli import main

N_CASES = 150
K = 8


@pytest.fixture(scope="module")
def generator():
    with running_generator() as gen:
        yield gen


@pytest.fixture(scope="module")
def cases():
    return synthetic_cases(N_CASES, k=K, golds=(0, 1, 1, 2))


def _curve(gen, tmp_path, cases, curve, *extra):
    gen.reset()
    gen.configure(key=key_of(cases), curve=curve, mode="sample", draw="stratified", alpha=0.1, beta=0.8, seed=3)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    out = tmp_path / "curve.json"
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", gen.base_url,
                                  "-k", str(K), "--score", "em", "--cache", str(tmp_path / "c.sqlite"),
                                  "--out", str(out), "--quiet", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text()), r


def test_recovers_planted_rbp(generator, cases, tmp_path):
    doc, r = _curve(generator, tmp_path, cases, {"kind": "rbp", "p": 0.7}, "--plot", str(tmp_path / "p.png"))
    best = doc["fits"][0]
    assert best["discount"] == "rbp", doc["best"]
    assert abs(best["params"]["p"] - 0.7) <= 0.03
    assert abs(best["alpha"] - 0.1) <= 0.03 and abs(best["beta"] - 0.8) <= 0.05
    assert doc["counts"] == [N_CASES] * K  # every case planted at every position, every answer scored
    planted = [0.1 + 0.8 * 0.7 ** i for i in range(K)]
    assert max(abs(a - p) for a, p in zip(doc["accuracy"], planted, strict=True)) <= 1.5 / N_CASES + 1e-9
    assert generator.stats()["by_kind"] == {"answer": N_CASES * K}
    assert "best fit: rbp(p=0.7" in r.output
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the curve file drives wcp(decay=curve): weights are the fitted accuracy per position
    assert doc["weights"][0] == pytest.approx(best["alpha"] + best["beta"])


def test_recovers_planted_u_shape(generator, cases, tmp_path):
    doc, _ = _curve(generator, tmp_path, cases, {"kind": "u_shape", "p": 0.5, "q": 0.5, "b": 1.0})
    assert doc["fits"][0]["discount"] == "u_shape", doc["best"]
    monotone = [f["aic"] for f in doc["fits"] if f["discount"] in ("log", "linear", "rbp", "power", "flat")]
    assert doc["fits"][0]["aic"] < min(monotone) - 10
    acc = doc["accuracy"]
    assert acc[0] > acc[K // 2] and acc[-1] > acc[K // 2]  # lost in the middle


def test_dry_run_counts_calls_and_calls_nothing(generator, cases, tmp_path):
    generator.reset()
    generator.configure(key=key_of(cases))
    ts = write_cases(cases[:20], tmp_path / "ts.jsonl")
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url,
                                  "-k", "6", "--repeats", "2", "--dry-run", "--cache", str(tmp_path / "c.sqlite"),
                                  "--price-in", "1", "--price-out", "2"])
    assert r.exit_code == 0, r.output
    assert "20 cases x 6 positions x 2 repeats = 240 contexts" in r.output
    assert "0 in the cache, 240 calls to make" in r.output and "estimated cost $" in r.output
    assert generator.stats()["requests"] == 0


def test_cases_without_reference_or_support_are_skipped_and_counted(generator, cases, tmp_path):
    rows = [dict(c) for c in cases[:12]]
    rows[0] = {k: v for k, v in rows[0].items() if k != "reference"}
    rows[1] = dict(rows[1], reference_contexts=[], retrieved_contexts=["only filler here"] * 3)
    ts = write_cases(rows, tmp_path / "ts.jsonl")
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url,
                                  "-k", "4", "--dry-run", "--cache", str(tmp_path / "c.sqlite")])
    assert r.exit_code == 0, r.output
    assert "10 cases x 4 positions x 1 repeat = 40 contexts (1 no reference answer, 1 no supporting chunk" in r.output


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from rankwise.cli import main; main()", *args]


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopped_run_resumes_without_repeating_a_call(generator, cases, tmp_path, sig):
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, latency=0.05)
    rows = cases[:40]
    ts = write_cases(rows, tmp_path / "ts.jsonl")
    args = ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url, "-k", "5",
            "--concurrency", "8", "--cache", str(tmp_path / "c.sqlite"), "--quiet", "--score", "em",
            "--format", "json"]
    try:
        proc = subprocess.Popen(_cli(*args), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while generator.stats()["requests"] < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        if sig == signal.SIGINT:
            assert proc.returncode == 130, err
            assert "rerun the same command to resume" in err
        first = generator.stats()["requests"]
        assert 60 <= first < 200
        done = subprocess.run(_cli(*args), env=_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        stats = generator.stats()
        doc = json.loads(done.stdout)
        assert doc["counts"] == [40] * 5
        # every reply had before Ctrl-C was kept: only the calls in flight then (8 at most) are asked again;
        # SIGKILL also loses the replies the cache writer had not committed yet (a few milliseconds' worth)
        bound = 8 if sig == signal.SIGINT else 16
        assert stats["repeated_prompts"] <= bound and stats["requests"] == 200 + stats["repeated_prompts"]
        assert doc["calls"]["cached"] == first - stats["repeated_prompts"]
    finally:
        generator.configure(latency=0.0)
