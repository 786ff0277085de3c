"""The LLM judge against a real Chat Completions server on loopback (tests/llm_server.py).

The server answers deterministically (verdict 1 iff the chunk shares a keyword with the reference /
response / question) and injects faults named in the prompt text (``[[429x1]]``, ``[[slow]]`` ...).
"""

from __future__ import annotations

import socket
import time

import pytest

from rankwise.data.records import records_from_testset
from rankwise.errors import InputError
from rankwise.llm.cache import ResponseCache
from rankwise.llm.client import CallPolicy, Endpoint, EndpointError
from rankwise.llm.cost import Prices
from rankwise.relevance.llm_judge import Judge, JudgeCase, PromptSettings, attach_verdicts, cases_from_records

FAST = {"backoff_base": 0.01, "backoff_max": 0.05}

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
# verdict per mode: reference keywords {completed, 1889}; question keywords {eiffel, tower,
# completed}
CHUNKS = ["The Eiffel Tower was completed in 1889.",  # ref 1, question 1
          "Paris is the capital of France.",  # 0, 0
          "The tower is 330 metres tall.",  # ref 0, question 1
          "Construction began in 1887 and ended in 1889."]  # ref 1, question 0


def _judge(srv, tmp_path, *, mode="reference", graded=False, batch=False, model="judge-test", cache=True,
           prices=None, **policy):
    settings = PromptSettings(mode=mode, graded=graded, batch=batch)
    store = ResponseCache(tmp_path / "cache.sqlite") if cache else None
    return Judge(Endpoint(model, srv.base_url, "unused"), settings, CallPolicy(**(FAST | policy)), store, prices)


def _case(chunks=CHUNKS, cid="q1", question=QUESTION, reference=REFERENCE, response=None):
    return JudgeCase(cid, question, list(chunks), reference, response)


def _verdicts(result, cid="q1"):
    return [v.verdict for v in result.verdicts[cid]]


# ------------------------------------------------------------------------------------------------
# modes


def test_modes_give_the_servers_verdicts_with_reasons(srv, tmp_path):
    r = _judge(srv, tmp_path, mode="reference").run([_case()])
    assert _verdicts(r) == [1, 0, 0, 1]
    assert r.verdicts["q1"][0].reason == "the chunk mentions 1889, completed"
    assert r.verdicts["q1"][1].reason == "the chunk shares no keyword with the target text"
    assert all(v.status == "ok" and v.call == "single" and not v.cached for v in r.verdicts["q1"])
    r = _judge(srv, tmp_path, mode="question").run([_case()])
    assert _verdicts(r) == [1, 0, 1, 0]
    r = _judge(srv, tmp_path, mode="response").run([_case(response="Paris, France.")])
    assert _verdicts(r) == [0, 1, 0, 0]
    assert srv.stats()["requests"] == 12


def test_graded_mode(srv, tmp_path):
    chunks = ["Eiffel", "Eiffel tower", "Eiffel tower completed", "nothing"]
    r = _judge(srv, tmp_path, mode="question", graded=True).run([_case(chunks)])
    assert [v.grade for v in r.verdicts["q1"]] == [1, 2, 3, 0]
    assert _verdicts(r) == [0, 1, 1, 0]  # relevant from grade 2
    judge = Judge(Endpoint("judge-test", srv.base_url, "unused"),
                  PromptSettings(mode="question", graded=True, relevant_from=1), CallPolicy(**FAST), None)
    assert _verdicts(judge.run([_case(chunks)])) == [1, 1, 1, 0]


def test_summary_counts_tokens_and_cost(srv, tmp_path):
    r = _judge(srv, tmp_path, prices=Prices(1.0, 2.0)).run([_case()])
    s = r.summary
    assert (s.cases, s.chunks, s.ok, s.failed, s.missing, s.cached, s.requests) == (1, 4, 4, 0, 0, 0, 4)
    assert s.prompt_tokens > 4 * 100 and s.completion_tokens > 4 * 5
    assert s.cost == pytest.approx(s.prompt_tokens * 1e-6 + s.completion_tokens * 2e-6)
    assert s.transport == "aiohttp"
    assert s.complete


# ------------------------------------------------------------------------------------- cache and
# rerun


