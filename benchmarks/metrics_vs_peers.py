"""rankwise against its peers: pytrec_eval(-terrier), ranx and ir_measures, on synthetic data.

Synthetic graded qrels (20 judgements per query, grades 0-3, half of them among the run's top 100)
and runs of 10k x 100, 10k x 1000 and 100k x 100 (queries x documents); metrics P@10, recall@100,
nDCG@10, MAP and MRR. Two kinds of input, each in two orders:

(a) Python dicts already in memory (``{qid: {doc: score}}``): time of the evaluation call(s) only.
    "ranked": queries and docs inserted in rank order; "unranked": queries and each query's docs
    inserted in random order.
(b) TREC files on disk: wall time of a whole fresh process, startup and imports included. "ranked":
    rows grouped by query, best first; "shuffled": the same rows in random order. Beside them, the
    "floor": a fresh process doing nothing but ``pyarrow.csv.read_csv`` of the same file, and
    ``rankwise eval --stream`` (tool ``rankwise-stream``: bounded memory, the same numbers).
    Files are evaluated with:
    ``rankwise eval QRELS RUN -m ... --format json`` against a Python process running pytrec_eval's
    own parsers (``parse_qrel``/``parse_run``) + ``evaluate``, ranx's ``from_file`` + ``evaluate``,
    and ir_measures' readers + ``calc_aggregate``.

The floor and rankwise (in memory and --stream) run in turn, three rounds (``--rounds``), and the
best of each is kept: on a VM whose cost of fresh memory swings from run to run, each is timed at
its best in the same minutes. Peers run once each (``--repeat``).

ranx is timed cold (first call in a fresh process with an empty numba cache, so it compiles) and
warm (a second call in the same process). Every tool runs in its own child process; peak memory is
that child's maximum RSS (``os.wait4``). All means are checked against pytrec_eval: rankwise and
ir_measures must agree within 1e-9; ranx breaks tied scores in its own way (not trec_eval's doc-id
rule), so its difference is printed rather than asserted tight.

Usage:
    python benchmarks/metrics_vs_peers.py                              # all three sizes
    python benchmarks/metrics_vs_peers.py --quick                      # 2k x 100 and 1k x 1000
    python benchmarks/metrics_vs_peers.py --sizes 10kx1000 --out perf.md
    python benchmarks/metrics_vs_peers.py --tools rankwise,pytrec_eval # without ranx, ir_measures
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
PYTHON = sys.executable
RANKWISE = str(Path(PYTHON).with_name("rankwise"))

METRICS = {  # rankwise name -> (pytrec_eval measure, pytrec_eval key, ranx name, ir_measures name)
    "precision@10": ("P.10", "P_10", "precision@10", "P@10"),
    "recall@100": ("recall.100", "recall_100", "recall@100", "R@100"),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", "ndcg@10", "nDCG@10"),
    "map": ("map", "map", "map", "AP"),
    "mrr": ("recip_rank", "recip_rank", "mrr", "RR"),
}
TOOLS = ("rankwise", "rankwise-stream", "pytrec_eval", "ranx", "ir_measures")
SIZES = {"10kx100": (10_000, 100), "10kx1000": (10_000, 1000), "100kx100": (100_000, 100),
         "2kx100": (2_000, 100), "1kx1000": (1_000, 1000)}


# ------------------------------------------------------------------ data
def generate(n_queries: int, depth: int, directory: Path, seed: int = 7) -> tuple[Path, Path]:
    """Write ``qrels.txt`` and ``run.trec`` (vectorised: numpy + Arrow's CSV writer, no Python
    loop)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    directory.mkdir(parents=True, exist_ok=True)
    qrels_path, run_path = directory / "qrels.txt", directory / "run.trec"
    if qrels_path.exists() and run_path.exists() and (directory / "shuffled.trec").exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    corpus = 8_388_593  # a prime: doc(j) = (a*j + b) mod corpus is a permutation, so no doc repeats
    a = rng.integers(1, corpus, n_queries, dtype=np.int64)
    b = rng.integers(0, corpus, n_queries, dtype=np.int64)

    def doc_ids(j: np.ndarray) -> pa.Array:
        codes = (a[:, None] * j[None, :] + b[:, None]) % corpus
        return pc.binary_join_element_wise("D", pa.array(codes.ravel()).cast(pa.string()), "")

    qid_text = pc.binary_join_element_wise("q", pa.array(np.arange(n_queries)).cast(pa.string()), "")
    # run: scores with 4 decimals, descending within each query (some ties, all exact in float32)
    scores = -np.sort(-np.round(rng.uniform(0, 30, (n_queries, depth)), 4), axis=1)
    rows = n_queries * depth
    run = pa.table({
        "qid": qid_text.take(pa.array(np.repeat(np.arange(n_queries), depth))),
        "q0": pa.array(np.full(rows, "Q0")),
        "doc": doc_ids(np.arange(depth)),
        "rank": pa.array(np.tile(np.arange(1, depth + 1), n_queries)),
        "score": pa.array(scores.ravel()),
        "tag": pa.array(np.full(rows, "synthetic")),
    })
    # qrels: 10 docs among the run's top 100 (random ranks) + 10 unretrieved docs; grades 0-3
    top = min(depth, 100)
    picked = np.argsort(rng.random((n_queries, top)), axis=1)[:, :10]
    retrieved_codes = (a[:, None] * picked + b[:, None]) % corpus
    unretrieved_codes = (a[:, None] * np.arange(depth, depth + 10)[None, :] + b[:, None]) % corpus
    codes = np.concatenate([retrieved_codes, unretrieved_codes], axis=1)
    judged = codes.shape[1]
    qrels = pa.table({
        "qid": qid_text.take(pa.array(np.repeat(np.arange(n_queries), judged))),
        "iter": pa.array(np.zeros(n_queries * judged, dtype=np.int64)),
        "doc": pc.binary_join_element_wise("D", pa.array(codes.ravel()).cast(pa.string()), ""),
        "rel": pa.array(rng.choice(4, n_queries * judged, p=[0.4, 0.3, 0.2, 0.1])),
    })
    options = pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    shuffled = run.take(pa.array(rng.permutation(rows)))  # the same rows in random order
    pcsv.write_csv(shuffled, str(directory / "shuffled.trec") + ".tmp", options)
    os.replace(str(directory / "shuffled.trec") + ".tmp", directory / "shuffled.trec")
    pcsv.write_csv(run, str(run_path) + ".tmp", options)
    pcsv.write_csv(qrels, str(qrels_path) + ".tmp", options)
    os.replace(str(run_path) + ".tmp", run_path)
    os.replace(str(qrels_path) + ".tmp", qrels_path)
    return qrels_path, run_path


