"""Every LLM feature against a real local server: llama.cpp's OpenAI-compatible server
(llama-cpp-python[server]) with the packaged Gemma 3 270M model, started once for this file
(rankwise.llm.local; under ``make test`` a file runs whole on one worker, tests/conftest.py, so this
is one server per test session).

These tests check the protocol and the pipeline, not the model's wisdom (a 270M model's verdicts are
near chance): where the server constrains replies to the verdict schema (grammar-constrained JSON),
or a reply is free text, every reply must parse — a failure there is rankwise's (the request or the
reading), and each test says so; elsewhere a reply is parsed or counted as failed, records written,
the usage and cost equal to what the server reported, the response_format the server took detected
and remembered, a context-length overflow a counted failure with its reason. They are kept small:
the model evaluates ~130 prompt tokens/s and generates ~25 tokens/s on a busy 2-core machine.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import load_records
from rankwise.llm.cache import ResponseCache
from rankwise.llm.client import CallPolicy, Endpoint, response_format_body
from rankwise.llm.cost import Prices
from rankwise.llm.local import LocalServerError, local_server
from rankwise.llm.parse import verdict_schema
from rankwise.relevance.agreement import agreement
from rankwise.relevance.llm_judge import Judge, JudgeCase, JudgeUnit, PromptSettings
from rankwise.workflows.demo import llm_demo_seconds, run_llm_demo

N_CTX = 2048  # room for every prompt here (< 1,000 tokens), and a chunk of 12,000 characters overflows it
TAKES = "json_object+schema"  # llama-cpp-python 0.3.36 refuses json_schema (a 500) and turns a json_object schema into a grammar

QUESTION = "When did the Kestrel observatory open?"
REFERENCE = "The Kestrel observatory opened in 1921."
CHUNKS = ["The Kestrel observatory opened to the public in 1921 on the northern ridge.",
          "The valley is known for its apple orchards and its autumn fair."]


@pytest.fixture(scope="session")
def local():
    try:
        # one thread for prompts too (llama.cpp's default is every core for them): under make test
        # the other worker has the other core, and a second thread spins waiting for it (-7
        # CPU-seconds on this file)
        srv = local_server(n_ctx=N_CTX, timeout=180, extra_args=["--n_threads_batch", "1"])
    except LocalServerError as exc:
        pytest.fail(f"{exc} (make test installs it: scripts/setup.sh --test)")
    with srv:
        yield srv


def _judge(local, tmp_path, *, prices=None, cache="c.sqlite", **settings):
    return Judge(Endpoint(local.model, local.base_url, "unused"), PromptSettings(**settings),
                 CallPolicy(concurrency=1, timeout=120, max_retries=1), ResponseCache(tmp_path / cache), prices)


def _post(local, body):
    """One raw request to the server (not through rankwise): what it reports, to hold our counts to.
    """
    req = urllib.request.Request(local.base_url + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=120) as resp:
        return json.loads(resp.read())


# what a reply template once showed as the reason, and how the prompts now describe it: a reason
# equal to one of them is the model copying the prompt, not a reason (issue 38, item 6)
TEMPLATE_REASONS = {"<one short sentence>", "<a brief sentence>", "what in the chunk decided it, in a few words of your own",
                    "what in that chunk decided it, in a few words of your own"}


def _own_words(reason):
    """A reason of the model's own: not empty, not a text of the reply template."""
    assert reason and reason.strip(" .").lower() not in TEMPLATE_REASONS, f"the template's text as a reason: {reason!r}"


def _settled(verdicts):
    """Every chunk ends ok (a verdict and a reason of its own) or failed (with why): nothing
    silently dropped."""
    for v in verdicts:
        assert v.status in ("ok", "failed"), v
        if v.status == "ok":
            assert v.verdict in (0, 1) and isinstance(v.reason, str | type(None)) and v.error is None
            if v.reason is not None:
                _own_words(v.reason)
        else:
            assert v.error and v.verdict is None


