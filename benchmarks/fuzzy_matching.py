"""Fuzzy matching of RAG contexts: the batched scorer against the pair-by-pair loop it replaced.

Synthetic cases (default 20,000 cases x 10 retrieved chunks of about 500 characters, 1-3 reference
passages of about 200): a third of the passages are cut from a retrieved chunk, some with a few
letters changed, the rest are unrelated text. Times ``judge_text(records, "fuzzy")`` (containment
short-cut, a bit-parallel LCS bound that rules out nearly every non-matching pair, ``partial_ratio``
with the threshold as score cutoff for the rest: see ``rankwise.relevance.text.fuzzy_similarities``)
against the previous implementation (``fuzz.partial_ratio`` on every chunk x passage pair), and
checks that the matched passages of every chunk are identical.

Usage:
    python benchmarks/fuzzy_matching.py                 # 20k cases x 10 chunks
    python benchmarks/fuzzy_matching.py --cases 2000    # quicker
"""

from __future__ import annotations

import argparse
import random
import sys
import time


def make_cases(n_cases: int, n_chunks: int, seed: int = 11) -> list[dict]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    cases = []
    for c in range(n_cases):
        chunks = [text(rng.randint(60, 100)) for _ in range(n_chunks)]
        refs = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.35:
                ws = rng.choice(chunks).split()
                i = rng.randint(0, max(len(ws) - 30, 0))
                ref = " ".join(ws[i:i + 30])
                if rng.random() < 0.5:
                    ref = "".join(ch if rng.random() > 0.06 else rng.choice(letters) for ch in ref)
            else:
                ref = text(30)
            refs.append(ref.capitalize() + ".")
        cases.append({"id": f"c{c}", "retrieved_contexts": chunks, "reference_contexts": refs})
    return cases


def pair_by_pair(records, threshold: float) -> list[list[list[int]]]:
    """The implementation before the batched one: partial_ratio on every (chunk, passage) pair."""
    from rapidfuzz import fuzz

    from rankwise.relevance.text import normalize

    out = []
    for rec in records:
        norm = {i: normalize(p.text) for i, p in enumerate(rec.reference_contexts) if p.text and normalize(p.text)}
        found = []
        for c in rec.chunks:
            text = normalize(c.to_chunk().text)
            found.append([i for i, p in norm.items() if text and p and fuzz.partial_ratio(text, p) / 100.0 >= threshold])
        out.append(found)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args(argv)

    from rankwise.data.records import records_from_testset
    from rankwise.relevance.text import judge_text

    cases = make_cases(args.cases, args.chunks)
    pairs = sum(len(c["retrieved_contexts"]) * len(c["reference_contexts"]) for c in cases)
    old_records = records_from_testset(cases)
    t = time.perf_counter()
    old = pair_by_pair(old_records, args.threshold)
    t_old = time.perf_counter() - t
    new_records = records_from_testset(cases)
    t = time.perf_counter()
    judge_text(new_records, "fuzzy", threshold=args.threshold)
    t_new = time.perf_counter() - t
    new = [rec.passages_found["fuzzy"] for rec in new_records]
    if new != old:
        bad = next(i for i, (a, b) in enumerate(zip(new, old, strict=True)) if a != b)
        print(f"verdicts differ on case {cases[bad]['id']}: {new[bad]} vs {old[bad]}", file=sys.stderr)
        return 1
    matched = sum(len(f) for rec in new for f in rec)
    print(f"{args.cases} cases x {args.chunks} chunks, {pairs:,} chunk-passage pairs, {matched:,} matches")
    print(f"pair by pair (before): {t_old:7.2f} s")
    print(f"batched (judge_text):  {t_new:7.2f} s   {t_old / t_new:.1f}x faster, identical verdicts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