def load_dicts(qrels_path: Path, run_path: Path, unranked: bool = False) -> tuple[dict, dict]:
    """The files as ``{qid: {doc: grade}}`` and ``{qid: {doc: score}}`` (not timed); ``unranked``:
    queries, and each query's docs, inserted in random order."""
    import pyarrow.csv as pcsv

    def read(path, names, types):
        opts = pcsv.ReadOptions(column_names=names)
        parse = pcsv.ParseOptions(delimiter=" ")
        conv = pcsv.ConvertOptions(column_types=types, include_columns=list(types))
        return pcsv.read_csv(path, read_options=opts, parse_options=parse, convert_options=conv)

    import pyarrow as pa

    def nested(table, value_col):
        qids = table.column("qid").to_pylist()
        docs = table.column("doc").to_pylist()
        values = table.column(value_col).to_pylist()
        out: dict = {}
        start = 0
        for i in range(1, len(qids) + 1):
            if i == len(qids) or qids[i] != qids[start]:
                out[qids[start]] = dict(zip(docs[start:i], values[start:i], strict=False))
                start = i
        return out

    q = read(qrels_path, ["qid", "iter", "doc", "rel"], {"qid": pa.string(), "doc": pa.string(), "rel": pa.int64()})
    r = read(run_path, ["qid", "q0", "doc", "rank", "score", "tag"],
             {"qid": pa.string(), "doc": pa.string(), "score": pa.float64()})
    qrels, run = nested(q, "rel"), nested(r, "score")
    if unranked:
        import random

        rng = random.Random(11)
        order = list(run)
        rng.shuffle(order)
        shuffled = {}
        for qid in order:
            items = list(run[qid].items())
            rng.shuffle(items)
            shuffled[qid] = dict(items)
        run = shuffled
    return qrels, run


