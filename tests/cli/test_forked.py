"""tests/_forked.py's processes are what `python -m rankwise.cli` gives: the same output, error and
exit code, the environment and directory given, a pid of their own, and the signal's exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from _forked import cli_popen, cli_run


def _fresh(args, **kwargs):
    return subprocess.run([sys.executable, "-m", "rankwise.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_forked_and_fresh_processes_print_and_exit_alike(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 2 t\nq2 Q0 c 1 1 t\n")
    cases = [["eval", "q.txt", "r.trec", "-m", "map,P@1", "--format", "csv", "--per-query"],
             ["eval", "q.txt", "missing.trec"],  # a one-line error, exit 2
             ["eval", "--no-such-flag"],  # a usage error
             ["--version"]]
    env = {**os.environ, "RANKWISE_TEST_MARK": "1"}
    codes = []
    for args in cases:
        fresh = _fresh(args, cwd=tmp_path, env=env)
        codes.append(fresh.returncode)
        forked = cli_run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert codes == [0, 2, 2, 0]


def test_a_forked_process_is_its_own_and_ends_by_its_signal(tmp_path):
    fifo = tmp_path / "qrels"
    os.mkfifo(fifo)  # opening it waits for a writer: the process is still running when the signal comes
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 1 t\n")
    proc = cli_popen(["eval", fifo, tmp_path / "r.trec"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert proc.pid != os.getpid() and proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