def test_rerun_makes_zero_requests(srv, tmp_path):
    first = _judge(srv, tmp_path).run([_case()])
    assert srv.stats()["requests"] == 4
    srv.reset()
    second = _judge(srv, tmp_path).run([_case()])
    assert srv.stats()["requests"] == 0
    assert second.summary.requests == 0 and second.summary.cached == 4
    assert _verdicts(second) == _verdicts(first)
    assert [v.reason for v in second.verdicts["q1"]] == [v.reason for v in first.verdicts["q1"]]
    assert all(v.cached for v in second.verdicts["q1"])


def test_cache_key_follows_model_mode_reference_and_prompt(srv, tmp_path):
    _judge(srv, tmp_path).run([_case()])
    srv.reset()
    _judge(srv, tmp_path, model="other-model").run([_case()])
    assert srv.stats()["requests"] == 4
    srv.reset()
    _judge(srv, tmp_path).run([_case(reference="Completed in 1889, in Paris.")])
    assert srv.stats()["requests"] == 4
    srv.reset()
    _judge(srv, tmp_path, mode="question").run([_case()])
    assert srv.stats()["requests"] == 4
    srv.reset()
    # question mode ignores the reference: a new reference reuses the cached verdicts
    _judge(srv, tmp_path, mode="question").run([_case(reference="something else")])
    assert srv.stats()["requests"] == 0
    prompt = tmp_path / "prompt.toml"
    prompt.write_text('[binary]\nuser = """Custom.\\n<question>\\n{question}\\n</question>\\n<reference_answer>\\n'
                      '{reference}\\n</reference_answer>\\n<chunk>\\n{chunk}\\n</chunk>\\n'
                      'JSON {"verdict": 1 or 0, "reason": "..."}"""\n')
    judge = Judge(Endpoint("judge-test", srv.base_url, "unused"), PromptSettings(prompt_file=prompt),
                  CallPolicy(**FAST), ResponseCache(tmp_path / "cache.sqlite"))
    r = judge.run([_case()])
    assert srv.stats()["requests"] == 4 and _verdicts(r) == [1, 0, 0, 1]
    assert r.summary.prompt_version.startswith("reference-binary-vcustom+")


def test_failures_are_not_cached_and_retried_next_run(srv, tmp_path):
    chunks = ["completed [[refusex1]]", "completed in 1889"]
    r1 = _judge(srv, tmp_path).run([_case(chunks)])
    assert [v.status for v in r1.verdicts["q1"]] == ["failed", "ok"]
    before = srv.stats()["requests"]  # no reset: the server remembers the refusal was a one-off
    r2 = _judge(srv, tmp_path).run([_case(chunks)])
    assert srv.stats()["requests"] - before == 1  # only the failed chunk again
    assert [v.status for v in r2.verdicts["q1"]] == ["ok", "ok"]


# ------------------------------------------------------------------------------------------- faults


def test_every_chunk_ends_with_a_verdict_or_an_explicit_failure(srv, tmp_path):
    chunks = ["completed 1889", "completed [[fences]]", "completed [[prose]]", "completed [[quotes]]",
              "completed [[malformedx1]]", "completed [[truncatedx1]]", "completed [[badverdictx1]]",
              "completed [[malformedx2]]",
              "completed [[malformed]]", "completed [[truncated]]", "completed [[refuse]]",
              "completed [[refusefield]]", "completed [[400]]", "completed [[500]]", "completed [[429x1]]",
              "completed [[500x2]]"]
    srv.configure(retry_after="0.05")
    r = _judge(srv, tmp_path, max_retries=3).run([_case(chunks)])
    got = {c: (v.status, v.verdict, v.error) for c, v in zip(chunks, r.verdicts["q1"], strict=True)}
    for c in chunks[:8] + chunks[-2:]:
        assert got[c][:2] == ("ok", 1), (c, got[c])
    assert got["completed [[malformed]]"][0] == "failed"
    assert got["completed [[malformed]]"][2].startswith("unparseable reply after one repair and one fresh call: "
                                                        "no JSON object")
    assert got["completed [[truncated]]"][2].startswith("unparseable reply after one repair and one fresh call: "
                                                        "the JSON object in the reply is cut off")
    assert got["completed [[refuse]]"][2] == "refused: I'm sorry, but I can't help with that."
    assert got["completed [[refusefield]]"][2] == "refused: I'm sorry, but I can't assist with that request."
    # a context-length error: a counted failure at once (not retried), saying why and that nothing
    # was cut
    assert got["completed [[400]]"][2].startswith("context length exceeded: the server said: This model's maximum "
                                                  "context length is 8192 tokens (injected); the chunk is 17 "
                                                  "characters (~5 tokens) and the judge sends chunks whole")
    assert got["completed [[500]]"][2] == "HTTP 500: internal error (injected) (gave up after 4 attempts)"
    s = r.summary
    assert (s.ok, s.failed, s.missing) == (10, 6, 0)
    assert s.failures == {"unparseable": 2, "refused": 2, "context length exceeded": 1, "HTTP 500": 1}
    assert s.repairs == 6  # malformedx1, truncatedx1, badverdictx1, malformedx2, malformed, truncated
    # a reply still unreadable after the repair gets one fresh call: it saves malformedx2
    assert s.fresh_calls == 3  # malformedx2, malformed, truncated
    assert s.retries == 1 + 2 + 3  # 429x1, 500x2, 500 (3 retries then give up)
    stats = srv.stats()
    assert stats["requests"] == s.requests == 16 + s.repairs + s.fresh_calls + s.retries
    assert stats["by_status"] == {"200": 31 - 8, "429": 1, "500": 2 + 4, "400": 1}


