"""Utility verdicts (eRAG) end to end against the simulated generator: each chunk's verdict is the
score of the answer the generator gives from that chunk alone; they match the planted answers, are
scored by every metric (graded ones and K past the list too), are cached, and stop at a cost cap."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from generator_server import key_of, running_generator, synthetic_cases, write_cases
from rankwise.cli import main
from rankwise.data.records import load_records
from rankwise.metrics.rag import evaluate_rag


@pytest.fixture(scope="module")
def generator():
    with running_generator() as gen:
        yield gen


def _distinct(cases) -> int:
    """Calls needed: one per distinct (question, chunk) — a chunk twice in a case is asked once."""
    return len({(c["question"], t) for c in cases for t in c["retrieved_contexts"]})


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _utility(gen, ts, tmp_path, *extra, out="u.jsonl"):
    return _run("utility", ts, "--model", "sim", "--base-url", gen.base_url, "--cache", tmp_path / "c.sqlite",
                "--records", tmp_path / out, "--quiet", *extra)


def test_utility_verdicts_match_the_planted_answers(generator, tmp_path):
    cases = synthetic_cases(30, k=5, golds=(0, 1, 2, 3), seed=5)
    # a chunk alone: P(right) = alpha + beta * w(1) = 0.2 + 0.5 for a supporting chunk, 0 otherwise
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, alpha=0.2, beta=0.5, mode="sample",
                        draw="iid", seed=9)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _utility(generator, ts, tmp_path, "--score", "em")
    assert r.exit_code == 0, r.output
    assert generator.stats()["by_kind"] == {"answer": _distinct(cases)} and _distinct(cases) < 150
    records = {rec.id: rec for rec in load_records(tmp_path / "u.jsonl")}
    useful = 0
    for case in cases:
        rec = records[case["id"]]
        for chunk, text in zip(rec.chunks, case["retrieved_contexts"], strict=True):
            v = chunk.verdicts["utility"]
            planted_answer = v.meta["answer"]  # what the generator said from this chunk alone
            is_gold = text == case["reference_contexts"][0]
            assert planted_answer in (case["reference"], "I don't know.")
            assert (planted_answer == case["reference"]) <= is_gold  # fillers never give the answer
            assert v.verdict == int(planted_answer == case["reference"]) and v.status == "ok"
            assert v.meta["answer_score"] == float(v.verdict)
            useful += v.verdict
        assert rec.status["utility"] == "ok"
        # R: the distinct chunks judged useful (a text retrieved twice is one item: the redundancy
        # rule of docs/context-metrics.md; before it R counted every copy)
        assert rec.truth["utility"]["n_relevant"] == len({c.text for c in rec.chunks if c.verdicts["utility"].verdict})
    gold_chunks = sum(c["retrieved_contexts"].count(c["reference_contexts"][0]) for c in cases)
    assert 0.5 * gold_chunks < useful < 0.9 * gold_chunks  # about 70% of supporting chunks pay off
    assert f"{useful} useful" in r.output

    # every metric reads them, graded ones and K past the list length included
    result = evaluate_rag(tmp_path / "u.jsonl", "utility", metrics=["ndcg@10", "precision@20", "recall@20",
                                                                   "wcp(decay=rbp,p=0.8)@5", "hit_rate@3"])
    for rec in records.values():
        v = rec.verdicts("utility")
        row = result.per_query[rec.id]
        assert row["precision@20"] == pytest.approx(sum(v) / 20)  # K past the list: missing ranks count 0
        assert row["hit_rate@3"] == float(any(v[:3]))
        if sum(v):
            assert row["ndcg@10"] == pytest.approx(1.0 if v[: sum(v)] == [1] * sum(v) else row["ndcg@10"])
            assert 0 < row["ndcg@10"] <= 1
    assert result.mean["recall@20"] == pytest.approx(
        sum(1.0 for rec in records.values() if any(rec.verdicts("utility"))) / len(records))
    r = _run("eval-rag", tmp_path / "u.jsonl", "--relevance", "utility", "-m", "ndcg@10", "-m", "precision@20",
             "--format", "json", "--quiet")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["mean"]["precision@20"] == pytest.approx(useful / 20 / len(cases))

    # rerun: every answer from the cache
    generator.reset()
    r = _utility(generator, ts, tmp_path, "--score", "em", out="u2.jsonl")
    assert r.exit_code == 0 and "150 requests, 150 ok (150 from the cache)" in r.output
    assert generator.stats()["requests"] == 0


def test_graded_utility_and_calibrate_on_it(generator, tmp_path):
    cases = synthetic_cases(240, k=5, golds=(0, 1, 2, 2, 3), seed=6)
    generator.reset()
    # partial answers: from a chunk alone, the share of the reference's words is w(1)/w(1) = 1 for a
    # supporting chunk; fillers give "I don't know."
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.8}, mode="partial")
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _utility(generator, ts, tmp_path, "--score", "f1", "--graded")
    assert r.exit_code == 0, r.output
    for rec, case in zip(load_records(tmp_path / "u.jsonl"), cases, strict=True):
        grades = [c.verdicts["utility"].grade for c in rec.chunks]
        gold = [3 if t == case["reference_contexts"][0] else 0 for t in case["retrieved_contexts"]]
        assert grades == gold
        # every gold chunk is the one reference text: one item (the redundancy rule), however often
        # retrieved
        assert rec.truth["utility"]["ideal_gains"] == sorted({g for g in gold if g}, reverse=True)
    # then answers from the top 5 of the same records, and calibrate on utility verdicts
    r = _run("answer", tmp_path / "u.jsonl", "--model", "sim", "--base-url", generator.base_url, "-k", "5",
             "--cache", tmp_path / "c.sqlite", "--records", tmp_path / "a.jsonl", "--score", "f1", "--quiet")
    assert r.exit_code == 0, r.output
    recs = load_records(tmp_path / "a.jsonl")
    assert all("utility" in c.verdicts for rec in recs for c in rec.chunks)  # verdicts survive `answer`
    r = _run("calibrate", tmp_path / "a.jsonl", "--relevance", "utility", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["source"] == "utility" and doc["recommendation"] is not None
    assert "rbp,p=0.8" in doc["recommendation"], doc["sentence"]


def test_cost_cap_stops_and_rerun_goes_on(generator, tmp_path):
    cases = synthetic_cases(20, k=5, seed=8)
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, mode="sample", draw="stratified")
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    prices = ["--price-in", "100", "--price-out", "100", "--concurrency", "1"]
    r = _utility(generator, ts, tmp_path, "--max-cost", "0.05", *prices)
    assert r.exit_code == 0, r.output
    assert "max-cost reached ($0.05 spent)" in r.output
    first = generator.stats()["requests"]
    calls = _distinct(cases)
    assert 0 < first < calls
    recs = load_records(tmp_path / "u.jsonl")
    failed = [c.verdicts["utility"] for rec in recs for c in rec.chunks if not c.verdicts["utility"].ok]
    assert failed and all("max-cost reached" in v.error for v in failed)
    assert any(rec.status["utility"].startswith("incomplete") for rec in recs)
    generator.reset()
    r = _utility(generator, ts, tmp_path, *prices)
    assert r.exit_code == 0, r.output
    assert generator.stats()["requests"] == calls - first and generator.stats()["repeated_prompts"] == 0
    assert "100 requests, 100 ok (" in r.output
    recs = load_records(tmp_path / "u.jsonl")
    assert all(rec.status["utility"] == "ok" for rec in recs)

    r = _run("utility", ts, "--model", "sim", "--base-url", generator.base_url, "--max-cost", "1", "--dry-run")
    assert r.exit_code == 2 and "--max-cost needs prices" in r.output


def test_apologies_are_counted_failures_not_answers_and_a_rerun_asks_again(generator, tmp_path):
    cases = synthetic_cases(8, k=5, seed=11)
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, mode="partial", apologies=0.0)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _utility(generator, ts, tmp_path, "--score", "em", out="base.jsonl")
    assert r.exit_code == 0, r.output
    want = {(rec.id, c.rank): c.verdicts["utility"].verdict for rec in load_records(tmp_path / "base.jsonl") for c in rec.chunks}
    assert sum(want.values()) > 0
    generator.reset()
    generator.configure(apologies=0.3)
    try:
        cache = ["--cache", tmp_path / "apology.sqlite"]
        r = _utility(generator, ts, tmp_path, "--score", "em", *cache)
        apologies = generator.stats()["by_kind"]["apology"]
        assert r.exit_code == 0, r.output
        assert apologies > 0 and f"refused {apologies}" in r.output
        recs = load_records(tmp_path / "u.jsonl")
        got = {(rec.id, c.rank): c.verdicts["utility"] for rec in recs for c in rec.chunks}
        refused = [k for k, v in got.items() if v.status == "failed"]
        # one call per distinct (question, chunk): each apology fails every chunk that shares its
        # call
        assert len({(rec.question, c.text) for rec in recs for c in rec.chunks if (rec.id, c.rank) in refused}) == apologies
        assert all(got[k].error.startswith("refused: I'm sorry") and got[k].verdict is None for k in refused)
        assert {k: v.verdict for k, v in got.items() if k not in refused} == {
            k: v for k, v in want.items() if k not in refused}
        before = generator.stats()["requests"]  # no reset: the server apologises only the first time
        r = _utility(generator, ts, tmp_path, "--score", "em", *cache)
        assert r.exit_code == 0, r.output
        assert generator.stats()["requests"] - before == apologies  # the refused ones asked again, nothing else
        got = {(rec.id, c.rank): c.verdicts["utility"].verdict for rec in load_records(tmp_path / "u.jsonl") for c in rec.chunks}
        assert got == want
    finally:
        generator.configure(apologies=0.0)
