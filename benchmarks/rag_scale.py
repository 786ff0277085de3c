"""The RAG path at scale: `rankwise eval-rag` on a large test set beside the cost of reading the
file.

Generates a seeded test set of N cases × K retrieved chunks, one by ids (``retrieved_context_ids`` /
``reference_context_ids``) and one by spans (chunks and reference passages with
``doc_id``/``start``/``end``), then times, each as a whole child process: ``rankwise eval-rag -r
ids`` (and ``-r span``), ``json.loads`` line by line, and ``pyarrow.json.read_json`` of the same
file, each the best of ``--repeat`` runs (3). Prints wall and CPU time, peak memory (the child's
maximum RSS), the ratios issue 37 sets targets for, the machine and the load average.
``--stream-cases N`` also scores an N-case file by ids (1,000,000: the streamed columnar path's
memory) beside ``json.loads`` of it. The package's modules are byte-compiled first, so every child
imports them as an installed package would.

    PYTHONPATH=src python benchmarks/rag_scale.py --cases 50000 -k 10
    PYTHONPATH=src python benchmarks/rag_scale.py --cases 50000 -k 10 --profile   # eval-rag -r ids
    PYTHONPATH=src python benchmarks/rag_scale.py --cases 50000 -k 10 --stream-cases 1000000
    """
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_ids(path: Path, cases: int, k: int, seed: int = 7) -> None:
    """Write N cases × k retrieved ids; 70% of cases have two relevant ids (one usually retrieved).
    """
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(cases):
            retrieved = [f"c{i}_{j}" for j in rng.sample(range(100), k)]
            if rng.random() < 0.7:
                reference = [retrieved[rng.randrange(k)], f"c{i}_{rng.randrange(100, 200)}"]
            else:
                reference = [f"c{i}_{rng.randrange(100, 200)}"]
            f.write(json.dumps({"id": f"q{i}", "question": f"question {i}", "retrieved_context_ids": retrieved,
                                "reference_context_ids": reference}) + "\n")


def write_spans(path: Path, cases: int, k: int, seed: int = 7) -> None:
    """Write N cases × k retrieved chunks with doc_id/start/end and one or two reference spans."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(cases):
            chunks = []
            for j in range(k):
                start = rng.randrange(0, 5000)
                chunks.append({"id": f"c{i}_{j}", "doc_id": f"d{rng.randrange(20)}", "start": start,
                               "end": start + rng.randrange(50, 400)})
            refs = []
            for _ in range(rng.choice((1, 2))):
                c = chunks[rng.randrange(k)] if rng.random() < 0.7 else {"doc_id": "d99", "start": 0, "end": 10}
                refs.append({"doc_id": c["doc_id"], "start": c["start"], "end": c["end"]})
            f.write(json.dumps({"id": f"q{i}", "question": f"question {i}", "retrieved_contexts": chunks,
                                "reference_contexts": refs}) + "\n")


def timed(argv: list[str]) -> dict:
    """Run argv as a child process; its wall time, CPU time (user+sys) and own peak RSS in MB
    (os.wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with proc.stderr:  # read before waiting: a child that fills the pipe would wait for us
        err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024}


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


JSON_LOADS = "import json,sys\nrows=[json.loads(l) for l in open(sys.argv[1])]\n"
ARROW = "import pyarrow.json as pj,sys\npj.read_json(sys.argv[1])\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=50_000)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--profile", action="store_true", help="cProfile eval-rag -r ids; print the top 25 (cumulative).")
    ap.add_argument("--no-spans", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="Runs of each command; the best is shown.")
    ap.add_argument("--stream-cases", type=int, default=0,
                    help="Also score a file of this many cases by ids (e.g. 1000000) beside json.loads of it.")
    args = ap.parse_args()
    py = sys.executable
    import rankwise

    compileall.compile_dir(str(Path(rankwise.__file__).parent), quiet=1)  # imports cost what an install's do
    with tempfile.TemporaryDirectory() as tmp:
        ids, spans = Path(tmp, "ids.jsonl"), Path(tmp, "spans.jsonl")
        write_ids(ids, args.cases, args.k)
        if not args.no_spans:
            write_spans(spans, args.cases, args.k)
        if args.profile:
            prof = Path(tmp, "p.prof")
            # main(args=...) is plain click (the command line leaves through os._exit, before a
            # profile is written)
            code = ("import cProfile,sys\nfrom rankwise.cli import main\np=cProfile.Profile()\ntry:\n"
                    "    p.runcall(main, args=sys.argv[2:])\nexcept SystemExit:\n    pass\n"
                    f"p.dump_stats({str(prof)!r})\n")
            subprocess.run([py, "-c", code, "x", "eval-rag", str(ids), "-r", "ids", "--format", "json", "--quiet"],
                           stdout=subprocess.DEVNULL, check=True)
            import pstats
            pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(30)
            return
        print(f"Machine: {_cpu_model()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
              f"{args.cases} cases x {args.k} chunks")
        rows = []
        files = [("ids", ids)] + ([] if args.no_spans else [("spans", spans)])
        if args.stream_cases:
            big = Path(tmp, "ids-big.jsonl")
            write_ids(big, args.stream_cases, args.k)
            files.append((f"ids, {args.stream_cases} cases", big))
        for name, path in files:
            size = path.stat().st_size / 1e6
            for label, argv in ((f"json.loads line by line ({name})", [py, "-c", JSON_LOADS, str(path)]),
                                (f"pyarrow.json.read_json ({name})", [py, "-c", ARROW, str(path)]),
                                (f"rankwise eval-rag ({name})", [py, "-m", "rankwise.cli", "eval-rag", str(path), "-r",
                                                                  "span" if name == "spans" else "ids", "--format",
                                                                  "json", "--quiet"])):
                if name not in ("ids", "spans") and label.startswith("pyarrow"):
                    continue
                la = load()
                runs = [timed(argv) for _ in range(1 if "cases" in name else args.repeat)]
                r = {"wall": min(x["wall"] for x in runs), "cpu": min(x["cpu"] for x in runs),
                     "maxrss_mb": max(x["maxrss_mb"] for x in runs)}
                rows.append((label, size, r, la))
        print("| run | file MB | wall s | CPU s | peak RSS MB | load before |")
        print("|---|---:|---:|---:|---:|---|")
        for label, size, r, la in rows:
            print(f"| {label} | {size:.1f} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['maxrss_mb']:.0f} | {la} |")
        by = {label: r for label, _, r, _ in rows}
        ids_rag = by["rankwise eval-rag (ids)"]
        print(f"eval-rag -r ids / json.loads: wall {ids_rag['wall'] / by['json.loads line by line (ids)']['wall']:.1f}x,"
              f" CPU {ids_rag['cpu'] / by['json.loads line by line (ids)']['cpu']:.1f}x (target <= 3x)")
        if not args.no_spans:
            sp = by["rankwise eval-rag (spans)"]
            print(f"eval-rag -r span / -r ids: wall {sp['wall'] / ids_rag['wall']:.2f}x, "
                  f"CPU {sp['cpu'] / ids_rag['cpu']:.2f}x (target <= 2x)")
        print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
