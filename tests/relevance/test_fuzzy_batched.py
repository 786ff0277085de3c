"""The fast fuzzy matcher gives the verdicts of the plain one: ``fuzzy_similarity(chunk, passage) >=
t`` for every pair, on random texts built to land near the threshold (cut, mutated, shuffled,
unrelated)."""

from __future__ import annotations

import random

import pytest

from rankwise.data.records import records_from_testset
from rankwise.relevance.text import fuzzy_similarities, fuzzy_similarity, judge_text, normalize


def _texts(rng: random.Random) -> tuple[list[str], list[str]]:
    alphabet = rng.choice(["ab ", "abcdefgh ", "abcdefghijklmnopqrstuvwxyz  éß"])
    chunks = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300))) for _ in range(rng.randint(1, 6))]
    refs = []
    for _ in range(rng.randint(1, 3)):
        base = rng.choice(chunks)
        i = rng.randint(0, max(len(base) - 1, 0))
        ref = base[i:i + rng.randint(1, 120)]
        ref = "".join(c if rng.random() > rng.choice([0.0, 0.05, 0.15, 0.3]) else rng.choice(alphabet) for c in ref)
        if rng.random() < 0.2:
            ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 100)))
        refs.append(ref or "x")
    return chunks, refs


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9, 0.95, 1.0])
def test_fuzzy_similarities_equal_the_pairwise_verdicts(threshold):
    rng = random.Random(int(threshold * 100))
    pairs = []
    for _ in range(300):
        chunks, refs = _texts(rng)
        pairs.extend((normalize(c), normalize(r)) for c in chunks for r in refs)
    fast = fuzzy_similarities(pairs, threshold)
    for (a, b), got in zip(pairs, fast, strict=True):
        exact = fuzzy_similarity(a, b)
        assert (got is not None) == (exact >= threshold), (a, b, exact)
        if got is not None:
            assert got == exact
    assert sum(v is not None for v in fast) > 50  # the data does reach the threshold


def test_judge_text_fuzzy_verdicts_equal_the_pairwise_ones():
    rng = random.Random(4)
    cases = []
    for n in range(150):
        chunks, refs = _texts(rng)
        cases.append({"id": f"c{n}", "retrieved_contexts": chunks, "reference_contexts": refs})
    records = records_from_testset(cases)
    judge_text(records, "fuzzy", threshold=0.8, min_evidence_chars=0)  # the scorer alone, no fragment rule
    matched = 0
    for case, rec in zip(cases, records, strict=True):
        refs = [normalize(r) for r in case["reference_contexts"]]
        for chunk, c, found in zip(case["retrieved_contexts"], rec.chunks, rec.passages_found["fuzzy"], strict=True):
            text = normalize(chunk)
            expected = [i for i, r in enumerate(refs) if r and fuzzy_similarity(text, r) >= 0.8]
            assert found == expected
            verdict = c.verdicts["fuzzy"]
            assert verdict.verdict == (1 if expected else 0)
            assert verdict.meta["similarity"] == {str(i): round(fuzzy_similarity(text, refs[i]), 4) for i in expected}
            matched += len(expected)
    assert matched > 20
