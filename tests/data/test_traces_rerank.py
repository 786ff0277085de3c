"""A reranker in the trace (an OpenInference RERANKER span, written by
openinference-instrumentation-llama-index for a LlamaIndex node postprocessor): the case's list is
the reranker's output, its input is the first stage, and ``eval-rag --first-stage`` classes the
cases the reranker pushed out of the top K (docs/failures.md)."""

from __future__ import annotations

import json

import pytest

from _extras import need
from _inprocess import run_cli
from _traces import instrumented, kestrel_llamaindex, kestrel_questions, write_console

need("openinference.instrumentation.llama_index")

N_QUESTIONS, K, TOP_N = 20, 3, 3


def reversing_reranker(top_n: int):
    """A LlamaIndex node postprocessor that reverses the retrieved list and keeps ``top_n``: a
    reranker that demotes what the first stage ranked high. It reports itself as LlamaIndex's own
    rerankers do (ReRank events in a dispatcher span), so the instrumentor writes a RERANKER span.
    """
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    dispatcher = get_dispatcher("rankwise.tests.reranker")

    class Reversing(BaseNodePostprocessor):
        top_n: int = 3

        @classmethod
        def class_name(cls) -> str:
            return "Reversing"

        @dispatcher.span
        def _postprocess_nodes(self, nodes, query_bundle=None):
            dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name="reverse"))
            out = list(reversed(nodes))[: self.top_n]
            dispatcher.event(ReRankEndEvent(nodes=out))
            return out

    return Reversing(top_n=top_n)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers import get_response_synthesizer
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    from rankwise.datasets import bundled_files

    work = tmp_path_factory.mktemp("rerank")
    questions = kestrel_questions()[:N_QUESTIONS]
    (work / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    from llama_index.core import Settings

    previous, Settings.llm = Settings._llm, MockLLM()  # no model answers: the retrieved list is the point
    try:
        synthesizer = get_response_synthesizer(response_mode="no_text")
    finally:
        Settings._llm = previous
    engine = RetrieverQueryEngine(kestrel_llamaindex(10), response_synthesizer=synthesizer,
                                  node_postprocessors=[reversing_reranker(TOP_N)])
    with instrumented(LlamaIndexInstrumentor, seed=34) as exporter:
        for q in questions:
            engine.query(q["question"])
    write_console(exporter.get_finished_spans(), work / "trace.json")
    done = run_cli(["import-traces", work / "trace.json", "--testset", work / "questions.jsonl", "--corpus",
                    bundled_files("kestrel").corpus, "-o", work / "after.jsonl", "--first-stage", work / "before.jsonl"])
    assert done.returncode == 0, done.stderr
    return work, done


def _lists(path):
    return {row["id"]: [c["id"] for c in row["retrieved_contexts"]]
            for row in map(json.loads, path.read_text().splitlines())}


def test_the_case_list_is_the_rerankers_output_and_its_input_the_first_stage(traced):
    work, done = traced
    after, before = _lists(work / "after.jsonl"), _lists(work / "before.jsonl")
    assert len(after) == len(before) == N_QUESTIONS
    for case, ids in after.items():
        assert len(before[case]) == 10 and ids == list(reversed(before[case]))[:TOP_N], case
    assert f"before.jsonl: {N_QUESTIONS} cases' lists before reranking" in done.stdout


def test_eval_rag_classes_the_cases_the_reranker_demoted(traced):
    from rankwise.metrics.rag import evaluate_rag

    work, _ = traced
    out = run_cli(["eval-rag", work / "after.jsonl", "-r", "span", "-k", str(K), "--first-stage", work / "before.jsonl",
                   "--format", "json", "--quiet"])
    assert out.returncode == 0, out.stderr
    classes = json.loads(out.stdout)["summary"]["failure_classes"]
    # by hand: a relevant chunk within K before the reranker, none within K after it
    before = evaluate_rag(str(work / "before.jsonl"), "span", metrics=[f"hit_rate@{K}"]).per_query
    after = evaluate_rag(str(work / "after.jsonl"), "span", metrics=[f"hit_rate@{K}"]).per_query
    demoted = sorted(q for q in after if after[q][f"hit_rate@{K}"] == 0 and before[q][f"hit_rate@{K}"] == 1)
    assert demoted, "the planted reranker demotes some case"
    assert sorted(q for q, c in classes["by_case"].items() if c == "demoted by the reranker") == demoted
    without = json.loads(run_cli(["eval-rag", work / "after.jsonl", "-r", "span", "-k", str(K), "--format", "json",
                                  "--quiet"]).stdout)["summary"]["failure_classes"]
    assert without["counts"]["demoted by the reranker"] == 0  # only the first stage tells a demotion apart
