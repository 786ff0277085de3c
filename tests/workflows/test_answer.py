"""``rankwise answer`` end to end against the simulated generator (tests/generator_server.py):
answers from the top-K chunks in rank order, the as-fed record, truncation to a token budget, EM /
F1 / LLM scores, reruns from the cache; and ``calibrate`` on records made by ``answer`` names the
metric the generator was built to follow."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from generator_server import key_of, running_generator, synthetic_cases, write_cases
from rankwise.cli import main
from rankwise.data.records import load_records
from rankwise.workflows.answer_run import fed_context


@pytest.fixture(scope="module")
def generator():
    with running_generator() as gen:
        yield gen


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _answer(gen, ts, tmp_path, *extra, out="a.jsonl"):
    return _run("answer", ts, "--model", "sim", "--base-url", gen.base_url, "--cache", tmp_path / "c.sqlite",
                "--records", tmp_path / out, "--quiet", *extra)


def test_answers_from_top_k_in_rank_order_scored_and_cached(generator, tmp_path):
    cases = synthetic_cases(40, k=5, golds=(0, 1, 2), seed=7)
    generator.reset()
    # alpha 1, beta 0: the generator answers right whenever a supporting chunk is among those it
    # reads
    generator.configure(key=key_of(cases), curve={"kind": "flat"}, alpha=1.0, beta=0.0, mode="sample")
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _answer(generator, ts, tmp_path, "-k", "3", "--score", "em")
    assert r.exit_code == 0, r.output
    assert "40 requests, 40 ok (0 from the cache), 0 failed, 0 missing" in r.output
    records = {rec.id: rec for rec in load_records(tmp_path / "a.jsonl")}
    for case in cases:
        rec = records[case["id"]]
        gold_in_top3 = any(c == case["reference_contexts"][0] for c in case["retrieved_contexts"][:3])
        assert rec.response == (case["reference"] if gold_in_top3 else "I don't know.")
        assert rec.answer_score == float(gold_in_top3) and rec.answer_score_source == "exact_match"
        info = rec.extra["answer"]
        assert info["fed_ranks"] == [1, 2, 3] and info["truncated"] is None and info["status"] == "ok"
        assert info["model"] == "sim" and info["prompt_version"].startswith("answer-text-v3+")
        assert [c.text for c in rec.chunks] == case["retrieved_contexts"]  # the record keeps all chunks
    assert generator.stats()["by_kind"] == {"answer": 40}

    # rerun with an LLM correctness check: the answers come from the cache, only the checks are
    # calls
    generator.reset()
    r = _answer(generator, ts, tmp_path, "-k", "3", "--score", "llm")
    assert r.exit_code == 0, r.output
    assert "40 ok (40 from the cache)" in r.output
    assert generator.stats()["by_kind"] == {"correctness": 40}
    for case in cases:
        rec = {x.id: x for x in load_records(tmp_path / "a.jsonl")}[case["id"]]
        assert rec.answer_score_source == "llm_correctness"
        assert rec.answer_score == float(rec.response == case["reference"])
        assert rec.extra["answer_score_reason"].startswith("token F1 ")
    generator.reset()
    r = _answer(generator, ts, tmp_path, "-k", "3", "--score", "llm", "--graded-score")
    assert r.exit_code == 0, r.output
    recs = load_records(tmp_path / "a.jsonl")
    assert {x.answer_score_source for x in recs} == {"llm_correctness_graded"}
    assert {x.answer_score for x in recs} <= {0.0, 1.0} and generator.stats()["by_kind"] == {"correctness": 40}


def test_token_budget_cuts_the_context_and_says_so(generator, tmp_path):
    cases = synthetic_cases(5, k=4, seed=3)
    generator.configure(key=key_of(cases))
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _answer(generator, ts, tmp_path, "-k", "4", "--max-context-tokens", "40")
    assert r.exit_code == 0, r.output
    assert "cases had their context cut to --max-context-tokens 40" in r.output
    for rec in load_records(tmp_path / "a.jsonl"):
        info = rec.extra["answer"]
        expected = fed_context(rec, 4, 40)
        assert info["fed_ranks"] == expected.ranks and info["truncated"] == expected.truncated
        lengths = [len(rec.chunks[i - 1].text) for i in expected.ranks]
        kept = sum(lengths[:-1]) + (info["truncated"]["kept_chars"] if info["truncated"] else lengths[-1])
        assert kept <= 40 * 4
        assert info["truncated"]["dropped_ranks"] == list(range(expected.ranks[-1] + 1, 5))


def test_max_tokens_caps_each_answer_and_is_its_own_cache_entry(generator, tmp_path):
    """--max-tokens is the answer's output cap as sent (default 256); an answer asked with another
    cap is another request (not the cache's), and utility and the LLM checker keep their own caps.
    """
    cases = synthetic_cases(3, k=2, seed=5)
    generator.configure(key=key_of(cases))
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    generator.reset()
    r = _answer(generator, ts, tmp_path, "-k", "2")
    assert r.exit_code == 0, r.output
    assert generator.stats()["max_tokens"] == {"256": 3}
    generator.reset()
    r = _answer(generator, ts, tmp_path, "-k", "2", "--max-tokens", "24", "--score", "llm", out="b.jsonl")
    assert r.exit_code == 0, r.output
    assert "3 ok (0 from the cache)" in r.output
    assert generator.stats()["max_tokens"] == {"24": 3, "300": 3}  # the answers, then their checks
    generator.reset()
    r = _run("utility", ts, "--model", "sim", "--base-url", generator.base_url, "--cache", tmp_path / "c.sqlite",
             "--records", tmp_path / "u.jsonl", "--score", "f1", "--max-tokens", "24", "--quiet")
    assert r.exit_code == 0, r.output
    assert generator.stats()["max_tokens"] == {"24": generator.stats()["requests"]}
    r = _answer(generator, ts, tmp_path, "-k", "2", "--max-tokens", "0", out="c.jsonl")
    assert r.exit_code == 2 and "--max-tokens" in r.output


def test_answer_needs_records_and_dry_run_calls_nothing(generator, tmp_path):
    cases = synthetic_cases(7, k=5)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _run("answer", ts, "--model", "sim", "--base-url", generator.base_url)
    assert r.exit_code == 2 and "give --records OUT.jsonl" in r.output
    generator.reset()
    r = _run("answer", ts, "--model", "sim", "--base-url", generator.base_url, "--dry-run", "--cache",
             tmp_path / "c.sqlite")
    assert r.exit_code == 0, r.output
    assert "7 requests to sim" in r.output and "7 calls to make" in r.output
    assert generator.stats()["requests"] == 0


def test_calibrate_names_the_planted_metric_on_answer_records(generator, tmp_path):
    """The generator's answer holds a share of the reference's words equal to wcp(decay=rbp,p=0.8)@5
    of the chunks it reads (``partial`` mode); calibrate on the records ``answer`` wrote must name
    that metric."""
    cases = synthetic_cases(400, k=5, golds=(0, 1, 1, 2, 2, 3), seed=11)
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.8}, mode="partial")
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    r = _answer(generator, ts, tmp_path, "-k", "5", "--score", "f1")
    assert r.exit_code == 0, r.output
    r = _run("calibrate", tmp_path / "a.jsonl", "--relevance", "containment", "--format", "json",
             "--plot", tmp_path / "cal.png")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["statistic"] == "kendall_tau_b"
    # @5 and "as fed" (5 chunks) are the same metric here
    assert doc["recommendation"] in ("wcp(decay=rbp,p=0.8)@5", "wcp(decay=rbp,p=0.8)"), doc["sentence"]
    best = doc["candidates"][0]
    assert best["held_out"] > 0.95
    others = [c for c in doc["candidates"] if "rbp,p=0.8" not in c["metric"]]
    assert all(c["train"] < best["train"] for c in others)
    assert (tmp_path / "cal.png").stat().st_size > 1000

    # too few cases: no recommendation, and the reason
    small = write_cases(cases[:12], tmp_path / "small.jsonl")
    assert _answer(generator, small, tmp_path, "-k", "5", "--score", "f1", out="s.jsonl").exit_code == 0
    r = _run("calibrate", tmp_path / "s.jsonl", "--relevance", "containment", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["recommendation"] is None and "12" in doc["refused"]