# ------------------------------------------------------------------ workers (run in child
# processes)
def _means_pytrec(per_query: dict) -> dict:
    qids = sorted(per_query)
    return {name: sum(per_query[q][key] for q in qids) / len(qids)
            for name, (_, key, _, _) in METRICS.items()}


def work_dict(tool: str, qrels_path: Path, run_path: Path, unranked: bool = False) -> dict:
    qrels, run = load_dicts(qrels_path, run_path, unranked)
    out: dict = {}
    if tool == "rankwise":
        from rankwise import evaluate  # imported before the clock starts, as the peers are

        t = time.perf_counter()
        result = evaluate(qrels, run, list(METRICS))
        out["time"] = time.perf_counter() - t
        out["means"] = result.mean
    elif tool == "pytrec_eval":
        import pytrec_eval

        t = time.perf_counter()
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {m[0] for m in METRICS.values()})
        per_query = evaluator.evaluate(run)
        means = _means_pytrec(per_query)
        out["time"] = time.perf_counter() - t
        out["means"] = means
    elif tool == "ranx":
        from ranx import Qrels, Run, evaluate

        names = [m[2] for m in METRICS.values()]
        t = time.perf_counter()
        scores = evaluate(Qrels(qrels), Run(run), names, make_comparable=True)
        out["time_cold"] = time.perf_counter() - t
        t = time.perf_counter()
        scores = evaluate(Qrels(qrels), Run(run), names, make_comparable=True)
        out["time"] = time.perf_counter() - t
        out["means"] = {name: float(scores[m[2]]) for name, m in METRICS.items()}
    elif tool == "ir_measures":
        import ir_measures

        measures = [ir_measures.parse_measure(m[3]) for m in METRICS.values()]
        t = time.perf_counter()
        agg = ir_measures.calc_aggregate(measures, qrels, run)
        out["time"] = time.perf_counter() - t
        out["means"] = {name: float(agg[ir_measures.parse_measure(m[3])]) for name, m in METRICS.items()}
    else:
        raise SystemExit(f"unknown tool {tool}")
    return out


def work_file(tool: str, qrels_path: Path, run_path: Path) -> dict:
    """Everything a user's process does from files (the parent times the whole process)."""
    if tool == "pytrec_eval":
        import pytrec_eval

        with open(qrels_path) as fq:
            qrels = pytrec_eval.parse_qrel(fq)
        with open(run_path) as fr:
            run = pytrec_eval.parse_run(fr)
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {m[0] for m in METRICS.values()})
        return {"means": _means_pytrec(evaluator.evaluate(run))}
    if tool == "ranx":
        from ranx import Qrels, Run, evaluate

        scores = evaluate(Qrels.from_file(str(qrels_path), kind="trec"), Run.from_file(str(run_path), kind="trec"),
                          [m[2] for m in METRICS.values()], make_comparable=True)
        return {"means": {name: float(scores[m[2]]) for name, m in METRICS.items()}}
    if tool == "ir_measures":
        import ir_measures

        measures = [ir_measures.parse_measure(m[3]) for m in METRICS.values()]
        agg = ir_measures.calc_aggregate(measures, ir_measures.read_trec_qrels(str(qrels_path)),
                                         ir_measures.read_trec_run(str(run_path)))
        return {"means": {name: float(agg[ir_measures.parse_measure(m[3])]) for name, m in METRICS.items()}}
    raise SystemExit(f"unknown tool {tool}")