def test_judge_single_binary_with_reference(local, tmp_path):
    """Per-chunk prompts: the endpoint's response_format found and remembered, every reply parsed,
    the tokens and the cost those the server reported."""
    prices = Prices(1.0, 2.0)
    judge = _judge(local, tmp_path, prices=prices, mode="reference")
    case = JudgeCase("q1", QUESTION, CHUNKS, REFERENCE)
    r = judge.run([case])
    s = r.summary
    _settled(r.verdicts["q1"])
    # the server grammar-constrains every reply to the verdict schema (json_object+schema), so a
    # chunk that fails to parse means rankwise sent the schema wrong or misread a valid reply
    assert s.ok == 2 and s.failed == 0 and s.missing == 0, [v.error for v in r.verdicts["q1"]]
    # the first request, asking json_schema, was refused (HTTP 500 naming response_format) once;
    # then every call asked json_object + schema
    assert s.response_format == TAKES and s.requests == 1 + 2 + s.repairs + s.fresh_calls
    memory = json.loads((tmp_path / "rankwise-endpoints.json").read_text())
    assert list(memory.values())[0]["response_format"] == TAKES
    if s.repairs == 0 and s.failed == 0:  # one call per chunk: the summary is the sum of the verdicts' own
        assert s.prompt_tokens == sum(v.prompt_tokens for v in r.verdicts["q1"]) > 0
        assert s.completion_tokens == sum(v.completion_tokens for v in r.verdicts["q1"]) > 0
    assert s.cost == pytest.approx((s.prompt_tokens * 1.0 + s.completion_tokens * 2.0) / 1e6)
    # the first chunk's request sent by hand: the server reports the prompt tokens rankwise counted
    # for it
    body = {"model": local.model, "messages": judge.messages(JudgeUnit(case, [0], False)), "max_tokens": 1,
            "temperature": 0.0, "response_format": response_format_body(TAKES, verdict_schema(False))}
    raw = _post(local, body)["usage"]
    first = r.verdicts["q1"][0]
    if first.status == "ok" and s.repairs == 0:
        assert raw["prompt_tokens"] == first.prompt_tokens
    assert raw["prompt_tokens"] > 100
    # the next run on this endpoint (the memory is beside the cache: same folder, another cache, so
    # the chunk is asked again; the same prompt as the one sent by hand, so the server reuses it
    # whole) starts at the remembered level: no refused request
    again = _judge(local, tmp_path, cache="c2.sqlite", mode="reference").run([JudgeCase("q2", QUESTION, CHUNKS[:1],
                                                                                       REFERENCE)])
    a = again.summary
    assert a.response_format == TAKES and a.ok == 1, again.verdicts  # constrained: parsed, else a rankwise bug
    assert a.requests == 1 + a.repairs + a.fresh_calls  # no refused json_schema probe this time


def test_context_overflow_is_a_counted_failure_and_the_rest_is_judged(local, tmp_path):
    """A chunk too long for the model's context: failed at once with the server's reason (no retry,
    no run abort); in a batch, the batch falls back to per-chunk calls and the chunk that fits is
    judged. (Right after the test above: the chunk that fits is the prompt the server evaluated
    last, so it is reused whole.)"""
    huge = "The observatory archive lists every visitor by name. " * 230  # 12,000+ characters
    judge = _judge(local, tmp_path, mode="reference", batch=True)
    started = time.monotonic()
    r = judge.run([JudgeCase("q1", QUESTION, [CHUNKS[0], huge], REFERENCE)])
    s = r.summary
    small, big = r.verdicts["q1"]
    assert small.status == "ok" and big.status == "failed"
    assert big.error.startswith("context length exceeded: the server said: ")
    assert f"the chunk is {len(huge):,} characters" in big.error and "cutting nothing" in big.error
    assert s.failures == {"context length exceeded": 1} and s.retries == 0 and s.batch_fallbacks == 1
    assert s.http_errors.get("context length", 0) == 2  # the batch call and the chunk's own call
    assert time.monotonic() - started < 60


