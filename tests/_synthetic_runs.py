"""Seeded runs over a real collection's qrels (Cranfield, CISI) for the comparison, gate and report
tests.

A run ranks, per query, the judged documents plus a fixed random pool of others by ``strength *
grade + N(0, 1)``: higher strength = a better system. ``regress`` breaks a run on a share of its
queries (its top 5 sink to the bottom, as a broken re-ranker would); ``jitter`` adds tiny noise that
only swaps near-tied neighbours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rankwise.data.load import load_qrels


def qrels_dict(path: Path) -> dict[str, dict[str, int]]:
    q = load_qrels(path)
    return {qid: q.judgements(qid) for qid in q.queries}


def system_run(qrels: dict[str, dict[str, int]], *, strength: float, seed: int, n_docs: int = 1400,
               pool: int = 150, depth: int = 100) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    run = {}
    for qid in sorted(qrels):
        judged = qrels[qid]
        others = [str(d) for d in rng.choice(np.arange(1, n_docs + 1), size=pool, replace=False)]
        docs = list(dict.fromkeys([*judged, *others]))
        grades = np.array([max(judged.get(d, 0), 0) for d in docs], dtype=float)
        scores = strength * grades + rng.normal(0.0, 1.0, size=len(docs))
        top = np.argsort(-scores, kind="stable")[:depth]
        run[qid] = {docs[i]: round(float(scores[i]), 6) for i in top}
    return run


def regress(run: dict[str, dict[str, float]], *, share: float, seed: int) -> dict[str, dict[str, float]]:
    """On ``share`` of the queries, the top 5 documents drop below all others."""
    rng = np.random.default_rng(seed)
    qids = sorted(run)
    broken = set(rng.choice(qids, size=int(round(share * len(qids))), replace=False).tolist())
    out = {}
    for qid in qids:
        docs = dict(run[qid])
        if qid in broken:
            ranked = sorted(docs, key=lambda d: -docs[d])
            floor = min(docs.values())
            for i, d in enumerate(ranked[:5]):
                docs[d] = floor - 1.0 - i
        out[qid] = docs
    return out


def jitter(run: dict[str, dict[str, float]], *, scale: float, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {qid: {d: round(s + float(rng.normal(0.0, scale)), 6) for d, s in docs.items()}
            for qid, docs in sorted(run.items())}


def write_trec(run: dict[str, dict[str, float]], path: Path, tag: str = "sys") -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for qid, docs in run.items():
            for rank, (doc, score) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
    return path
