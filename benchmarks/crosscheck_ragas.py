"""Cross-check rankwise's context metrics against Ragas 0.4.3's own non-LLM and ID-based metrics.

Three checks over seeded random cases (default 300 of each):

1. ``acp(ragas_compat=True)`` == Ragas' average precision (``_calculate_average_precision`` of
   ``NonLLMContextPrecisionWithReference``, the formula its LLM context precision shares) on random
   verdict lists, all-zero and all-one lists included;
2. end to end on random text cases: ``rankwise.evaluate_rag(..., relevance="containment")`` with
   ``acp(ragas_compat=true)@K`` and ``context_recall@K`` == Ragas
   ``NonLLMContextPrecisionWithReference`` and ``NonLLMContextRecall`` (Levenshtein similarity,
   thresholds 0.5). Relevant chunks are copies of a reference passage and distractors are digit
   strings, so both tools must reach the same verdicts;
3. ``id_precision`` / ``id_recall`` (ids mode) == Ragas ``IDBasedContextPrecision`` /
   ``IDBasedContextRecall`` on random id lists with repeats, empty gold and empty retrieval
   (undefined on both sides: Ragas NaN, rankwise null).

Prints the maximum absolute difference per check; exit status 0 when all agree digit for digit, or
when Ragas is not installed (it says so). Ragas pulls in langchain and pins openai<2 and rich<14, so
it is best kept out of the project's venv:

    python -m venv /tmp/ragas-venv /tmp/ragas-venv/bin/pip install "ragas==0.4.3"
    "langchain-community<0.4" rapidfuzz numpy pyarrow click rich /tmp/ragas-venv/bin/python
    benchmarks/crosscheck_ragas.py
    """

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _import_rankwise():
    try:
        import rankwise  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))
    import rankwise

    return rankwise


def _import_ragas():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import ragas
            from ragas.dataset_schema import SingleTurnSample
            from ragas.metrics import (
                IDBasedContextPrecision,
                IDBasedContextRecall,
                NonLLMContextPrecisionWithReference,
                NonLLMContextRecall,
            )
    except Exception as exc:  # ImportError, or a broken langchain install
        return None, f"{type(exc).__name__}: {exc}"
    return {"version": ragas.__version__, "Sample": SingleTurnSample, "IDP": IDBasedContextPrecision,
            "IDR": IDBasedContextRecall, "NLP": NonLLMContextPrecisionWithReference,
            "NLR": NonLLMContextRecall}, None


def _same(a, b) -> float:
    """|a - b|, 0 when both are undefined (NaN / None), inf when only one is."""
    a_undef = a is None or (isinstance(a, float) and math.isnan(a))
    b_undef = b is None or (isinstance(b, float) and math.isnan(b))
    if a_undef or b_undef:
        return 0.0 if a_undef and b_undef else math.inf
    return abs(float(a) - float(b))


def check_average_precision(rg, rng: random.Random, n: int) -> tuple[float, int]:
    from rankwise.metrics import average_context_precision

    metric = rg["NLP"]()
    worst, lists = 0.0, []
    for i in range(n):
        length = rng.randint(1, 12)
        if i % 10 == 0:
            v = [0] * length
        elif i % 10 == 1:
            v = [1] * length
        else:
            v = [int(rng.random() < 0.4) for _ in range(length)]
        lists.append(v)
    for v in lists:
        ours = average_context_precision(v, ragas_compat=True)
        theirs = metric._calculate_average_precision(v)
        worst = max(worst, _same(ours, theirs))
    return worst, len(lists)


def _words(rng: random.Random, vocab: list[str], lo: int, hi: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))


def _digits(rng: random.Random) -> str:
    return " ".join(str(rng.randint(10 ** 5, 10 ** 9)) for _ in range(rng.randint(6, 14)))


def text_cases(rng: random.Random, n: int) -> list[dict]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(400)]
    cases = []
    for i in range(n):
        refs = [_words(rng, vocab, 8, 16) for _ in range(rng.randint(1, 4))]
        chunks = []
        for _ in range(rng.randint(1, 8)):
            chunks.append(rng.choice(refs) if rng.random() < 0.35 else _digits(rng))
        cases.append({"id": f"t{i:04d}", "retrieved_contexts": chunks, "reference_contexts": refs})
    return cases


