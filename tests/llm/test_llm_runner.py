"""The one LLM runner (llm/runner.py) that the judge and the generator share, against the
fault-injecting loopback server (tests/llm_server.py): what the generator gained by running on the
judge's runner, and the summaries both print."""

from __future__ import annotations

from dataclasses import fields

import pytest

from rankwise.llm.client import CallPolicy, Endpoint
from rankwise.llm.cost import Prices
from rankwise.llm.generate import Generator, GenRequest, GenSummary, load_gen_prompt
from rankwise.llm.runner import RunPlan, RunSummary, failure_kind
from rankwise.relevance.llm_judge import JudgeSummary

FAST = CallPolicy(concurrency=4, max_retries=2, backoff_base=0.01, backoff_max=0.05, timeout=5.0)


def _check(prompt, rid, marker):
    return GenRequest(rid, prompt.render_check(f"Colour of item {rid}? {marker}", f"Item {rid} is blue.",
                                               "It is blue."))


def test_a_refusal_in_the_repair_reply_counts_as_a_refusal(srv, tmp_path):
    """The repair reply of a correctness check is checked for a refusal as the judge does (the
    generator's own runner parsed it as an unreadable verdict)."""
    prompt = load_gen_prompt("correctness")
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        result = gen.run([_check(prompt, "a", "[[badverdictx1]] [[refuse]]"), _check(prompt, "b", "")])
    a = result.replies["a"]
    assert (a.status, result.replies["b"].status) == ("failed", "ok")
    assert a.error.startswith("refused: ") and "sorry" in a.error
    assert result.summary.repairs == 1 and result.summary.failures == {"refused": 1}


def test_an_unreadable_check_says_what_both_replies_were(srv, tmp_path):
    """After the repair, the error names the first reply's fault too (and a reply cut at the token
    limit)."""
    prompt = load_gen_prompt("correctness")
    reqs = [_check(prompt, "m", "[[malformed]]"), _check(prompt, "t", "[[truncatedx1]] [[malformed]]")]
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        result = gen.run(reqs)
    m, t = result.replies["m"], result.replies["t"]
    assert m.status == t.status == "failed"
    assert m.error.startswith("unparseable reply after one repair: ") and "(first reply: " in m.error
    assert "(the reply hit the token limit)" in t.error and "(the reply hit the token limit)" not in m.error
    assert result.summary.repairs == 2 and result.summary.failures == {"unparseable": 2}
    assert srv.stats()["requests"] == 4  # one call and one repair each: no fresh call for the generator


def test_dry_run_and_run_agree_on_text_that_is_not_utf8(srv, tmp_path):
    """A lone surrogate (JSON "\\ud800") in a request: the dry run keys it as the run does (the
    generator's plan hashed the raw text and died with UnicodeEncodeError)."""
    prompt = load_gen_prompt("answer")
    reqs = [GenRequest("s", prompt.render_answer("What is item 1? \ud800", ["Item 1 is blue."])),
            GenRequest("p", prompt.render_answer("What is item 2?", ["Item 2 is red."]))]
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        before = gen.plan(reqs)
        assert (before.requests, before.cached, before.calls) == (2, 0, 2)
        result = gen.run(reqs)
        assert result.summary.ok == 2
        after = gen.plan(reqs)
        assert (after.cached, after.calls) == (2, 0)
        assert gen.run(reqs).summary.cached == 2 and srv.stats()["requests"] == 2