# ------------------------------------------------------------------ parent: spawn, time, measure
def spawn(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Run a child; return (wall seconds, peak RSS in MB, stdout)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out.decode()


MODES = {  # mode -> (input kind, order)
    "dict": ("dict", "ranked"), "dict-unranked": ("dict", "unranked"),
    "file": ("file", "ranked"), "file-shuffled": ("file", "shuffled"),
}


def floor(path: Path) -> tuple[float, float]:
    """Wall time and peak RSS of a fresh process that only reads ``path`` with
    ``pyarrow.csv.read_csv``."""
    code = ("import sys, pyarrow.csv as c; c.read_csv(sys.argv[1], read_options=c.ReadOptions("
            "autogenerate_column_names=True), parse_options=c.ParseOptions(delimiter=' '))")
    wall, rss, _ = spawn([PYTHON, "-c", code, str(path)])
    return wall, rss


def measure(size: str, repeat: int, log, ranx_compiles: bool = True, tools=TOOLS, modes=tuple(MODES),
            rounds: int = 3) -> list[dict]:
    """Every tool on one size, each input; the best of ``rounds`` interleaved runs of the floor and
    rankwise (in memory and --stream), so that the machine's swings in the cost of fresh memory
    fall on them alike, and the best of ``repeat`` runs of each peer."""
    n, depth = SIZES[size]
    t = time.perf_counter()
    # (in a child: a child's peak RSS counts what its parent held when it forked, so the ~1.5 GB of
    # generating the data here would be every later child's peak)
    subprocess.run([PYTHON, __file__, "--generate", str(n), str(depth), str(DATA / size)], check=True)
    qrels_path, run_path = DATA / size / "qrels.txt", DATA / size / "run.trec"
    log(f"[{size}] data ready in {time.perf_counter() - t:.1f}s: {run_path} "
        f"({run_path.stat().st_size / 1e6:.0f} MB, {n * depth:,} lines)")
    rows = []
    cold_cache = tempfile.mkdtemp(prefix="ranx-numba-")
    try:
        for mode, (kind, order) in MODES.items():
            if mode not in modes:
                continue
            path = run_path.with_name("shuffled.trec") if order == "shuffled" else run_path
            ours = [t for t in tools if t.startswith("rankwise") and (kind == "file" or t == "rankwise")]
            best: dict[str, dict] = {}
            floor_time = floor_rss = None
            for _ in range(rounds):
                if kind == "file":
                    wall, rss = floor(path)
                    if floor_time is None or wall < floor_time:
                        floor_time, floor_rss = wall, rss
                for tool in ours:
                    best[tool] = _better(best.get(tool), run_tool(tool, mode, qrels_path, path, cold_cache,
                                                                  ranx_compiles))
            for tool in (t for t in tools if not t.startswith("rankwise")):
                for _ in range(repeat):
                    best[tool] = _better(best.get(tool), run_tool(tool, mode, qrels_path, path, cold_cache,
                                                                  ranx_compiles))
            for tool in (t for t in tools if t in best):
                row = {"size": size, "mode": mode, "tool": tool, "compiles": ranx_compiles, "floor": floor_time,
                       "floor_rss": floor_rss, **best[tool]}
                log(f"[{size}] {mode:13s} {tool:12s} {row['time']:8.2f}s  peak {row['rss']:7.0f} MB"
                    + (f"  (cold {row['time_cold']:.2f}s)" if "time_cold" in row else "")
                    + (f"  floor {floor_time:.2f}s" if floor_time and tool == "rankwise" else ""))
                rows.append(row)
    finally:
        shutil.rmtree(cold_cache, ignore_errors=True)
    return rows


def _better(best: dict | None, res: dict) -> dict:
    return res if best is None or res["time"] < best["time"] else best


def run_tool(tool: str, mode: str, qrels_path: Path, path: Path, cold_cache: str, ranx_compiles: bool) -> dict:
    """One run of ``tool`` on one input in a child process: its time, means and peak memory."""
    kind = MODES[mode][0]
    env = dict(os.environ)
    if tool == "ranx" and ranx_compiles:
        shutil.rmtree(cold_cache, ignore_errors=True)
        env["NUMBA_CACHE_DIR"] = cold_cache  # empty: the first call compiles
    if kind == "file" and tool.startswith("rankwise"):
        cmd = [RANKWISE, "eval", str(qrels_path), str(path), "--format", "json",
               "-m", ",".join(METRICS)] + (["--stream"] if tool == "rankwise-stream" else [])
    else:
        cmd = [PYTHON, __file__, "--worker", tool, mode, str(qrels_path), str(path)]
    wall, rss, out = spawn(cmd, env)
    res = json.loads(out)
    if kind == "file":
        res = {"time": wall, "means": res["mean"] if tool.startswith("rankwise") else res["means"]}
    res["rss"] = rss
    return res


def check_agreement(rows: list[dict]) -> list[str]:
    """rankwise and ir_measures equal pytrec_eval within 1e-9; ranx's largest difference is
    reported."""
    notes = []
    for (size, mode) in dict.fromkeys((r["size"], r["mode"]) for r in rows):
        group = {r["tool"]: r for r in rows if r["size"] == size and r["mode"] == mode}
        if "pytrec_eval" not in group:
            continue
        ref = group["pytrec_eval"]["means"]
        for tool, row in group.items():
            diff = max(abs(row["means"][m] - ref[m]) for m in METRICS)
            row["max_diff"] = diff
            if tool in ("rankwise", "rankwise-stream", "ir_measures") and diff > 1e-9:
                raise AssertionError(f"{tool} disagrees with pytrec_eval on {size}/{mode}: {diff:.3g}\n"
                                     f"{row['means']}\n{ref}")
            if tool == "ranx":
                notes.append(f"ranx vs pytrec_eval on {size} ({mode}): largest mean difference {diff:.2g} "
                             "(ranx orders tied scores its own way, not by doc id as trec_eval does)")
    return notes


INPUTS = {"dict": "Python dicts, ranked", "dict-unranked": "Python dicts, unranked",
          "file": "TREC file, ranked, whole process", "file-shuffled": "TREC file, shuffled, whole process"}


def table(rows: list[dict]) -> str:
    lines = ["| data (queries × docs) | input | tool | time (s) | × rankwise's time | peak memory (MB) |",
             "|---|---|---|---:|---:|---:|"]
    for row in rows:
        base = next(r for r in rows if r["size"] == row["size"] and r["mode"] == row["mode"]
                    and r["tool"] == "rankwise")
        data = _label(row["size"])
        kind = MODES[row["mode"]][0]
        tools = [(row["tool"] + (" (warm)" if row["tool"] == "ranx" and kind == "dict" else ""), row["time"])]
        how = "compiles" if row.get("compiles", True) else "numba cache on disk"
        if "time_cold" in row:
            tools.append((f"ranx (cold: first call, {how})", row["time_cold"]))
        if row["tool"] == "ranx" and kind == "file":
            tools = [(f"ranx (cold: fresh process, {how})", row["time"])]
        if row["tool"] == "rankwise-stream":
            tools = [("rankwise --stream", row["time"])]
        for name, t in tools:
            ratio = "1.0" if row["tool"] == "rankwise" else f"{t / base['time']:.2f}"
            lines.append(f"| {data} | {INPUTS[row['mode']]} | {name} | {t:.2f} | {ratio} | {row['rss']:.0f} |")
        if row["tool"] == "rankwise" and row.get("floor"):
            lines.append(f"| {data} | {INPUTS[row['mode']]} | floor: `pyarrow.csv.read_csv` alone | "
                         f"{row['floor']:.2f} | {row['floor'] / row['time']:.2f} | {row['floor_rss']:.0f} |")
    return "\n".join(lines) + "\n"


def _label(size: str) -> str:
    """``10k × 1000`` for a size's queries × documents."""
    n, depth = SIZES[size]
    return f"{n // 1000}k × {depth}" if n % 1000 == 0 else f"{n:,} × {depth}"


def targets(rows: list[dict]) -> str:
    """The ratios the targets are about, per size and input: speed-up over pytrec_eval, × the floor,
    peak memory against pytrec_eval's."""
    out = ["| data | input | × faster than pytrec_eval | rankwise / floor | --stream / in memory "
           "| peak memory / pytrec_eval's |", "|---|---|---:|---:|---:|---:|"]
    for (size, mode) in dict.fromkeys((r["size"], r["mode"]) for r in rows):
        group = {r["tool"]: r for r in rows if r["size"] == size and r["mode"] == mode}
        if "rankwise" not in group or "pytrec_eval" not in group:
            continue
        rw, pt = group["rankwise"], group["pytrec_eval"]
        floor_ratio = f"{rw['time'] / rw['floor']:.2f}" if rw.get("floor") else ""
        stream = f"{group['rankwise-stream']['time'] / rw['time']:.2f}" if "rankwise-stream" in group else ""
        out.append(f"| {_label(size)} | {INPUTS[mode]} | {pt['time'] / rw['time']:.2f} | {floor_ratio} "
                   f"| {stream} | {rw['rss'] / pt['rss']:.2f} |")
    return "\n".join(out) + "\n"


PROBE_BYTES = 1 << 30  # fresh memory touched by fresh_memory()


def fresh_memory() -> float:
    """Seconds a new process takes to touch :data:`PROBE_BYTES` of fresh memory. On a VM whose free
    pages go back to the host, every page the kernel hands a process is backed again on first touch
    (this project's VM: ~2.3 ms per MB; memory a process frees and reuses: ~0.15), so time grows
    with what a tool allocates, not only with what it computes; the run reports it, start and end.
    """
    code = (f"import time, numpy as np; t = time.perf_counter(); x = np.empty({PROBE_BYTES}, np.uint8); "
            "x[::4096] = 1; print(time.perf_counter() - t)")
    return float(spawn([PYTHON, "-c", code])[2])


def _cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10kx100,10kx1000,100kx100",
                        help=f"comma-separated, from {', '.join(SIZES)}")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes only (2kx100,1kx1000); ranx keeps its numba cache (no compile)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each peer per input; the best is kept")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved runs of the floor and rankwise per input; the best of each is kept")
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, from " + ", ".join(TOOLS))
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, from " + ", ".join(MODES))
    parser.add_argument("--worker", nargs=4, metavar=("TOOL", "MODE", "QRELS", "RUN"), help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=3, metavar=("QUERIES", "DEPTH", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate:
        generate(int(args.generate[0]), int(args.generate[1]), Path(args.generate[2]))
        return 0
    if args.worker:
        tool, mode, qrels_path, run_path = args.worker
        kind, order = MODES[mode]
        if kind == "dict":
            print(json.dumps(work_dict(tool, Path(qrels_path), Path(run_path), order == "unranked")))
        else:
            print(json.dumps(work_file(tool, Path(qrels_path), Path(run_path))))
        return 0
    sizes = ["2kx100", "1kx1000"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {unknown}; choose from {list(SIZES)}")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load_before, touch_before = os.getloadavg(), fresh_memory()
    rows = []
    for size in sizes:
        rows.extend(measure(size, args.repeat, log, ranx_compiles=not args.quick,
                            tools=[t for t in TOOLS if t in args.tools.split(",")],
                            modes=[m for m in MODES if m in args.modes.split(",")], rounds=args.rounds))
    notes = check_agreement(rows)
    text = table(rows) + "\n" + targets(rows)
    text += "\nAll means agree with pytrec_eval within 1e-9 (rankwise, rankwise --stream, ir_measures).\n"
    text += "".join(f"- {note}\n" for note in notes)
    load_after, touch_after = os.getloadavg(), fresh_memory()
    text += (f"\nMachine: {_cpu_model()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; load average "
             f"(1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} at the start, "
             f"{', '.join(f'{x:.2f}' for x in load_after)} at the end; a new process touched {PROBE_BYTES / 2**30:g} GiB of fresh "
             f"memory in {touch_before:.2f} s at the start, {touch_after:.2f} s at the end; times are wall clock: "
             f"the best of {args.rounds} interleaved runs of the floor and rankwise (in memory, --stream) per input, "
             f"of {args.repeat} run(s) of each peer. Peak memory is each child process's maximum RSS (of the best run).\n"
             f"Command: python benchmarks/metrics_vs_peers.py {' '.join(argv if argv is not None else sys.argv[1:])}\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
