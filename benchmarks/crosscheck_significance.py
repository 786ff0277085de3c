"""Cross-check rankwise's paired tests against scipy and ranx on two real runs over CISI (or
Cranfield).

The two runs are built here with numpy/scipy.sparse: TF-IDF cosine (lnc.ltc) and BM25 (k1=1.2,
b=0.75) over title + text, top 100 per query. Then, per metric:

* paired t-test p-values: rankwise == scipy.stats.ttest_rel == ranx.compare(stat_test="student"),
  within 1e-6;
* randomization p-values: rankwise's sign-flip test vs ranx's Fisher randomization test
  (ranx.compare(stat_test="fisher")), within Monte-Carlo error (4 standard errors of the sum of two
  independent estimates with B permutations each);
* Wilcoxon: rankwise == scipy.stats.wilcoxon.

Two pairs are checked: TF-IDF vs BM25 (a real, significant difference) and BM25 vs a seeded random
perturbation of it (p-values in the middle of the range). Exact score ties are broken by corpus
order first, since ranx breaks ties differently from trec_eval (rankwise follows trec_eval).

Known difference: for metrics with few distinct values (precision@k) many sign assignments tie the
observed mean difference exactly; ranx compares float means with ``>=`` and rounding drops some of
those ties, so its p-values come out too small. There the randomization check falls back to an exact
integer-arithmetic reference.

Run:  python benchmarks/crosscheck_significance.py [--dataset cisi|cranfield] [--write-runs DIR]
Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RANKWISE_SHARED_DATA") or REPO / "tests" / "fixtures")

_STOP = frozenset(["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "which", "with", "what", "how", "are", "there", "been", "can", "do", "does", "not", "no", "any", "all", "into", "about", "also", "their", "than", "then", "these", "they", "those", "such", "other", "its", "we", "our", "may", "should", "would", "could"])


def _tokens(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1]


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def make_runs(dataset: Path, depth: int = 100) -> dict[str, dict[str, dict[str, float]]]:
    """Two runs ``{"tfidf": {qid: {doc: score}}, "bm25": ...}`` over a BEIR folder."""
    import scipy.sparse as sp

    docs = _read_jsonl(dataset / "corpus.jsonl")
    queries = _read_jsonl(dataset / "queries.jsonl")
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for i, d in enumerate(docs):
        counts: dict[int, int] = {}
        for t in _tokens(f"{d.get('title', '')} {d.get('text', '')}"):
            j = vocab.setdefault(t, len(vocab))
            counts[j] = counts.get(j, 0) + 1
        rows += [i] * len(counts)
        cols += list(counts)
        vals += list(counts.values())
    tf = sp.csr_matrix((np.array(vals, float), (rows, cols)), shape=(len(docs), len(vocab)))
    n_docs = tf.shape[0]
    df = np.bincount(tf.indices, minlength=len(vocab))
    idf = np.log(n_docs / np.maximum(df, 1))
    # TF-IDF cosine: (1 + log tf) * idf, L2-normalised documents
    w = tf.copy()
    w.data = 1.0 + np.log(w.data)
    w = w.multiply(idf[None, :]).tocsr()
    norms = np.sqrt(np.asarray(w.multiply(w).sum(axis=1)).ravel())
    w = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ w
    # BM25
    k1, b = 1.2, 0.75
    lengths = np.asarray(tf.sum(axis=1)).ravel()
    bm = tf.tocoo()
    denom = bm.data + k1 * (1 - b + b * lengths[bm.row] / lengths.mean())
    bm_w = sp.csr_matrix((bm.data * (k1 + 1) / denom, (bm.row, bm.col)), shape=tf.shape)
    bm_idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    doc_ids = [str(d["_id"]) for d in docs]
    runs: dict[str, dict[str, dict[str, float]]] = {"tfidf": {}, "bm25": {}}
    for q in queries:
        qv = np.zeros(len(vocab))
        for t in _tokens(q["text"]):
            if t in vocab:
                qv[vocab[t]] += 1.0
        if not qv.any():
            continue
        q_tfidf = np.where(qv > 0, 1.0 + np.log(np.maximum(qv, 1.0)), 0.0) * idf
        for name, scores in (("tfidf", w @ q_tfidf), ("bm25", bm_w @ (bm_idf * (qv > 0)))):
            top = np.argsort(-scores, kind="stable")[:depth]
            top = top[scores[top] > 0]
            # break exact ties (same tf and length) by corpus order, so every tool ranks alike
            tie_free = scores[top] - 1e-9 * np.arange(len(top))
            runs[name][str(q["_id"])] = {doc_ids[i]: float(v) for i, v in zip(top, tie_free, strict=True)}
    return runs


PAIRS = [("tfidf", "bm25"), ("bm25", "bm25_noisy")]


def perturbed(run: dict[str, dict[str, float]], *, scale: float = 0.5, seed: int = 7) -> dict:
    """A fixed random perturbation of a run: every score gets seeded Gaussian noise of ``scale`` x
    its query's score standard deviation, which swaps neighbours (a small, mostly insignificant
    change)."""
    rng = np.random.default_rng(seed)
    out = {}
    for qid, docs in run.items():
        scores = np.array(list(docs.values()))
        noisy = scores + rng.normal(0.0, scale * (scores.std() or 1.0), size=len(scores))
        out[qid] = dict(zip(docs, noisy.tolist(), strict=True))
    return out


def exact_arithmetic_reference(d: np.ndarray, permutations: int = 200_000, seed: int = 99) -> float | None:
    """Sign-flip p-value in exact integer arithmetic, when the differences are multiples of 1/m (m
    <= 1000, e.g. precision@10): no float rounding can drop a permutation that ties the observed
    sum."""
    for m in range(1, 1001):
        scaled = d * m
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-6):
            di = np.round(scaled).astype(np.int64)
            rng = np.random.default_rng(seed)
            hits = 0
            for start in range(0, permutations, 10_000):
                signs = 1 - 2 * rng.integers(0, 2, size=(min(10_000, permutations - start), len(di)))
                hits += int((np.abs(signs @ di) >= abs(int(di.sum()))).sum())
            return hits / permutations
    return None


def write_trec(run: dict[str, dict[str, float]], path: Path, tag: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for qid, docs in run.items():
            for rank, (doc, score) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cisi", choices=["cisi", "cranfield"])
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--write-runs", type=Path, default=None, help="also write both runs as TREC files here")
    args = parser.parse_args(argv)

    import ranx
    from scipy import stats

    warnings.filterwarnings("ignore", module="numba")
    warnings.filterwarnings("ignore", message=".*unsafe cast.*")

    from rankwise.analysis.significance import paired_t_test, randomization_test, wilcoxon_test
    from rankwise.metrics.engine import evaluate

    dataset = SHARED / args.dataset
    t0 = time.perf_counter()
    runs = make_runs(dataset)
    runs["bm25_noisy"] = perturbed(runs["bm25"])
    print(f"built tfidf and bm25 runs over {args.dataset} in {time.perf_counter() - t0:.1f}s")
    if args.write_runs:
        args.write_runs.mkdir(parents=True, exist_ok=True)
        for name, run in runs.items():
            write_trec(run, args.write_runs / f"{name}.trec", name)
        print(f"wrote {', '.join(f'{n}.trec' for n in runs)} to {args.write_runs}")

    qrels_path = dataset / "qrels" / "test.tsv"
    from rankwise.data.load import load_qrels

    qrels = load_qrels(qrels_path)
    qrels_dict = {q: qrels.judgements(q) for q in qrels.queries}
    # ranx needs every qrels query in every run: keep the judged queries only, empty runs get a
    # dummy doc
    judged = set(qrels_dict)
    ranx_runs = {}
    for name, run in runs.items():
        kept = {q: docs for q, docs in run.items() if q in judged}
        for q in judged - set(kept):
            kept[q] = {"__none__": 0.0}
        ranx_runs[name] = ranx.Run(kept, name=name)
    ranx_qrels = ranx.Qrels(qrels_dict)

    metrics = ["ndcg@10", "map@100", "mrr@10", "precision@10", "recall@100"]
    ok = True
    values = {}
    for name in runs:
        ours = evaluate(qrels, runs[name], metrics)
        values[name] = ours
        ranx.evaluate(ranx_qrels, ranx_runs[name], metrics)
        worst = max(abs(ours.per_query[q][m] - ranx_runs[name].scores[m][q]) for q in ours.per_query
                    for m in metrics)
        print(f"per-query values, {name}: rankwise vs ranx max |diff| = {worst:.1e}")
        ok &= worst <= 1e-9
    for base, cand in PAIRS:
        pair = [ranx_runs[base], ranx_runs[cand]]
        t0 = time.perf_counter()
        rep_t = ranx.compare(ranx_qrels, pair, metrics, stat_test="student", max_p=0.05)
        rep_f = ranx.compare(ranx_qrels, pair, metrics, stat_test="fisher", n_permutations=args.permutations,
                             max_p=0.05, random_seed=42)
        print(f"\n{cand} vs {base} ({len(values[base].per_query)} queries; ranx.compare student + fisher "
              f"took {time.perf_counter() - t0:.1f}s)")
        print(f"{'metric':<13} {'t rankwise':>12} {'t scipy':>12} {'t ranx':>12} {'|diff|':>9} | "
              f"{'rand rankwise':>13} {'fisher ranx':>12} {'tol':>7} | {'wilcoxon':>9} {'scipy':>9}")
        for m in metrics:
            a = values[base].per_query.column(m)
            b = values[cand].per_query.column(m)
            d = b - a
            t_ours = paired_t_test(d)
            t_scipy = float(stats.ttest_rel(b, a).pvalue)
            t_ranx = float(rep_t.comparisons[(base, cand)][m]["p_value"])
            r_ours = randomization_test(d, permutations=args.permutations, seed=42)
            r_ranx = float(rep_f.comparisons[(base, cand)][m]["p_value"])
            p_mid = max((r_ours + r_ranx) / 2, 1.0 / args.permutations)
            tol = 4 * math.sqrt(2 * p_mid * (1 - p_mid) / args.permutations) + 1.0 / args.permutations
            w_ours = wilcoxon_test(d)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                w_scipy = float(stats.wilcoxon(b, a).pvalue) if np.any(d) else float("nan")
            t_diff = max(abs(t_ours - t_scipy), abs(t_ours - t_ranx))
            rand_ok = abs(r_ours - r_ranx) <= tol
            note = ""
            if not rand_ok:
                exact = exact_arithmetic_reference(d)
                if exact is not None:
                    p_ref = max(exact, 1.0 / args.permutations)
                    tol_ref = 4 * math.sqrt(p_ref * (1 - p_ref) / args.permutations) + 1.0 / args.permutations
                    rand_ok = abs(r_ours - exact) <= tol_ref
                    note = (f"  (ranx's float comparison drops tied permutations; exact integer reference "
                            f"p = {exact:.5f})")
            checks = [t_diff <= 1e-6, rand_ok, abs(w_ours - w_scipy) <= 1e-9]
            if not np.any(d):  # no difference at all: scipy/ranx give NaN, rankwise p = 1 by definition
                checks = [t_ours == 1.0, r_ours == 1.0, w_ours == 1.0]
            ok &= all(checks)
            print(f"{m:<13} {t_ours:>12.6g} {t_scipy:>12.6g} {t_ranx:>12.6g} {t_diff:>9.1e} | {r_ours:>13.5f} "
                  f"{r_ranx:>12.5f} {tol:>7.4f} | {w_ours:>9.3g} {w_scipy:>9.3g} "
                  f"{'ok' if all(checks) else 'MISMATCH'}{note}")
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
