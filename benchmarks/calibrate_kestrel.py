"""The worked example of docs/calibrate.md, on the bundled Kestrel DB set with a SIMULATED
generator.

Nothing here is a real language model: tests/generator_server.py answers a question right with
probability alpha + beta * w(i), where i is the first position (in the context it reads) of a chunk
holding one of the question's reference passages and w is a planted curve (default RBP p = 0.7,
alpha 0.1, beta 0.8), and says "I don't know." otherwise. The script runs, through the real command
line and loopback HTTP:

1. BM25, dense and hybrid retrieval (as ``rankwise demo``: 500-character chunks, top 10);
2. ``rankwise position-curve`` on the BM25 test set: each question's supporting chunk (its first
   retrieved chunk holding a reference passage, else the passage itself) planted at each of 10
   positions among its own non-relevant retrieved chunks, ``--repeats`` filler draws — does the fit
   find the planted curve?
3. ``rankwise answer -k 5 --score em`` per system, and ``rankwise calibrate`` over the three
   systems' records (containment verdicts, the measured curve as a candidate);
4. ``rankwise utility`` on the BM25 records and ``calibrate --relevance utility``.

Run:  PYTHONPATH=src python benchmarks/calibrate_kestrel.py [--curve u_shape] [--repeats 4] [--out
DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def rankwise(*args: object, env: dict[str, str]) -> str:
    cmd = [sys.executable, "-c", "from rankwise.cli import main; main()", *[str(a) for a in args]]
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"rankwise {' '.join(map(str, args[:1]))} failed:\n{done.stderr}")
    print(f"$ rankwise {' '.join(str(a) for a in args)}   ({time.perf_counter() - t:.1f} s)")
    return done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--curve", choices=["rbp", "u_shape"], default="rbp")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--systems", default="bm25,dense,hybrid")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--draw", choices=["iid", "stratified"], default="iid",
                        help="The simulator's draws: iid (realistic noise) or stratified (noise below 1/73).")
    args = parser.parse_args()

    from generator_server import key_of, running_generator
    from rankwise.datasets import load_bundled_corpus, load_bundled_testset
    from rankwise.retrieval import run_retrievers
    from rankwise.workflows.demo import _cases

    out = args.out or Path(tempfile.mkdtemp(prefix="rankwise-calibrate-kestrel-"))
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), RANKWISE_CACHE=str(out / "cache.sqlite"),
               COLUMNS="110")
    testset = load_bundled_testset("kestrel")
    questions = ROOT / "src" / "rankwise" / "datasets" / "kestrel" / "questions.jsonl"  # for the answer key
    rows = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    curve = {"kind": "rbp", "p": 0.7} if args.curve == "rbp" else {"kind": "u_shape", "p": 0.5, "q": 0.5, "b": 1.0}
    print(f"SIMULATED generator (tests/generator_server.py), planted curve {curve}, alpha 0.1, beta 0.8, "
          f"{args.draw} draws\n")

    with running_generator() as gen:
        gen.configure(key=key_of(rows), curve=curve, alpha=0.1, beta=0.8, mode="sample", draw=args.draw, seed=1)
        common = ["--model", "simulated", "--base-url", gen.base_url, "--quiet"]

        docs = load_bundled_corpus("kestrel")
        queries = {case.id: case.question for case in testset}
        systems = args.systems.split(",")
        retrieved = run_retrievers(docs, queries, systems, k=10, chunk_size=500, chunk_overlap=50, quiet=True)
        record_files = []
        for label, res in retrieved.items():
            ts = out / f"{label}.testset.jsonl"
            with open(ts, "w", encoding="utf-8") as fh:
                for row in _cases(testset, res):
                    fh.write(json.dumps(row) + "\n")
            if label == systems[0]:  # the supporting chunk among this retriever's non-relevant chunks
                print(rankwise("position-curve", ts, "-k", 10, "--repeats", args.repeats, "--score", "em",
                               "--out", out / "curve.json", "--plot", out / "curve.png", *common, env=env))
            rec = out / f"{label}.answers.jsonl"
            print(rankwise("answer", ts, "-k", 5, "--score", "em", "--records", rec, *common, env=env))
            record_files.append(rec)
        print(rankwise("calibrate", *record_files, "--relevance", "containment", "--curve", out / "curve.json",
                       "--min-cases", 30, "--plot", out / "calibration.png", env=env))

        util = out / "bm25.utility.jsonl"
        print(rankwise("utility", record_files[0], "--score", "em", "--records", util, *common, env=env))
        print(rankwise("calibrate", util, "--relevance", "utility", "--min-cases", 30, env=env))
        print(f"requests to the simulated generator: {gen.stats()['requests']}")
    print(f"files: {out}")


if __name__ == "__main__":
    main()