def _testset(path: Path, chunks, *, reference=REFERENCE) -> Path:
    row = {"id": "q1", "user_input": QUESTION, "reference": reference, "retrieved_contexts": list(chunks)}
    path.write_text(json.dumps(row) + "\n")
    return path


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_judge_batched_graded_without_reference_writes_records(local, tmp_path):
    """One batch prompt (question mode: no reference), graded: the records hold a grade or a failure
    per chunk."""
    ts = _testset(tmp_path / "ts.jsonl", CHUNKS)
    r = _cli("judge", ts, "--mode", "question", "--graded", "--batch", "--model", local.model, "--base-url",
             local.base_url, "--cache", tmp_path / "c.sqlite", "--records", tmp_path / "out.jsonl", "--timeout", 120,
             "--concurrency", 1, "--price-in", 1, "--price-out", 2, "--quiet")
    assert r.exit_code == 0, r.output
    (rec,) = load_records(tmp_path / "out.jsonl")
    got = [c.verdicts["llm"] for c in rec.chunks]
    assert len(got) == 2
    for v in got:  # a batch reply constrained to exactly 2 graded items: a failure is rankwise's, not the model's
        assert v.status == "ok" and v.grade in (0, 1, 2, 3), v.error
    assert "judged 2 chunks of 1 case with gemma-3-270m" in r.output
    assert "; 1 batch calls, " in r.output  # one batch call (falling back per chunk if its count was wrong)
    assert "replies asked as json_object+schema: the endpoint refused json_schema" in r.output


def test_answer_cuts_to_max_context_tokens_and_says_what_was_cut(local, tmp_path):
    """`rankwise answer`: the context is cut to --max-context-tokens (so the prompt fits), the
    records say what was cut, and the answer's tokens are counted."""
    long = "The observatory was built of granite blocks from the old quarry. " * 40
    ts = _testset(tmp_path / "ts.jsonl", [CHUNKS[0], long, CHUNKS[1]])
    r = _cli("answer", ts, "-k", 3, "--max-context-tokens", 120, "--model", local.model, "--base-url",
             local.base_url, "--cache", tmp_path / "c.sqlite", "--records", tmp_path / "a.jsonl", "--timeout", 120,
             "--max-tokens", 16, "--quiet")  # a 16-token answer: the model would otherwise ramble to 256
    assert r.exit_code == 0, r.output
    (rec,) = load_records(tmp_path / "a.jsonl")
    info = rec.extra["answer"]
    assert info["fed_ranks"] == [1, 2] and info["truncated"]["rank"] == 2
    assert info["truncated"]["dropped_ranks"] == [3] and 0 < info["truncated"]["kept_chars"] < len(long)
    assert info["status"] == "ok", info.get("error")  # a free-text answer has nothing to parse: a failure is ours
    assert (rec.response or "").strip()


def test_utility_verdicts_per_chunk(local, tmp_path):
    """`rankwise utility`: one answer per chunk alone, scored against the reference: a verdict or a
    failure each."""
    ts = _testset(tmp_path / "ts.jsonl", CHUNKS[:1])
    r = _cli("utility", ts, "--model", local.model, "--base-url", local.base_url, "--cache", tmp_path / "c.sqlite",
             "--records", tmp_path / "u.jsonl", "--score", "f1", "--timeout", 120, "--max-tokens", 16, "--quiet")
    assert r.exit_code == 0, r.output
    (rec,) = load_records(tmp_path / "u.jsonl")
    for chunk in rec.chunks:
        v = chunk.verdicts["utility"]
        # a free-text answer scored by token F1 cannot fail to parse: a failure here is a transport
        # or scoring bug in rankwise
        assert v.status == "ok", v.error
        assert v.verdict in (0, 1) and isinstance(v.meta["answer"], str)
        assert 0.0 <= v.meta["answer_score"] <= 1.0


