"""A run larger than memory: ``rankwise eval --stream`` on 1e8 rows (about 3.3 GB of TREC text).

Writes a synthetic run grouped by query (depth 1000, scores with ties) and its qrels, then times
whole ``rankwise eval --stream`` processes and records their peak memory (``os.wait4``):

* the base size (1e6 rows) streamed and in memory, plus a shuffled copy (partitioned on disk);
* the full size (default 1e8 rows) streamed; checked against the bounds: peak RSS <= 2 GB and time
  within 1.5x of (full / base) x the base time;
* ``--check-rows`` (default 1e7): streamed and in-memory results must be identical (every mean,
  every digit).

Needs about 1.1x the run's size of free disk (the shuffled copy is made at the base size only). The
files are deleted afterwards unless ``--keep``.

Usage:
    python benchmarks/larger_than_memory.py                       # 1e8 rows
    python benchmarks/larger_than_memory.py --rows 1e7            # quicker; say so when quoting it
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RANKWISE = str(Path(sys.executable).with_name("rankwise"))
METRICS = "P@10,recall@100,ndcg@10,map,mrr,bpref,num_ret,num_rel_ret"
DEPTH = 1000


def generate(rows: int, directory: Path, *, shuffled: bool = False, seed: int = 5) -> tuple[Path, Path]:
    """``qrels.txt`` and ``run.trec`` (grouped by query; or rows in random order), written in
    chunks."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    directory.mkdir(parents=True, exist_ok=True)
    run_path, qrels_path = directory / ("shuffled.trec" if shuffled else "run.trec"), directory / "qrels.txt"
    if run_path.exists() and qrels_path.exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    n_queries = rows // DEPTH
    chunk = 10_000  # queries per chunk: 1e7 rows
    options = pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    corpus = 8_388_593  # a prime: (a * j + b) mod corpus differs for every j, so no doc repeats in a query

    def strings(prefix: str, numbers) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")

    with pcsv.CSVWriter(str(run_path) + ".tmp", pa.schema([("q", pa.string()), ("i", pa.string()),
                                                            ("d", pa.string()), ("r", pa.int64()),
                                                            ("s", pa.float64()), ("t", pa.string())]),
                        write_options=options) as run_out, \
            pcsv.CSVWriter(str(qrels_path) + ".tmp", pa.schema([("q", pa.string()), ("i", pa.int64()),
                                                                ("d", pa.string()), ("g", pa.int64())]),
                           write_options=options) as qrels_out:
        for q0 in range(0, n_queries, chunk):
            nq = min(chunk, n_queries - q0)
            n = nq * DEPTH
            qnum = np.repeat(np.arange(q0, q0 + nq), DEPTH)
            a = rng.integers(1, corpus, nq)
            docs = (a[:, None] * np.arange(1, DEPTH + 1)[None, :] + qnum.reshape(nq, DEPTH)) % corpus
            scores = -np.sort(-np.round(rng.uniform(0, 30, (nq, DEPTH)), 3), axis=1).ravel()
            table = pa.table({"q": strings("q", qnum), "i": pa.array(np.full(n, "Q0")),
                              "d": strings("D", docs.ravel()), "r": pa.array(np.tile(np.arange(1, DEPTH + 1), nq)),
                              "s": pa.array(scores), "t": pa.array(np.full(n, "big"))})
            if shuffled:
                table = table.take(pa.array(rng.permutation(n)))
            run_out.write_table(table)
            # qrels: 10 of the top 100 and 10 unretrieved per query
            picked = np.sort(rng.random((nq, 100)).argsort(axis=1)[:, :10], axis=1)
            unretrieved = (a[:, None] * np.arange(DEPTH + 1, DEPTH + 11)[None, :] + qnum.reshape(nq, DEPTH)[:, :10]) % corpus
            judged = np.concatenate([np.take_along_axis(docs, picked, axis=1), unretrieved], axis=1)
            qrels_out.write_table(pa.table({
                "q": strings("q", np.repeat(np.arange(q0, q0 + nq), 20)), "i": pa.array(np.zeros(nq * 20, np.int64)),
                "d": strings("D", judged.ravel()), "g": pa.array(rng.choice(4, nq * 20, p=[0.4, 0.3, 0.2, 0.1]))}))
    os.replace(str(run_path) + ".tmp", run_path)
    os.replace(str(qrels_path) + ".tmp", qrels_path)
    return qrels_path, run_path