async def _ragas_scores(metric, samples) -> list[float]:
    return [await metric.single_turn_ascore(s) for s in samples]


def check_text(rg, rw, rng: random.Random, n: int) -> dict[str, tuple[float, int]]:
    cases = text_cases(rng, n)
    K = max(len(c["retrieved_contexts"]) for c in cases)
    ours = rw.evaluate_rag(cases, "containment", k=K,
                           metrics=[f"acp(ragas_compat=true)@{K}", f"context_recall@{K}"])
    samples = [rg["Sample"](retrieved_contexts=c["retrieved_contexts"], reference_contexts=c["reference_contexts"])
               for c in cases]
    prec = asyncio.run(_ragas_scores(rg["NLP"](), samples))
    rec = asyncio.run(_ragas_scores(rg["NLR"](), samples))
    acp_name, cr_name = f"acp(ragas_compat=True)@{K}", f"context_recall@{K}"
    out = {}
    for label, name, theirs in (("acp(ragas_compat) vs NonLLMContextPrecisionWithReference", acp_name, prec),
                                ("context_recall vs NonLLMContextRecall", cr_name, rec)):
        worst = max(_same(ours.per_query[c["id"]][name], t) for c, t in zip(cases, theirs, strict=True))
        out[label] = (worst, len(cases))
    return out


def id_cases(rng: random.Random, n: int) -> list[dict]:
    cases = []
    for i in range(n):
        pool = [f"doc{j}" for j in range(rng.randint(2, 15))]
        retrieved = [rng.choice(pool) for _ in range(rng.randint(0 if i % 25 == 0 else 1, 10))]
        gold = [] if i % 20 == 1 else rng.sample(pool, rng.randint(1, len(pool)))
        cases.append({"id": f"i{i:04d}", "retrieved_context_ids": retrieved, "reference_context_ids": gold})
    return cases


def check_ids(rg, rw, rng: random.Random, n: int) -> dict[str, tuple[float, int]]:
    cases = id_cases(rng, n)
    ours = rw.evaluate_rag(cases, "ids", metrics=["id_precision", "id_recall"])
    samples = [rg["Sample"](retrieved_context_ids=c["retrieved_context_ids"],
                            reference_context_ids=c["reference_context_ids"]) for c in cases]
    import logging

    logging.getLogger("ragas").setLevel(logging.ERROR)  # its "cannot calculate" warnings for empty lists
    prec = asyncio.run(_ragas_scores(rg["IDP"](), samples))
    rec = asyncio.run(_ragas_scores(rg["IDR"](), samples))
    out = {}
    for label, name, theirs in (("id_precision vs IDBasedContextPrecision", "id_precision", prec),
                                ("id_recall vs IDBasedContextRecall", "id_recall", rec)):
        diffs = [_same(ours.per_query[c["id"]][name], t) for c, t in zip(cases, theirs, strict=True)]
        undefined = sum(1 for t in theirs if isinstance(t, float) and math.isnan(t))
        out[f"{label} ({undefined} undefined on both sides)"] = (max(diffs), len(cases))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=300, help="random cases per check (default 300)")
    ap.add_argument("--seed", type=int, default=20240607)
    args = ap.parse_args(argv)
    rg, problem = _import_ragas()
    if rg is None:
        print("crosscheck_ragas: ragas is not installed here, nothing to compare "
              f"({problem}).\nInstall it in a separate venv: pip install \"ragas==0.4.3\" "
              "\"langchain-community<0.4\" rapidfuzz numpy pyarrow click rich")
        return 0
    rw = _import_rankwise()
    rng = random.Random(args.seed)
    results = {"acp(ragas_compat) vs Ragas _calculate_average_precision":
               check_average_precision(rg, rng, args.cases)}
    results.update(check_text(rg, rw, rng, args.cases))
    results.update(check_ids(rg, rw, rng, args.cases))
    print(f"rankwise vs ragas {rg['version']}, seed {args.seed}")
    ok = True
    for label, (worst, n) in results.items():
        good = worst == 0.0  # digit for digit
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {label}: {n} cases, max |difference| = {worst:.3g}")
    print("all agree" if ok else "DISAGREEMENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