def test_llm_reranker_in_a_run(local, tmp_path):
    """`rankwise run --rerank llm:MODEL`: one grade call per pair, parsed or counted failed, then
    cached."""
    from rankwise.datasets import bundled_files

    files = bundled_files("kestrel")
    first = json.loads(Path(files.questions).read_text().splitlines()[0])
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": first["id"], "text": first["question"]}) + "\n")
    args = ["run", "--corpus", files.corpus, "--queries", queries, "--chunk-size", 300, "--rerank",
            f"llm:{local.model}", "--rerank-top-n", 2, "--base-url", local.base_url, "--depth", 2, "--quiet"]
    env = {"RANKWISE_CACHE": str(tmp_path / "c.sqlite")}
    r = CliRunner().invoke(main, [str(a) for a in [*args, "--out", tmp_path / "a.jsonl"]], env=env)
    assert r.exit_code == 0, r.output
    import re

    m = re.search(r"LLM rerank \(gemma-3-270m\): 2 pairs, (\d+) calls, 0 from the cache .*, (\d) failed", r.output)
    assert m and int(m.group(1)) >= 2, r.output  # each pair graded (+ the refused json_schema probe, repairs)
    again = CliRunner().invoke(main, [str(a) for a in [*args, "--out", tmp_path / "b.jsonl"]], env=env)
    # grades are constrained to the schema: a failed pair means rankwise broke the request or the
    # reading
    assert int(m.group(2)) == 0, r.output
    assert again.exit_code == 0, again.output
    assert "2 pairs, 0 calls, 2 from the cache" in again.output


def test_synth_locates_references_as_spans(local, tmp_path):
    """`synth`: each planned sample is accepted (its references found as exact spans of its
    document) or rejected with a reason; none is lost."""
    from rankwise.data.corpus import load_corpus
    from rankwise.datasets import bundled_files
    from rankwise.testsets.synth_run import SynthSettings, synth

    corpus = load_corpus(bundled_files("kestrel").corpus)
    out = tmp_path / "ts.jsonl"
    s = synth(corpus, out=out, model=local.model, base_url=local.base_url, cache=tmp_path / "c.sqlite",
              timeout=120.0, max_retries=1, settings=SynthSettings(n=2, passage_chars=400, max_tokens=160, seed=3))
    assert s.accepted + sum(s.rejected.values()) == s.planned == 2
    assert s.calls >= 2 and s.prompt_tokens > 0
    # llama.cpp reports the prompt tokens it took from its cache (timings.cache_n); the JSON summary
    # carries them as the judge's does (before: no such field)
    assert s.to_dict()["cached_prompt_tokens"] == s.cached_prompt_tokens <= s.prompt_tokens
    docs = {d.id: d.text for d in corpus}
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    assert len(rows) == s.accepted
    for row in rows:
        for ref in row["reference_contexts"]:
            assert docs[ref["doc_id"]][ref["start"]:ref["end"]] == ref["text"]
    rejected = Path(s.rejected_out) if s.rejected_out else None
    if sum(s.rejected.values()):
        reasons = [json.loads(line)["reason"] for line in rejected.read_text().splitlines()]
        assert len(reasons) == sum(s.rejected.values()) and all(reasons)


# ---------------------------------------------------------------- rankwise demo --judge local (same
# server) These check the demo's pipeline, not the model's wisdom: every chunk of the slice ends
# judged or counted as failed, the agreement compares exactly the chunks both sources judged, the
# metrics under the span labels are the ones eval-rag gives, the records and the summary hold what
# was printed, and a rerun is answered from the cache without starting the server.
@pytest.fixture(scope="module")
def local_llm(local):
    return local


