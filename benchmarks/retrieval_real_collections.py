"""Measure BM25, dense and hybrid retrieval on the real collections (docs/retrieval.md, "Real
collections").

Usage:  python benchmarks/retrieval_real_collections.py [cranfield|cisi ...] [--data tests/fixtures]

For each collection: BM25; dense with a fresh (cold) embedding cache, then again warm; hybrid (RRF
and weighted min-max) with the warm cache. Whole documents (title + text), top 100, scored with
nDCG@10, MAP and recall@100 against qrels/test.tsv. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from rankwise import evaluate
from rankwise.retrieval import load_beir, run_retrieval

MEASURES = ["ndcg@10", "map", "recall@100"]


def measure(name: str, data_dir: Path) -> list[tuple]:
    t = time.perf_counter()
    data = load_beir(data_dir / name)
    load_s = time.perf_counter() - t
    rows = []
    with tempfile.TemporaryDirectory() as cache:

        def one(kind: str) -> tuple:
            t0 = time.perf_counter()
            res = run_retrieval(data.corpus, data.queries, kind, k=100, cache_dir=cache, quiet=True)
            seconds = time.perf_counter() - t0
            mean = evaluate(data.qrels, res.run, MEASURES).mean
            return mean, seconds

        bm25, bm25_s = one("bm25")
        rows.append((name, "bm25", bm25, bm25_s, bm25_s))
        dense, dense_cold = one("dense")
        _, dense_warm = one("dense")
        rows.append((name, "dense (all-MiniLM-L6-v2)", dense, dense_cold, dense_warm))
        for kind, label in (("hybrid", "hybrid RRF (k=60)"), ("hybrid-weighted", "hybrid min-max 0.5/0.5")):
            mean, warm = one(kind)
            rows.append((name, label, mean, bm25_s + dense_cold + (warm - bm25_s - dense_warm), warm))
    print(f"# {name}: {len(data.corpus)} docs, {len(data.queries)} queries, loaded in {load_s:.2f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("collections", nargs="*", default=["cranfield", "cisi"])
    default = os.environ.get("RANKWISE_SHARED_DATA") or Path(__file__).resolve().parents[1] / "tests" / "fixtures"
    parser.add_argument("--data", type=Path, default=Path(default))
    args = parser.parse_args()
    rows = [row for name in args.collections for row in measure(name, args.data)]
    print("| collection | retriever | nDCG@10 | MAP | R@100 | time cold (s) | time warm (s) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, label, mean, cold, warm in rows:
        print(f"| {name} | {label} | {mean['ndcg@10']:.3f} | {mean['map']:.3f} | {mean['recall@100']:.3f} "
              f"| {cold:.1f} | {warm:.1f} |")


if __name__ == "__main__":
    main()
