"""The generator runner (llm/generate.py) against the fault-injecting loopback server of the judge
tests (tests/llm_server.py): retried faults end ok, refusals and empty replies fail that one
request, an unreadable correctness verdict gets one repair, and a stopped endpoint keeps what was
had."""

from __future__ import annotations

import pytest

from rankwise.llm.cache import ResponseCache
from rankwise.llm.client import CallPolicy, Endpoint
from rankwise.llm.generate import GenerationStopped, Generator, GenRequest, load_gen_prompt

FAST = CallPolicy(concurrency=4, max_retries=2, backoff_base=0.01, backoff_max=0.05, timeout=5.0)


def _requests(prompt, markers):
    return [GenRequest(f"r{i}", prompt.render_answer(f"What is item {i}? {m}", [f"Item {i} is blue."]))
            for i, m in enumerate(markers)]


def test_faults_fail_only_their_request(srv, tmp_path):
    prompt = load_gen_prompt("answer")
    markers = ["", "[[500x1]]", "[[429x1]]", "[[refusefield]]", "[[malformed]]", "[[contentnum]]"]
    srv.configure(retry_after="0")
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        result = gen.run(_requests(prompt, markers))
    r = result.replies
    assert [r[f"r{i}"].status for i in range(6)] == ["ok", "ok", "ok", "failed", "ok", "failed"]
    assert r["r3"].error.startswith("refused:")
    assert r["r4"].text  # prose is a fine answer
    assert r["r5"].error.startswith("bad reply")
    s = result.summary
    assert (s.ok, s.failed, s.missing) == (4, 2, 0) and s.retries >= 2
    # rerun: the four answers from the cache, only the two failures asked again
    srv.reset()
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        again = gen.run(_requests(prompt, markers))
    assert again.summary.cached == 4
    assert {k: v.text for k, v in again.replies.items() if v.cached} == {k: v.text for k, v in r.items() if v.ok}


def test_correctness_verdicts_parse_and_repair(srv, tmp_path):
    prompt = load_gen_prompt("correctness")
    reqs = [GenRequest("a", prompt.render_check("Colour of item 1?", "Item 1 is blue.", "It is blue.")),
            GenRequest("b", prompt.render_check("Colour of item 2? [[badverdictx1]]", "Item 2 is red.", "Red.")),
            GenRequest("c", prompt.render_check("Colour of item 3?", "Item 3 is green.", "No idea."))]
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        result = gen.run(reqs)
    assert all(v.ok for v in result.replies.values())
    assert result.replies["a"].verdict in (0, 1) and result.replies["a"].reason
    assert result.summary.repairs == 1
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        groups = cache.stats().groups
    assert [(g["mode"], g["scale"], g["verdicts"]) for g in groups] == [("correctness", "binary", 3)]


def test_lost_endpoint_stops_with_what_was_had(srv, tmp_path):
    prompt = load_gen_prompt("answer")
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        gen.run(_requests(prompt, ["", ""]))
    with (Generator(Endpoint("no-such-model", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen,
          pytest.raises(GenerationStopped) as info):
        gen.run(_requests(prompt, ["", "", ""]))  # 2 cached under another model: all 3 asked
    res = info.value.result
    assert res.summary.ok == 0 and res.summary.missing == 3 and "404" in str(info.value)
    with Generator(Endpoint("judge-test", srv.base_url), prompt, FAST, tmp_path / "c.sqlite") as gen:
        plan = gen.plan(_requests(prompt, ["", "", ""]))
    assert (plan.requests, plan.cached, plan.calls) == (3, 2, 1)