def run_eval(qrels: Path, run: Path, stream: bool) -> tuple[float, float, dict]:
    cmd = [RANKWISE, "eval", str(qrels), str(run), "-m", METRICS, "--format", "json"]
    if stream:
        cmd.append("--stream")
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, json.loads(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e8)
    parser.add_argument("--base", type=float, default=1e6)
    parser.add_argument("--check-rows", type=float, default=1e7)
    parser.add_argument("--dir", type=Path, default=HERE / "_data" / "big")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    rows, base, check = int(args.rows), int(args.base), int(args.check_rows)
    free = shutil.disk_usage(args.dir.parent if args.dir.parent.exists() else HERE).free
    if free < rows * 40:
        raise SystemExit(f"needs about {rows * 40 / 1e9:.1f} GB free, {free / 1e9:.1f} GB available")

    def log(msg: str) -> None:
        print(msg, flush=True)

    lines = []
    try:
        q1, r1 = generate(base, args.dir / f"{base}")
        _, r1s = generate(base, args.dir / f"{base}", shuffled=True)
        t_base, m_base, res_base = run_eval(q1, r1, stream=True)
        t_mem, m_mem, res_mem = run_eval(q1, r1, stream=False)
        t_shuf, m_shuf, res_shuf = run_eval(q1, r1s, stream=True)
        assert res_base["mean"] == res_mem["mean"] == res_shuf["mean"], "streamed and in-memory means differ"
        lines.append(f"| {base:,} | grouped | stream | {t_base:.2f} | {m_base:.0f} |")
        lines.append(f"| {base:,} | grouped | in memory | {t_mem:.2f} | {m_mem:.0f} |")
        lines.append(f"| {base:,} | shuffled | stream (partitioned on disk) | {t_shuf:.2f} | {m_shuf:.0f} |")
        log("\n".join(lines))
        if check != base and check <= rows:
            t = time.perf_counter()
            qc, rc = generate(check, args.dir / f"{check}")
            log(f"[{check:,} rows written in {time.perf_counter() - t:.0f} s: {rc.stat().st_size / 1e9:.2f} GB]")
            t_c, m_c, res_c = run_eval(qc, rc, stream=True)
            t_cm, m_cm, res_cm = run_eval(qc, rc, stream=False)
            assert res_c["mean"] == res_cm["mean"], f"streamed and in-memory means differ at {check:,} rows"
            lines.append(f"| {check:,} | grouped | stream | {t_c:.2f} | {m_c:.0f} |")
            lines.append(f"| {check:,} | grouped | in memory | {t_cm:.2f} | {m_cm:.0f} |")
            log("\n".join(lines[-2:]) + f"\n[{check:,} rows: streamed means == in-memory means, every digit]")
            if check != rows:
                shutil.rmtree(args.dir / f"{check}", ignore_errors=True)
        t = time.perf_counter()
        qn, rn = generate(rows, args.dir / f"{rows}")
        log(f"[{rows:,} rows written in {time.perf_counter() - t:.0f} s: {rn.stat().st_size / 1e9:.2f} GB]")
        t_n, m_n, res_n = run_eval(qn, rn, stream=True)
        lines.append(f"| {rows:,} | grouped | stream | {t_n:.2f} | {m_n:.0f} |")
        budget = rows / base * t_base
        print("\n| rows | order | rankwise eval | time (s) | peak RSS (MB) |\n|---:|---|---|---:|---:|")
        print("\n".join(lines))
        print(f"\n{rows:,} rows: {t_n:.1f} s = {t_n / budget:.2f} x ({rows // base} x the {base:,}-row time, "
              f"{budget:.1f} s; bound 1.5); peak RSS {m_n:.0f} MB (bound 2048). Means: {res_n['mean']}")
        print(f"Machine: {os.cpu_count()} CPUs (shared), Python {sys.version.split()[0]}.")
        return 0 if (t_n <= 1.5 * budget and m_n <= 2048) else 1
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