@pytest.fixture(scope="module")
def demo_run(local_llm, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-llm")
    said: list[str] = []
    result = run_llm_demo(out, questions=1, k=2, quiet=False, announce=said.append, server=local_llm)
    return out, result, said


def test_llm_demo_judges_every_chunk_of_the_slice(demo_run):
    out, result, said = demo_run
    s = result.summary
    assert (s.cases, s.chunks) == (1, 2)
    assert s.ok == 2 and s.failed == 0 and s.missing == 0  # constrained replies: each chunk parsed
    assert s.requests >= s.ok  # one request per verdict at least (pointwise), repairs on top
    assert s.prompt_tokens > 0 and s.completion_tokens > 0
    assert said == [f"judging 2 chunks (1 question x top 2) with the local model: about "
                    f"{llm_demo_seconds(2):.0f} s on an idle 2-core machine (4 s per verdict measured there, "
                    f"plus the server's start); longer under load: the bar shows the time left"]
    records = load_records(out / "judge-local" / "records.jsonl")
    for chunk in (c for r in records for c in r.chunks):
        _own_words(chunk.verdicts["llm"].reason)  # every reason the model's own, none the template's text


def test_llm_demo_agreement_and_metrics_are_the_records_own(demo_run):
    from rankwise.metrics.rag import evaluate_rag

    out, result, _ = demo_run
    records = load_records(out / "judge-local" / "records.jsonl")
    assert [sorted(c.verdicts) for r in records for c in r.chunks] == [["llm", "span"]] * 2
    again = agreement(records, "span", "llm")
    assert again.to_dict() == result.agreement.to_dict()
    assert result.agreement.n == result.summary.ok  # every judged chunk compared, the failed ones counted
    assert sum(result.agreement.skipped.values()) == result.summary.failed
    span = evaluate_rag(records, "span", k=[2], metrics=["precision@2", "ndcg@2"])
    assert math.isclose(result.effects["precision@2"]["span"], span.mean["precision@2"], abs_tol=1e-12)
    assert math.isclose(result.effects["ndcg@2"]["span"], span.mean["ndcg@2"], abs_tol=1e-12)
    for row in result.effects.values():
        assert math.isclose(row["verdict_effect"], row["llm"] - row["span"], abs_tol=1e-12)
    summary = json.loads((out / "judge-local" / "summary.json").read_text())
    assert summary["agreement"]["n"] == result.agreement.n and summary["sentence"] == result.sentence
    assert "270M-parameter" in result.sentence


def test_llm_demo_cli_rerun_is_answered_from_the_cache(demo_run):
    out, result, _ = demo_run
    args = ["demo", "--judge", "local", "--questions", "1", "-k", "2", "--out", str(out), "--force"]
    done = CliRunner().invoke(main, args)  # in-process; the real console script's streams: the --quiet run below
    assert done.exit_code == 0, done.output
    assert "not started: every verdict was in the cache" in done.stdout
    assert f"verdicts: {result.summary.ok} ok ({result.summary.ok} from cache, 0 new)" in done.stdout
    assert "agreement of llm with span: " in done.stdout and "270M-parameter" in done.stdout
    assert "judging 2 chunks (1 question x top 2)" in done.stderr  # the estimate, before the run
    quiet = subprocess.run([sys.executable, "-m", "rankwise.cli", *args, "--quiet"], capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == ""


_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def test_chunks_of_one_question_reuse_the_servers_prompt_prefix(local_llm):
    """Prefix caching, measured by the server itself (its log): the second chunk of a question
    evaluates little more than the chunk, because everything before it (system prompt, instructions,
    question, reference) is the first request's prefix. With the old layout (the reply format after
    the chunk, a fence id hashed over the chunk too) the question and reference were evaluated
    again."""
    from rankwise.llm.client import CallPolicy, Endpoint
    from rankwise.relevance.llm_judge import Judge, JudgeCase, PromptSettings

    question = "Which setting controls how long the write-ahead log waits before grouping commits?"
    reference = "wal.group_commit_window_ms sets how long commits wait to share a single fsync."
    chunks = ["The group commit window is set with wal.group_commit_window_ms.", "Backups run nightly."]
    judge = Judge(Endpoint(local_llm.model, local_llm.base_url, "unused"), PromptSettings(mode="reference"),
                  CallPolicy(concurrency=1, timeout=300.0))
    start = local_llm.log_path.stat().st_size
    result = judge.run([JudgeCase("q1", question, chunks, reference)])
    assert result.summary.ok == 2  # (plus one refused request when the server first refuses json_schema)
    log = local_llm.log_path.read_bytes()[start:].decode("utf-8", "replace")
    evaluated = [int(m.group(1)) for m in _EVAL.finditer(log)]  # one per request the model served
    hits = [(int(m.group(1)), int(m.group(2))) for m in _HIT.finditer(log)]
    assert len(evaluated) == 2
    whole = hits[-1][0] + hits[-1][1]  # the second prompt's length in tokens: reused + evaluated
    assert whole > 250
    assert evaluated[1] == hits[-1][1] <= 40, (hits, evaluated)  # the chunk, its closing tags, the turn's end


# ------------------------------------------------------------------- rankwise judge-check (same
# server)
def test_judge_check_with_the_real_model_end_to_end(local, shared_data, tmp_path):
    """`rankwise judge-check` judging a Cranfield sample with the real model: its numbers will be
    poor (a 270M model); what is checked is the kit's arithmetic on what the model said — the kappa
    from the printed confusion matrix, tau from the printed per-system means (scipy), and every
    sampled pair labelled (the replies are grammar-constrained JSON: a pair left unlabelled is
    rankwise's fault)."""
    from scipy import stats

    from _synthetic_runs import qrels_dict, system_run, write_trec

    cran = shared_data / "cranfield"
    qrels = qrels_dict(cran / "qrels" / "test.tsv")
    runs = []
    for name, strength in (("weak", 0.3), ("mid", 1.0), ("strong", 3.0)):
        runs.append(tmp_path / f"{name}.trec")
        write_trec(system_run(qrels, strength=strength, seed=len(runs)), runs[-1], name)
    r = _cli("judge-check", cran / "qrels" / "test.tsv", *runs, "--beir", cran, "--topics", 3, "--per-grade", 1,
             "--model", local.model, "--base-url", local.base_url, "--api-key", "unused", "--cache",
             tmp_path / "c.sqlite", "--timeout", 120, "--concurrency", 1, "--resamples", 200, "--format", "json",
             "--quiet")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["judge"]["ok"] == out["judge"]["pairs"] == out["labels"]["n"] > 0
    (a, b), (c, d) = out["labels"]["confusion"]  # rows: human 0/1, columns: judge 0/1
    n = a + b + c + d
    po, pe = (a + d) / n, ((a + b) * (a + c) + (c + d) * (b + d)) / n ** 2
    if pe < 1:
        assert out["labels"]["kappa"] == pytest.approx((po - pe) / (1 - pe))
    else:  # one class on both sides: kappa undefined, and said so
        assert out["labels"]["kappa"] is None
    s = out["systems"]
    names = sorted(s["human_means"])
    tau = stats.kendalltau([s["human_means"][k] for k in names], [s["judge_means"][k] for k in names]).statistic
    if tau == tau:  # scipy gives NaN where ours is None (a constant order)
        assert s["tau"] == pytest.approx(tau)
    else:
        assert s["tau"] is None


# ------------------------------------------------------------------- rankwise judge-retest (same
# server)
def test_judge_retest_with_the_real_model(local, tmp_path):
    """`rankwise judge-retest` with the real model, two questions of two chunks, once each: every
    verdict had (the replies are grammar-constrained JSON, the reworded prompt's too: a verdict not
    had is rankwise's fault), the requests the sum of the judgings' chunks (the probe judges only
    the chunks the baseline called irrelevant), the flip counts within the pairs, and the same
    command again answered from the cache alone."""
    ts = tmp_path / "ts.jsonl"
    ts.write_text("".join(json.dumps({"id": f"q{i}", "question": QUESTION, "reference": REFERENCE,
                                      "retrieved_contexts": CHUNKS[::1 - 2 * i]}) + "\n" for i in range(2)))
    args = ["judge-retest", ts, "--model", local.model, "--base-url", local.base_url, "--api-key", "unused",
            "--cache", tmp_path / "c.sqlite", "--timeout", 120, "--concurrency", 1, "-k", 1, "--conditions",
            "repeat,paraphrase,claim", "--resamples", 100, "--format", "json", "--quiet"]
    r = _cli(*args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    j = out["judge"]
    assert j["failed"] == j["missing"] == 0 and j["ok"] == j["verdicts"]
    repeat, paraphrase = out["conditions"]
    claim = out["probes"][0]
    assert repeat["pairs"] == paraphrase["pairs"] == 4 and claim["pairs"] <= 4
    assert j["verdicts"] == 4 + 4 + 4 + claim["pairs"] and j["cached"] == 0
    assert j["requests"] >= j["verdicts"]  # one call per verdict, and the server's refusal of json_schema once
    for f in (repeat, paraphrase, claim):
        assert f["flips"] == f["up"] + f["down"] <= f["pairs"]
        if f["pairs"]:
            assert f["rate"] == pytest.approx(f["flips"] / f["pairs"])
    assert j["prompts"]["paraphrase"].startswith("reference-binary-vparaphrase-1+")
    again = json.loads(_cli(*args).stdout)
    assert again["judge"]["requests"] == 0 and again["conditions"] == out["conditions"]
