"""Metrics at a context budget (``recall@1500c``, ``ndcg@512t``, issue 36 item 3): each equals a
brute-force count over the characters of the prompt the chunks make, laid out one character at a
time, on overlapping chunks; the invariants of a cutoff hold (a budget past every list is no cutoff,
a chunk past the budget changes nothing, recall grows with the budget, values stay in [0, 1]); hand
vectors; errors in one line."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
from rankwise.metrics.budget import budget_values
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.metrics.rag import evaluate_rag

DOC = "".join(random.Random(0).choice("abcdefghij ") for _ in range(5000))


def _case(rng: random.Random, cid: str) -> dict:
    """A test-set case over one document: overlapping chunks (random starts and lengths, often
    sharing text) and reference passages given by their offsets, judged by span overlap."""
    passages = []
    for _ in range(rng.randint(1, 3)):
        s = rng.randrange(0, 4500)
        passages.append({"doc_id": "d", "start": s, "end": s + rng.randint(40, 300)})
    chunks, at = [], rng.randrange(0, 1000)
    for _ in range(rng.randint(1, 9)):
        if rng.random() < 0.4 and passages:  # a chunk over a passage, often overlapping the one before
            p = rng.choice(passages)
            s = max(0, p["start"] - rng.randint(0, 80))
        else:
            s = max(0, at - rng.randint(0, 100))  # overlaps the previous chunk's end
        e = min(len(DOC), s + rng.randint(1, 400))
        at = e
        chunks.append({"text": DOC[s:e], "doc_id": "d", "start": s, "end": e})
    refs = [{"text": DOC[p["start"]:p["end"]], **p} for p in passages]
    return {"id": cid, "question": f"q {cid}?", "reference_contexts": refs, "retrieved_contexts": chunks}


def _matrix(cases: list[dict]) -> RelevanceMatrix:
    from rankwise.metrics.rag import judged_records

    return RelevanceMatrix.from_records(judged_records(cases, "span")[0], "span")


def _brute(m: RelevanceMatrix, q: int, budget: int, metric: str, unit: str = "c") -> float:
    """The value counted character by character: the prompt is the chunks in rank order, cut at the
    budget."""
    lengths = [int(x) for x in m.chunk_chars[q, : m.lengths[q]]]
    if unit == "t":
        lengths = [math.ceil(x / 4) for x in lengths]
    owner = [i for i, n in enumerate(lengths) for _ in range(n)][:budget]  # the rank holding each position
    v = m.chunk_relevant[q]
    found = m.found[q] if m.found is not None else m.relevant[q]
    if metric == "precision":
        return sum(1 for i in owner if v[i]) / budget
    if metric == "recall":
        r = m.n_relevant[q]
        return sum(found[i] / lengths[i] for i in owner) / r if r else 0.0
    if metric == "wcp":
        weights = [1 / math.log2(c + 2) for c in range(budget)]
        return sum(w for c, w in enumerate(weights) if c < len(owner) and v[owner[c]]) / sum(weights)
    if metric == "ndcg":  # the list fills the budget here: the ideal takes the same positions and weights
        g = np.where(m.judged[q] & (m.grades[q] > 0), m.grades[q], 0)
        share = [0.0] * len(lengths)
        for i in owner:
            share[i] += 1 / lengths[i]
        dcg = sum(share[i] * g[i] / math.log2(i + 2) for i in range(len(lengths)))
        ideal = m.ideal_gains[q]
        idcg = sum(share[j] * ideal[j] / math.log2(j + 2) for j in range(min(len(lengths), len(ideal))))
        return dcg / idcg if idcg else 0.0
    raise AssertionError(metric)


@pytest.mark.parametrize("unit", ["c", "t"])
def test_budget_metrics_equal_a_character_by_character_count_on_overlapping_chunks(unit):
    rng = random.Random(7)
    cases = [_case(rng, f"c{i:02d}") for i in range(60)]
    m = _matrix(cases)
    assert m.chunk_relevant.any() and (~m.chunk_relevant[m.chunk_chars > 0]).any()  # both kinds of chunk
    checked = 0
    for budget in (1, 37, 250, 600, 1700):
        for metric in ("precision", "recall", "wcp", "ndcg"):
            got = budget_values(metric, m, budget, unit)
            for q in range(len(cases)):
                total = m.chunk_chars[q, : m.lengths[q]].sum() / (4 if unit == "t" else 1)
                if metric == "ndcg" and total < budget:
                    continue  # padded past the list's end: held by the hand vector below
                assert got[q] == pytest.approx(_brute(m, q, budget, metric, unit), abs=1e-9), (metric, budget, q)
                checked += 1
    assert checked > 700


def test_a_budget_past_every_list_is_no_cutoff_and_a_chunk_past_the_budget_changes_nothing():
    rng = random.Random(3)
    cases = [_case(rng, f"c{i}") for i in range(40)]
    full = evaluate_rag(cases, "span", metrics=["recall", "recall@10000c", "recall@400c", "precision@400c",
                                                "ndcg@400c", "wcp@400c"])
    assert full.mean["recall@10000c"] == pytest.approx(full.mean["recall"], abs=1e-12)
    deeper = [dict(c, retrieved_contexts=[*c["retrieved_contexts"], {"text": DOC[:500], "doc_id": "d", "start": 0,
                                                                      "end": 500}]) for c in cases]
    longer = [c for c in cases if sum(len(x["text"]) for x in c["retrieved_contexts"]) >= 400]
    names = ["recall@400c", "precision@400c", "ndcg@400c", "wcp@400c"]
    a = evaluate_rag(longer, "span", metrics=names).per_query
    b = evaluate_rag([d for d in deeper if d["id"] in {c["id"] for c in longer}], "span", metrics=names).per_query
    for name in names:
        assert np.array_equal(a.column(name), b.column(name)), name


def test_recall_grows_with_the_budget_and_every_value_stays_in_range():
    rng = random.Random(11)
    m = _matrix([_case(rng, f"c{i}") for i in range(80)])
    last = np.zeros(80)
    for budget in range(25, 3000, 125):
        r = budget_values("recall", m, budget, "c")
        assert (r >= last - 1e-12).all()
        last = r
        for metric in ("precision", "recall", "wcp", "ndcg"):
            v = budget_values(metric, m, budget, "c")
            assert ((v >= 0) & (v <= 1 + 1e-12)).all(), metric


def _rec(*chunks: tuple[int, int]) -> CaseRecord:
    """A case whose chunks have these (length, verdict)."""
    return CaseRecord("q", chunks=[ChunkRecord(rank=i + 1, text="abcdefghij"[i] * n, verdicts={"llm": Verdict(v)})
                                   for i, (n, v) in enumerate(chunks)])


def test_hand_vectors():
    m = RelevanceMatrix.from_records([_rec((100, 1), (100, 0), (100, 1))], "llm")  # R = 2 (pooled verdicts)
    # the budget 250 holds chunks 1-2 and half of chunk 3
    assert budget_values("precision", m, 250, "c").tolist() == [150 / 250]
    assert budget_values("recall", m, 250, "c").tolist() == [1.5 / 2]
    dcg = 1 + 0.5 / math.log2(4)
    idcg = 1 + 1 / math.log2(3)  # the ideal's two gains at the list's first two positions (weights 1, 1)
    assert budget_values("ndcg", m, 250, "c")[0] == pytest.approx(dcg / idcg, abs=1e-12)
    assert budget_values("precision", m, 300, "c").tolist() == [200 / 300]
    assert budget_values("wcp", m, 300, "c", decay="flat").tolist() == [200 / 300]  # flat decay: precision
    # tokens: ceil(100 / 4) = 25 per chunk, so 50 tokens hold the first two chunks
    assert budget_values("recall", m, 50, "t").tolist() == [0.5]
    # a list shorter than the budget: padded with non-relevant chunks of its mean length for the
    # ideal
    short = RelevanceMatrix.from_records([_rec((100, 0), (100, 1))], "llm")  # R = 1; ideal gains [1]
    assert budget_values("ndcg", short, 400, "c")[0] == pytest.approx((1 / math.log2(3)) / 1.0, abs=1e-12)
    assert budget_values("precision", short, 400, "c").tolist() == [100 / 400]


def test_wcp_weights_character_positions_not_ranks():
    """Two chunkings of the same relevant text in the same place of the prompt score alike under
    wcp@B."""
    one = RelevanceMatrix.from_records([_rec((200, 1), (200, 0))], "llm")
    two = RelevanceMatrix.from_records([_rec((100, 1), (100, 1), (100, 0), (100, 0))], "llm")
    for budget in (150, 300, 400):
        assert budget_values("wcp", one, budget, "c")[0] == pytest.approx(budget_values("wcp", two, budget, "c")[0])
        assert budget_values("precision", one, budget, "c")[0] == pytest.approx(
            budget_values("precision", two, budget, "c")[0])


def test_names_and_errors(tmp_path):
    from rankwise.metrics.registry import parse_measure

    assert parse_measure("recall@1500c").name == "recall@1500c" and parse_measure("ndcg@512t").budget == 512
    assert parse_measure("wcp(decay=linear)@300c").name == "wcp(decay=linear)@300c"
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"id": "q", "user_input": "q?", "retrieved_context_ids": ["a", "b"],
                               "reference_context_ids": ["a"]}) + "\n")
    for args, words in ((["-m", "map@100c"], "map takes no budget cutoff"),
                        (["-m", "recall@0c"], "at least 1"),
                        (["-m", "recall@100c", "-r", "ids"], "needs the chunks' texts")):
        r = CliRunner().invoke(main, ["eval-rag", str(ids), *args])
        assert r.exit_code == 2 and words in r.output and len(r.output.strip().splitlines()) == 1, r.output


# ------------------------------------------------------------------------------ sweep --budget


@pytest.fixture(scope="module")
def budget_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    r = CliRunner().invoke(main, ["sweep", "--chunk-size", "200,600", "--overlap", "0", "--budget", "500,1000,2000c",
                                  "--out", str(out), "--quiet", "--no-html"])
    assert r.exit_code == 0, r.output
    return out, r.output, json.loads((out / "sweep.json").read_text())


def test_sweep_budget_scores_each_configuration_at_each_budget_as_eval_rag_does(budget_sweep):
    out, text, saved = budget_sweep
    curves = saved["budget"]["recall"]["curves"]
    assert set(curves) == {"bm25 recursive 200/0", "bm25 recursive 600/0"} and set(curves["bm25 recursive 200/0"]) \
        == {"500", "1000", "2000"}
    for label, safe in (("bm25 recursive 200/0", "bm25_recursive_200-0"), ("bm25 recursive 600/0",
                                                                          "bm25_recursive_600-0")):
        again = evaluate_rag(str(out / "records" / f"{safe}.jsonl"), "span",
                             metrics=["recall@500c", "recall@1000c", "ndcg@2000c"])
        assert curves[label]["500"] == again.mean["recall@500c"] and curves[label]["1000"] == again.mean["recall@1000c"]
        assert saved["budget"]["ndcg"]["curves"][label]["2000"] == again.mean["ndcg@2000c"]
    # the paired test runs at each budget, as for any metric: each budget metric has its p-value per
    # configuration
    row = next(r for r in saved["rows"] if r["label"] == "bm25 recursive 600/0")
    assert all(isinstance(row[f"recall@{b}c p"], float) for b in (500, 1000, 2000))
    assert (out / "budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_budget_reverses_the_chunk_count_verdict_and_names_the_front(budget_sweep):
    """At K = 10 chunks the 600-character chunker recalls more (it holds three times the text); at
    the same prompt size the 200-character one does, and the front says so."""
    _, text, saved = budget_sweep
    rows = {r["label"]: r for r in saved["rows"]}
    small, large = rows["bm25 recursive 200/0"], rows["bm25 recursive 600/0"]
    assert large["recall@10"] > small["recall@10"]
    assert small["recall@500c"] > large["recall@500c"] and small["recall@1000c"] > large["recall@1000c"]
    front = saved["budget"]["recall"]["pareto"]
    assert front[0] == {"config": "bm25 recursive 200/0", "budget": 500, "value": small["recall@500c"]}
    assert [p["budget"] for p in front] == sorted(p["budget"] for p in front)
    assert all(b["value"] > a["value"] for a, b in zip(front, front[1:], strict=False))  # each point buys more quality
    assert "recall at a context budget (characters); [f] on the Pareto front" in text
    assert "note: bm25 recursive 200/0: questions whose retrieved list holds less than the budget" in text


@pytest.mark.parametrize("args, words", [(["--budget", "500,1000"], "ends with its unit"),
                                         (["--budget", "500c", "--budget-metric", "map"], "budget metrics are among"),
                                         (["--budget", "0c"], "whole numbers >= 1")])
def test_sweep_budget_errors_are_one_line(tmp_path, args, words):
    r = CliRunner().invoke(main, ["sweep", "--chunk-size", "300", "--out", str(tmp_path / "o"), "--quiet", *args])
    assert r.exit_code == 2 and words in r.output and len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("decay", ["log", "rbp", "flat", "linear", "power"])
def test_wcp_at_a_budget_far_past_the_lists_is_exact_and_takes_memory_of_the_lists_not_the_budget(decay):
    import tracemalloc

    from rankwise.metrics.context import rank_weights

    rec = CaseRecord("q1", chunks=[ChunkRecord(rank=1, text="x" * 60, verdicts={"llm": Verdict(1)}),
                                   ChunkRecord(rank=2, text="y" * 60, verdicts={"llm": Verdict(0)})])
    m = RelevanceMatrix.from_records([rec], "llm")
    for budget in (90, 1_000, 3_000_017):  # inside the list, past it, past it by several summing blocks
        d = rank_weights(budget, decay)
        assert budget_values("wcp", m, budget, "c", decay=decay)[0] == pytest.approx(d[:60].sum() / d.sum(),
                                                                                     rel=1e-12)
    tracemalloc.start()
    try:
        value = budget_values("wcp", m, 200_000_000, "c", decay=decay)[0]  # 1.6 GB were it held at once
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0 < value < 1 and peak < 64 * 2**20, peak
