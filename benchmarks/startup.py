"""Startup of each rankwise command as a whole process: `rankwise eval` of a 20-line run in every
input format (TREC, BEIR qrels TSV, CSV, JSONL, Parquet), `eval-rag` of a small test set, `run` with
BM25 on a 3-document corpus, `--help` and `judge --help`, beside the floor (a process that imports
only what `rankwise eval` cannot do without: numpy, pyarrow, pyarrow.compute, click).

Each round runs every command once, in turn, so load on a shared machine falls on all of them alike;
the medians of wall and CPU time (user + system of the child) are printed with their ratio to the
floor, with the machine (CPU model, cores) and the load average before and after. "no bytecode" runs
rankwise from a copy of its sources without ``__pycache__`` under ``PYTHONDONTWRITEBYTECODE=1``:
every process compiles them again. The target (README, "Against the targets"): `rankwise eval` of a
20-line run <= 0.35 s on an idle 2-core machine.

    python benchmarks/startup.py [--rounds 5]
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

TARGET = 0.35  # seconds, `rankwise eval` of a 20-line run
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _time(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else b""
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _inputs(tmp: Path) -> dict[str, Path]:
    """The same qrels (10 judgements) and 20-line run in every format `rankwise eval` reads, and a
    RAG test set."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rels = [(f"q{q}", f"d{q}{d}", (q + d) % 3) for q in range(1, 3) for d in range(5)]
    rows = [(f"q{q}", f"d{q}{d}", float(10 - d)) for q in range(1, 3) for d in range(10)]
    files = {
        "qrels.txt": "".join(f"{a} 0 {b} {c}\n" for a, b, c in rels),
        "qrels.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rels),
        "qrels.csv": "query_id,doc_id,relevance\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rels),
        "qrels.jsonl": "".join(f'{{"query_id": "{a}", "doc_id": "{b}", "relevance": {c}}}\n' for a, b, c in rels),
        "run.trec": "".join(f"{a} Q0 {b} {i % 10 + 1} {c} s\n" for i, (a, b, c) in enumerate(rows)),
        "run.csv": "query_id,doc_id,score\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows),
        "run.jsonl": "".join(f'{{"query_id": "{a}", "doc_id": "{b}", "score": {c}}}\n' for a, b, c in rows),
    }
    paths = {}
    for name, text in files.items():
        paths[name] = tmp / name
        paths[name].write_text(text)
    paths["run.parquet"] = tmp / "run.parquet"
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows],
                             "score": [r[2] for r in rows]}), paths["run.parquet"])
    return paths


def _machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    return f"{model}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    package = Path(rankwise.__file__).parent
    compileall.compile_dir(package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        f = _inputs(Path(tmp))
        bare = shutil.copytree(package, Path(tmp, "src", "rankwise"), ignore=shutil.ignore_patterns("__pycache__"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(package.parent)
        no_pyc = {**env, "PYTHONPATH": str(bare.parent), "PYTHONDONTWRITEBYTECODE": "1"}
        rw = [sys.executable, "-m", "rankwise.cli"]

        def ev(qrels: str, run: str, *extra: str) -> list[str]:
            return [*rw, "eval", str(f[qrels]), str(f[run]), *extra]

        commands = {
            "floor: import numpy, pyarrow, pyarrow.compute, click":
                ([sys.executable, "-c", "import numpy, pyarrow, pyarrow.compute, click"], env),
            "eval TREC qrels + run, --format trec": (ev("qrels.txt", "run.trec", "--format", "trec"), env),
            "eval TREC, -m map,P@1 --format json": (ev("qrels.txt", "run.trec", "-m", "map,P@1", "--format", "json"),
                                                    env),
            "eval TREC (table)": (ev("qrels.txt", "run.trec"), env),
            "eval TREC --format trec, no bytecode": (ev("qrels.txt", "run.trec", "--format", "trec"), no_pyc),
            "eval BEIR qrels.tsv + run.trec": (ev("qrels.tsv", "run.trec", "--format", "trec"), env),
            "eval qrels.csv + run.csv": (ev("qrels.csv", "run.csv", "--format", "trec"), env),
            "eval qrels.jsonl + run.jsonl": (ev("qrels.jsonl", "run.jsonl", "--format", "trec"), env),
            "eval qrels.txt + run.parquet": (ev("qrels.txt", "run.parquet", "--format", "trec"), env),
            "eval-rag (6 cases, containment)": ([*rw, "eval-rag", str(EXAMPLES / "rich_testset.jsonl"), "-k", "3"],
                                                env),
            "run -r bm25 (3 documents, 6 queries)": ([*rw, "run", "--corpus", str(EXAMPLES / "corpus.jsonl"),
                                                      "--queries", str(EXAMPLES / "rich_testset.jsonl"), "-o",
                                                      str(Path(tmp, "bm25.trec")), "--force", "--quiet"], env),
            "--help": ([*rw, "--help"], env),
            "judge --help": ([*rw, "judge", "--help"], env),
        }
        for cmd, e in commands.values():  # warm the page cache
            _time(cmd, e, tmp)
        load_before = os.getloadavg()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (cmd, e) in commands.items():
                times[name].append(_time(cmd, e, tmp))
        load_after = os.getloadavg()
    floor_wall = statistics.median(w for w, _ in times[next(iter(commands))])
    floor_cpu = statistics.median(c for _, c in times[next(iter(commands))])
    print(f"{_machine()}; {args.rounds} rounds; load average (1, 5, 15 min) "
          f"{' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after")
    print(f"{'whole process':44s} {'wall med':>9s} {'wall min':>9s} {'CPU med':>8s} {'wall/floor':>10s} "
          f"{'CPU/floor':>9s}")
    for name, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name[:44]:44s} {wall:9.3f} {min(w for w, _ in rows):9.3f} {cpu:8.3f} {wall / floor_wall:10.2f} "
              f"{cpu / floor_cpu:9.2f}")
    worst = max((statistics.median(w for w, _ in rows), name) for name, rows in times.items()
                if name.startswith("eval ") and "no bytecode" not in name)
    verdict = "met" if worst[0] <= TARGET else "missed"
    print(f"target: rankwise eval of a 20-line run <= {TARGET} s (median): {verdict} — slowest format "
          f"{worst[1]!r} {worst[0]:.3f} s")


if __name__ == "__main__":
    main()
