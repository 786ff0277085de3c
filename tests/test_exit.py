"""Leaving the process (issue 10, item 12): `rankwise eval` used to abort at interpreter teardown
("terminate called without an active exception", rc -6; Arrow's thread pools, apache/arrow#34314) in
about 1 run of 40 when two ran at once. The CLI now flushes and leaves through ``os._exit``.

The 300 runs use rankwise's compiled bytecode, as an installed rankwise does (pip compiles a wheel's modules):
with ``PYTHONDONTWRITEBYTECODE=1`` and a source tree without ``__pycache__``, every process would compile
rankwise's sources again (about 55 ms of CPU each, a fifth of the process; README "Against the targets").
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rankwise

RUNS = int(os.environ.get("RANKWISE_EXIT_RUNS", "300"))


def _command() -> list[str]:
    """The installed console script when there is one (what users run), else the module."""
    script = Path(sys.executable).with_name("rankwise")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rankwise.cli"]


@pytest.fixture
def files(tmp_path):
    q = tmp_path / "q.txt"
    r = tmp_path / "r.trec"
    q.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n")
    r.write_text("q1 Q0 d1 1 2.0 s\nq1 Q0 d2 2 1.0 s\nq2 Q0 d4 1 1.0 s\nq2 Q0 d3 2 0.5 s\n")
    return q, r


@pytest.mark.slow
def test_eval_300_times_two_at_a_time_always_exits_0(files):
    q, r = files
    assert compileall.compile_dir(Path(rankwise.__file__).parent, quiet=1)  # no-op when the bytecode is current
    args = [*_command(), "eval", str(q), str(r), "-m", "map,P@1", "--format", "json"]
    bad = []
    start = time.perf_counter()
    for _ in range(RUNS // 2):
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0 or b'"map": 0.75' not in out:
                bad.append((p.returncode, err[-300:]))
    elapsed = time.perf_counter() - start
    assert not bad, f"{len(bad)} of {RUNS} runs failed, e.g. {bad[:3]}"
    print(f"{RUNS} runs of rankwise eval, two at a time: all rc 0 in {elapsed:.1f} s")


def test_exit_codes_and_output_survive_os_exit(files, tmp_path):
    q, r = files
    ok = subprocess.run([*_command(), "eval", str(q), str(r), "-m", "map", "--format", "csv", "--per-query"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.count("\n") >= 3 and ok.stderr == ""  # flushed in full
    bad = subprocess.run([*_command(), "eval", str(q), str(tmp_path / "missing.trec")], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("rankwise: error: ") and bad.stderr.count("\n") == 1
    usage = subprocess.run([*_command(), "eval"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "Missing argument" in usage.stderr
    version = subprocess.run([*_command(), "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and "rankwise" in version.stdout


def test_closed_stdout_is_not_an_error(files):
    q, r = files
    proc = subprocess.Popen([*_command(), "eval", str(q), str(r), "-m", "map", "--per-query", "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == b""