def test_retry_after_is_honoured(srv, tmp_path):
    srv.configure(retry_after="1")
    t = time.perf_counter()
    r = _judge(srv, tmp_path).run([_case(["completed [[429x1]]"])])
    elapsed = time.perf_counter() - t
    assert r.verdicts["q1"][0].status == "ok"
    assert elapsed >= 1.0
    started = srv.stats()["started"]
    assert len(started) == 2 and started[1] - started[0] >= 1.0


def test_timeouts_are_retried(srv, tmp_path):
    srv.configure(slow_seconds=2.0)
    t = time.perf_counter()
    r = _judge(srv, tmp_path, timeout=0.3).run([_case(["completed [[slowx1]]", "completed [[slow]]"])])
    elapsed = time.perf_counter() - t
    v1, v2 = r.verdicts["q1"]
    assert (v1.status, v1.verdict) == ("ok", 1)
    assert v2.status == "failed" and v2.error == "timeout after 0.3s (gave up after 5 attempts)"
    assert r.summary.http_errors == {"timeout": 6}
    assert elapsed < 2.9  # 5 attempts x 0.3 s plus backoff, never the server's 2 s


def test_timeouts_lower_the_concurrency(srv, tmp_path):
    srv.configure(slow_seconds=1.0)
    chunks = [f"completed {i} [[slowx1]]" for i in range(8)]
    r = _judge(srv, tmp_path, timeout=0.3, concurrency=8, cache=False).run([_case(chunks)])
    assert r.summary.ok == 8
    assert (r.summary.concurrency, r.summary.concurrency_lowest) == (8, 4)


