"""Startup of `rankwise eval` on a 10-line file (TREC, BEIR TSV, CSV, JSONL, Parquet), of `judge --help` and
`eval-rag` on a one-case test set, beside the floor, as whole processes.

The floor is a process that imports only what `rankwise eval` cannot do without (numpy, pyarrow,
pyarrow.compute, click). Each round runs every command once, in turn, so load on a shared machine falls on
all of them alike; the medians of wall and CPU time (user + system of the child) are printed with their
ratio to the floor, and the load average before and after. "no bytecode" runs rankwise from a copy of its
sources without ``__pycache__`` under ``PYTHONDONTWRITEBYTECODE=1``: every process compiles them again.

    python benchmarks/startup.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rankwise


def _time(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else b""
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _other_formats(tmp: Path) -> None:
    """The same 10-line qrels and run as BEIR TSV / CSV, JSONL and Parquet, and a one-case RAG test set."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rels = [("q1", "d1", 1), ("q1", "d2", 0), ("q1", "d3", 2), ("q2", "d4", 1), ("q2", "d5", 0)]
    rows = [("q1", "d1", 3.0), ("q1", "d2", 2.0), ("q1", "d3", 1.0), ("q2", "d5", 2.0), ("q2", "d4", 1.0)]
    (tmp / "q.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rels))
    (tmp / "r.csv").write_text("query_id,doc_id,score\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    (tmp / "q.jsonl").write_text("".join(f'{{"query_id": "{a}", "doc_id": "{b}", "relevance": {c}}}\n'
                                         for a, b, c in rels))
    (tmp / "r.jsonl").write_text("".join(f'{{"query_id": "{a}", "doc_id": "{b}", "score": {c}}}\n'
                                         for a, b, c in rows))
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows],
                             "score": [r[2] for r in rows]}), tmp / "r.parquet")
    (tmp / "ts.jsonl").write_text('{"id": "c1", "question": "When?", "retrieved_contexts": ["It opened in 1921 on '
                                  'the ridge.", "Apples grow here."], "reference_contexts": ["It opened in 1921 on '
                                  'the ridge."]}\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    package = Path(rankwise.__file__).parent
    compileall.compile_dir(package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        q, r = Path(tmp, "q.txt"), Path(tmp, "r.txt")
        q.write_text("q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 d4 1\nq2 0 d5 0\n")
        r.write_text("q1 Q0 d1 1 3.0 s\nq1 Q0 d2 2 2.0 s\nq1 Q0 d3 3 1.0 s\nq2 Q0 d5 1 2.0 s\nq2 Q0 d4 2 1.0 s\n")
        _other_formats(Path(tmp))
        bare = shutil.copytree(package, Path(tmp, "src", "rankwise"),
                               ignore=shutil.ignore_patterns("__pycache__"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(package.parent)
        no_pyc = {**env, "PYTHONPATH": str(bare.parent), "PYTHONDONTWRITEBYTECODE": "1"}
        py, ev = sys.executable, [sys.executable, "-m", "rankwise.cli", "eval", str(q), str(r)]
        commands = {
            "floor: import numpy, pyarrow, pyarrow.compute, click":
                ([py, "-c", "import numpy, pyarrow, pyarrow.compute, click"], env),
            "rankwise eval --format trec": ([*ev, "--format", "trec"], env),
            "rankwise eval -m map,P@1 --format json": ([*ev, "-m", "map,P@1", "--format", "json"], env),
            "rankwise eval (table)": (ev, env),
            "rankwise eval --format trec, no bytecode": ([*ev, "--format", "trec"], no_pyc),
            "rankwise eval BEIR qrels.tsv + run.csv": ([*ev[:4], str(Path(tmp, "q.tsv")), str(Path(tmp, "r.csv")),
                                                        "--format", "trec"], env),
            "rankwise eval qrels.jsonl + run.jsonl": ([*ev[:4], str(Path(tmp, "q.jsonl")), str(Path(tmp, "r.jsonl")),
                                                       "--format", "trec"], env),
            "rankwise eval q.txt + run.parquet": ([*ev[:4], str(q), str(Path(tmp, "r.parquet")), "--format",
                                                   "trec"], env),
            "rankwise eval-rag (1 case, containment)": ([*ev[:3], "eval-rag", str(Path(tmp, "ts.jsonl")), "-k", "1"],
                                                        env),
            "rankwise judge --help": ([*ev[:3], "judge", "--help"], env),
        }
        for cmd, e in commands.values():  # warm the page cache
            _time(cmd, e, tmp)
        load_before = os.getloadavg()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (cmd, e) in commands.items():
                times[name].append(_time(cmd, e, tmp))
        load_after = os.getloadavg()
    floor = times[next(iter(commands))]
    floor_wall = statistics.median(w for w, _ in floor)
    floor_cpu = statistics.median(c for _, c in floor)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    print(f"{args.rounds} rounds on {cpu}, {os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    print(f"{'command':44s} {'wall med':>9s} {'wall min':>9s} {'CPU med':>8s} {'wall/floor':>10s} {'CPU/floor':>9s}")
    for name, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name[:44]:44s} {wall:9.3f} {min(w for w, _ in rows):9.3f} {cpu:8.3f} {wall / floor_wall:10.2f} "
              f"{cpu / floor_cpu:9.2f}")


if __name__ == "__main__":
    main()
