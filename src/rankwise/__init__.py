"""rankwise: how good is the retrieval stage of your RAG pipeline, and why.

Every capability is one call from here (imported on first use, so ``import rankwise`` stays light):

- metrics: :func:`evaluate` (trec_eval-exact), :func:`evaluate_rag` (RAG context metrics, and
  metrics over the retrieval calls of agents: :func:`merge_calls` merges them into one list),
  :func:`ksweep`;
- verdicts: :func:`judge` (an LLM judge over any OpenAI-compatible endpoint: a test set judged with
  shards, the Batch API and resume, as ``rankwise judge``; :func:`judge_records` for loaded
  records), :func:`agreement` (judge vs. human labels), :func:`utility` (the generator's own answers
  as verdicts);
- test sets and retrievers: :func:`synth`, :func:`pool`, :func:`import_testset`,
  :func:`export_testset`, :func:`run_retrieval` (BM25 / dense / hybrid / rerank),
  :func:`run_retriever` (your framework's retriever), :func:`load_traces` / :func:`import_traces`
  (what it retrieved, from OpenInference, Phoenix, LangSmith or MLflow traces), :func:`sweep`
  (chunking x retriever grid);
- judgement about the numbers: :func:`compare`, :func:`gate`, :func:`probe`, :func:`calibrate`,
  :func:`answer`, :func:`position_curve`; :func:`demo` runs the bundled tour;
- where teams work: :mod:`rankwise.testing` (``assert_no_regression``, ``assert_retrieval`` and a
  pytest plugin), :mod:`rankwise.mlflow` (``log`` a result, rankwise metrics as MLflow GenAI
  ``scorers``).

Example:
    >>> import rankwise
    >>> r = rankwise.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 0.9, "d2": 0.1}}, ["ndcg@10", "P@1"])
    >>> r.mean
    {'ndcg@10': 1.0, 'precision@1': 1.0}
    >>> callable(rankwise.judge) and callable(rankwise.sweep)
    True
"""

from __future__ import annotations

from rankwise._lazy import lazy_exports
from rankwise.errors import InputError, RankwiseError

__version__ = "0.1.0"

_EXPORTS = {
    # inputs
    "Qrels": "rankwise.data", "Run": "rankwise.data", "load_qrels": "rankwise.data", "load_run": "rankwise.data",
    "load_records": "rankwise.metrics.rag", "merge_calls": "rankwise.data.testset",
    # metrics
    "EvalResult": "rankwise.metrics", "evaluate": "rankwise.metrics", "evaluate_rag": "rankwise.metrics.rag",
    "ksweep": "rankwise.analysis.ksweep",
    # verdicts
    "judge": "rankwise.relevance.judge_run:judge_testset", "judge_records": "rankwise.relevance.llm_judge",
    "agreement": "rankwise.relevance.agreement",
    "utility": "rankwise.workflows.answer_run:utility_verdicts",
    # test sets and retrievers
    "synth": "rankwise.testsets.synth_run", "pool": "rankwise.testsets.pool_run",
    "import_testset": "rankwise.testsets.importers", "export_testset": "rankwise.testsets.importers",
    "run_retrieval": "rankwise.retrieval.pipeline", "run_retriever": "rankwise.adapters.run",
    "load_traces": "rankwise.data.traces.load", "import_traces": "rankwise.data.traces.load",
    "sweep": "rankwise.workflows.sweep_run",
    # judgement about the numbers
    "compare": "rankwise.analysis.compare", "gate": "rankwise.analysis.gate",
    "probe": "rankwise.analysis.probe:probe_records", "calibrate": "rankwise.analysis.calibrate",
    "answer": "rankwise.workflows.answer_run:answer_records",
    "position_curve": "rankwise.workflows.position_run:run_position_curve",
    "demo": "rankwise.workflows.demo:run_demo",
    # where teams work
    "testing": "rankwise.testing", "mlflow": "rankwise.mlflow",
    # a local LLM endpoint with no key (llama.cpp's server and a packaged small model)
    "local_server": "rankwise.llm.local",
}

__all__ = ["__version__", "agreement", "answer", "calibrate", "compare", "demo", "EvalResult", "evaluate",
           "evaluate_rag", "export_testset", "gate", "import_testset", "import_traces", "InputError", "judge",
           "judge_records", "ksweep", "load_qrels", "load_records", "load_run", "load_traces", "local_server",
           "merge_calls", "mlflow", "pool", "position_curve", "probe", "Qrels", "RankwiseError", "Run",
           "run_retrieval", "run_retriever", "sweep", "synth", "testing", "utility"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