def test_unreachable_endpoint_fails_with_a_clear_message(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    judge = Judge(Endpoint("m", f"http://127.0.0.1:{port}/v1", "unused"), PromptSettings(),
                  CallPolicy(**FAST), ResponseCache(tmp_path / "c.sqlite"))
    t = time.perf_counter()
    with pytest.raises(EndpointError, match=rf"cannot reach the LLM endpoint http://127.0.0.1:{port}/v1: .*Is the "
                                            r"server running and the base URL right\?"):
        judge.run([_case()])
    assert time.perf_counter() - t < 5


def test_bad_model_and_bad_key_stop_the_run(srv, tmp_path):
    with pytest.raises(EndpointError, match=r"HTTP 404 .*model 'no-such-model'.*does not exist; check the model name"):
        _judge(srv, tmp_path, model="no-such-model").run([_case()])
    judge = Judge(Endpoint("judge-test", srv.base_url, "bad-key"), PromptSettings(), CallPolicy(**FAST), None)
    with pytest.raises(EndpointError, match="HTTP 401 .*Incorrect API key provided; check the API key"):
        judge.run([_case()])


def test_reasoning_models_get_max_completion_tokens_and_no_temperature(srv, tmp_path):
    r = _judge(srv, tmp_path, model="strict-reasoner", concurrency=1).run([_case()])
    assert _verdicts(r) == [1, 0, 0, 1]
    assert srv.stats()["by_status"] == {"400": 2, "200": 4}  # learnt once, then every call is right


# ----------------------------------------------------------------------------------- limits and
# caps


def test_concurrency_limit_holds(srv, tmp_path):
    srv.configure(latency=0.2)
    chunks = [f"chunk {i} completed" for i in range(12)]
    t = time.perf_counter()
    r = _judge(srv, tmp_path, concurrency=3, cache=False).run([_case(chunks)])
    elapsed = time.perf_counter() - t
    assert r.summary.ok == 12
    assert srv.stats()["max_inflight"] == 3
    assert elapsed >= 0.8  # 12 calls / 3 at a time x 0.2 s


def test_requests_per_minute_limit_spaces_calls(srv, tmp_path):
    chunks = [f"chunk {i}" for i in range(6)]
    _judge(srv, tmp_path, rpm=600, concurrency=6, cache=False).run([_case(chunks)])
    started = srv.stats()["started"]
    gaps = [b - a for a, b in zip(started, started[1:], strict=False)]
    assert len(started) == 6
    # 600/min = one start per 0.1 s (arrival times at the server jitter by a few ms)
    assert min(gaps) >= 0.06 and started[-1] - started[0] >= 0.47


def test_max_calls_caps_requests_and_marks_the_rest_missing(srv, tmp_path):
    chunks = [f"chunk {i} completed" for i in range(10)]
    r = _judge(srv, tmp_path, max_calls=4, concurrency=2).run([_case(chunks)])
    assert srv.stats()["requests"] == 4
    s = r.summary
    assert (s.ok, s.missing, s.failed, s.requests) == (4, 6, 0, 4)
    assert s.failures == {"max-calls": 6}
    missing = [v for v in r.verdicts["q1"] if v.status == "missing"]
    assert {v.error for v in missing} == {"max-calls reached (4 requests)"}
    # the next run judges only what is missing
    srv.reset()
    r2 = _judge(srv, tmp_path).run([_case(chunks)])
    assert srv.stats()["requests"] == 6 and r2.summary.cached == 4 and r2.summary.ok == 10


def test_dry_run_plans_without_calling(srv, tmp_path):
    judge = _judge(srv, tmp_path, prices=Prices(0.15, 0.60))
    plan = judge.plan([_case(), _case(cid="q2")])
    assert (plan.cases, plan.chunks, plan.cached, plan.calls) == (2, 8, 0, 8)
    assert plan.prompt_tokens > 8 * 100 and plan.completion_tokens == 8 * 40
    assert plan.cost == pytest.approx(plan.prompt_tokens * 0.15e-6 + plan.completion_tokens * 0.6e-6)
    assert srv.stats()["requests"] == 0
    judge.run([_case()])
    plan = _judge(srv, tmp_path).plan([_case(), _case(cid="q2", question="Another question?")])
    assert (plan.cached, plan.calls) == (4, 4)
    batch_plan = _judge(srv, tmp_path, batch=True).plan([_case(), _case(cid="q2")])
    assert batch_plan.calls == 2


# ----------------------------------------------------------------------------------------------
# batch


def test_batch_mode_one_call_per_question_same_verdicts(srv, tmp_path):
    cases = [_case(cid=f"q{i}", chunks=CHUNKS + [f"extra {j} completed" for j in range(6)]) for i in range(3)]
    single = _judge(srv, tmp_path, cache=False).run(cases)
    srv.reset()
    batch = _judge(srv, tmp_path, batch=True).run(cases)
    assert srv.stats()["requests"] == 3 and srv.stats()["batch_calls"] == 3
    for c in cases:
        assert _verdicts(batch, c.id) == _verdicts(single, c.id)
        assert [v.reason for v in batch.verdicts[c.id]] == [v.reason for v in single.verdicts[c.id]]
        assert {v.call for v in batch.verdicts[c.id]} == {"batch"}
    assert batch.summary.batch_calls == 3 and batch.summary.requests == 3
    srv.reset()
    again = _judge(srv, tmp_path, batch=True).run(cases)
    assert srv.stats()["requests"] == 0 and again.summary.cached == 30


def test_batch_wrong_count_falls_back_to_per_chunk_calls(srv, tmp_path):
    good = _case(cid="good")
    bad = _case(cid="bad", question=QUESTION + " [[wrongcount]]")
    r = _judge(srv, tmp_path, batch=True).run([good, bad])
    stats = srv.stats()
    assert stats["faults"] == {"wrongcount": 1}
    assert stats["requests"] == 2 + 4  # two batch calls, then four single calls for "bad"
    assert _verdicts(r, "bad") == _verdicts(r, "good") == [1, 0, 0, 1]
    assert {v.call for v in r.verdicts["bad"]} == {"single"}
    assert r.summary.batch_fallbacks == 1
    srv.reset()
    _judge(srv, tmp_path, batch=True).run([good, bad])
    assert srv.stats()["requests"] == 0  # fallback verdicts are cached for batch reruns too


def test_batch_size_splits_long_lists(srv, tmp_path):
    chunks = [f"chunk {i} completed" for i in range(7)]
    judge = Judge(Endpoint("judge-test", srv.base_url, "unused"), PromptSettings(batch=True, batch_size=3),
                  CallPolicy(**FAST), None)
    r = judge.run([_case(chunks)])
    assert srv.stats()["requests"] == 3 and r.summary.ok == 7


# --------------------------------------------------------------------------------------------
# inputs


def test_missing_inputs(srv, tmp_path):
    with pytest.raises(InputError, match="mode 'reference' needs a reference per case and the only case has none"):
        _judge(srv, tmp_path).run([_case(reference=None)])
    r = _judge(srv, tmp_path).run([_case(["completed", None]), _case(["completed"], cid="q2", reference=None)])
    assert [(v.status, v.error) for v in r.verdicts["q1"]] == [("ok", None),
                                                               ("failed", "no text for the chunk (only an id)")]
    assert r.verdicts["q2"][0].error == "no reference in the case (mode 'reference' needs one)"
    assert r.summary.failures == {"no text": 1, "no reference": 1}
    assert srv.stats()["requests"] == 1


def test_verdicts_go_into_records(srv, tmp_path):
    rows = [{"id": "q1", "user_input": QUESTION, "reference": REFERENCE,
             "retrieved_contexts": [{"id": f"c{i}", "text": t} for i, t in enumerate(CHUNKS + ["x [[refuse]]"])]}]
    records = records_from_testset(rows)
    judge = _judge(srv, tmp_path)
    result = judge.run(cases_from_records(records))
    attach_verdicts(records, result, judge, "llm")
    rec = records[0]
    assert rec.verdicts("llm") == [1, 0, 0, 1, None]
    v = rec.chunks[0].verdicts["llm"]
    assert v.meta == {"model": "judge-test", "mode": "reference", "scale": "binary",
                      "prompt_version": judge.prompt.prompt_version, "call": "single"}
    assert rec.chunks[4].verdicts["llm"].status == "failed"
    assert rec.status["llm"] == "incomplete: 1 failed verdict"


def test_run_works_inside_a_running_event_loop(srv, tmp_path):
    """As in a Jupyter notebook, where asyncio.run() alone would fail."""
    import asyncio

    async def notebook_cell():
        return _judge(srv, tmp_path).run([_case()])

    r = asyncio.run(notebook_cell())
    assert _verdicts(r) == [1, 0, 0, 1]


def test_lone_surrogates_in_texts_are_sent_as_replacement_characters(srv, tmp_path):
    """A "\\ud800" in a chunk (a bad escape in a JSON test set) used to end the run with a
    UnicodeEncodeError before any call; now it is sent (and keyed) as U+FFFD."""
    r = _judge(srv, tmp_path).run([_case(["completed \ud800 in 1889", "Paris \udfff"],
                                         question=QUESTION + "\ud83d")])
    assert [(v.status, v.verdict) for v in r.verdicts["q1"]] == [("ok", 1), ("ok", 0)]
    srv.reset()
    again = _judge(srv, tmp_path).run([_case(["completed \ud800 in 1889", "Paris \udfff"],
                                             question=QUESTION + "\ud83d")])
    assert again.summary.cached == 2 and srv.stats()["requests"] == 0


def test_a_lone_surrogate_in_a_reply_is_kept_as_a_replacement_character(srv, tmp_path):
    """A reason with "\\ud800" used to reach the cache writer, whose failure stopped the run."""
    r = _judge(srv, tmp_path).run([_case(["completed in 1889 [[surrogate]]", "Paris"])])
    assert [(v.status, v.verdict) for v in r.verdicts["q1"]] == [("ok", 1), ("ok", 0)]
    assert r.verdicts["q1"][0].reason.startswith("\ufffd the chunk mentions")
    assert ResponseCache(tmp_path / "cache.sqlite").__len__() == 2


# ------------------------------------------------------------------------------------ structured
# output


def test_json_schema_is_asked_for_with_the_verdict_schema(srv, tmp_path):
    """A server that takes json_schema gets the prompt's declared reply (binary single, graded
    batched)."""
    r = _judge(srv, tmp_path, concurrency=1).run([_case()])
    assert _verdicts(r) == [1, 0, 0, 1] and r.summary.response_format == "json_schema"
    assert srv.stats()["response_formats"] == {"json_schema": 4}
    r = _judge(srv, tmp_path, graded=True, batch=True).run([_case(cid="q2")])
    assert [v.grade for v in r.verdicts["q2"]] == [2, 0, 0, 1] and r.summary.batch_calls == 1
    assert srv.stats()["response_formats"] == {"json_schema": 5}


@pytest.mark.parametrize(("status", "takes", "sent"), [
    (422, "json_object+schema", {"json_schema": 1, "json_object+schema": 4}),  # llama-cpp-python's server
    (400, "json_object", {"json_schema": 1, "json_object+schema": 1, "json_object": 4}),
    (500, "json_object", {"json_schema": 1, "json_object+schema": 1, "json_object": 4})])
def test_a_refused_response_format_steps_down_once_and_is_remembered(srv, tmp_path, status, takes, sent):
    """The first refusal naming response_format steps the endpoint down (no retry loop, no failed
    chunk); the level is kept beside the cache, so the next run asks with it straight away."""
    formats = ["json_object+schema", "json_object", "text"] if takes == "json_object+schema" else ["json_object", "text"]
    srv.configure(formats=formats, format_status=status)
    r = _judge(srv, tmp_path, concurrency=1).run([_case()])
    assert _verdicts(r) == [1, 0, 0, 1] and r.summary.failed == 0 and r.summary.retries == 0
    assert r.summary.response_format == takes and r.summary.requests == sum(sent.values())
    assert srv.stats()["response_formats"] == sent
    import json
    memory = json.loads((tmp_path / "rankwise-endpoints.json").read_text())
    assert [row["response_format"] for row in memory.values()] == [takes]
    srv.reset()
    srv.configure(formats=formats, format_status=status)
    r = _judge(srv, tmp_path, concurrency=4).run([_case(cid="q2", question="When did the Eiffel Tower open?")])
    assert r.summary.ok == 4 and srv.stats()["response_formats"] == {takes: 4}  # no probe again


def test_down_to_plain_text_when_no_response_format_is_taken(srv, tmp_path):
    srv.configure(formats=["text"])
    r = _judge(srv, tmp_path, concurrency=4).run([_case()])
    assert _verdicts(r) == [1, 0, 0, 1] and r.summary.response_format == "text"
    got, requests = srv.stats()["response_formats"], srv.stats()["requests"]
    assert set(got) == {"json_schema", "json_object+schema", "json_object"} and requests == sum(got.values()) + 4  # 4 sent as text
    assert r.summary.requests == requests and r.summary.failed == 0
    from rankwise.report.judge_console import judge_summary_lines
    assert ("  replies asked as text: the endpoint refused json_schema and json_object, so replies are read as "
            "text (with repair)") in judge_summary_lines(r.summary, srv.base_url)


def test_cached_prompt_tokens_are_counted(srv, tmp_path):
    srv.configure(cached_tokens=7)
    r = _judge(srv, tmp_path).run([_case()])
    assert r.summary.requests == 4 and r.summary.cached_prompt_tokens == 28
    from rankwise.report.judge_console import judge_summary_lines
    assert any("(28 of the tokens in from the server's prompt cache)" in line
               for line in judge_summary_lines(r.summary, srv.base_url))