def test_summaries_keep_their_fields_in_order():
    """One base of counters; ``to_dict`` (what ``--format json`` prints) keeps each summary's keys
    and order."""
    judge = JudgeSummary(model="m", mode="reference", scale="binary", prompt_version="v", cases=2, chunks=5)
    gen = GenSummary(model="m", task="answer", prompt_version="v", items=3)
    assert list(judge.to_dict()) == [
        "model", "mode", "scale", "prompt_version", "cases", "chunks", "ok", "cached", "failed", "missing",
        "requests", "retries", "repairs", "fresh_calls", "batch_calls", "batch_fallbacks", "prompt_tokens",
        "completion_tokens", "cached_prompt_tokens", "response_format", "cost", "seconds", "transport", "concurrency", "concurrency_lowest", "failures",
        "http_errors", "stopped", "capped", "bad_cache_rows"]  # capped: the judge's --max-cost
    assert list(gen.to_dict()) == [
        "model", "task", "prompt_version", "items", "ok", "cached", "failed", "missing", "requests", "retries",
        "repairs", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "response_format", "cost",
        "seconds", "concurrency", "failures", "http_errors", "stopped", "capped", "bad_cache_rows"]
    for s in (judge, gen):
        assert isinstance(s, RunSummary) and set(s.to_dict()) == {f.name for f in fields(s)}
    assert (judge.chunks, gen.items, gen.ok, gen.complete) == (5, 3, 0, True)


def test_failure_kinds_and_the_plan_cut_to_max_calls():
    assert [failure_kind(e) for e in ("HTTP 429: slow down", "max-cost reached ($0.01)", "empty reply (no text)",
                                      "no text for the chunk (only an id)", "timeout after 5 s", "odd: thing")] \
        == ["HTTP 429", "max-cost", "empty reply", "no text", "timeout", "odd"]
    def plan(calls, max_calls, prices=Prices()):
        p = RunPlan.estimate(calls, 100 * calls, 10 * calls, max_calls=max_calls, prices=prices, model="m",
                             prompt_version="v", cached=1)
        return p.calls, p.prompt_tokens, p.completion_tokens, p.cost

    assert plan(10, 4) == (4, 400, 40, None)
    assert plan(3, 4) == plan(3, None) == (3, 300, 30, None)
    assert plan(3, 0) == (0, 0, 0, None)
    assert plan(10, 4, Prices(1.0, 2.0)) == (4, 400, 40, pytest.approx((400 * 1.0 + 40 * 2.0) / 1e6))


def test_synth_summary_is_a_run_summary_and_keeps_its_json():
    """synth's summary shares the base counters (requests, tokens, cost, stopped, model, prompt
    version) and prints the same JSON keys, in the same order, as before it did (plus
    cached_prompt_tokens, as the judge's summary)."""
    from rankwise.testsets.synth_run import SynthSummary

    s = SynthSummary(planned=3, model="m", prompt_version="synth-v2+0")
    assert isinstance(s, RunSummary)
    assert list(s.to_dict()) == [
        "planned", "requested", "accepted", "rejected", "resumed", "calls", "requests", "cached", "prompt_tokens",
        "completion_tokens", "cached_prompt_tokens", "cost", "difficulty", "styles", "languages", "max_per_document", "documents",
        "stopped", "out", "rejected_out", "model", "prompt_version"]
    own = {f.name for f in fields(SynthSummary)} - {f.name for f in fields(RunSummary)}
    assert not own & {"requests", "cached", "prompt_tokens", "completion_tokens", "cost", "stopped", "model",
                      "prompt_version"}  # declared once, in the base


def test_one_llm_config_is_passed_whole_or_built_from_keywords(tmp_path):
    from rankwise.llm.config import as_llm_config, resolve_llm_config

    cfg = resolve_llm_config(model="m", base_url="http://127.0.0.1:9/v1", env={}, cache=tmp_path / "c.sqlite",
                             max_calls=5)
    assert as_llm_config(cfg) is cfg
    built = as_llm_config(None, model="m", base_url="http://127.0.0.1:9/v1", env={}, cache=tmp_path / "c.sqlite",
                          max_calls=5)
    assert built == cfg
    with pytest.raises(TypeError, match="not both"):
        as_llm_config(cfg, model="other")
    prompt = load_gen_prompt("answer")
    with Generator.from_config(cfg, prompt) as gen:
        assert (gen.endpoint, gen.policy, gen.prices, gen.cache.path) == (cfg.endpoint, cfg.policy, cfg.prices,
                                                                          cfg.cache)
