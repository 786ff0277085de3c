"""rankwise in MLflow, against a real local tracking store (SQLite in a temp folder, artifacts in
another): what ``rankwise.mlflow.log`` and ``--mlflow`` logged is read back, and
``mlflow.genai.evaluate`` with rankwise scorers on traces with RETRIEVER spans returns
``evaluate_rag``'s numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

import rankwise
from _extras import need
from rankwise.cli import main

mlflow = None  # the module, imported by the fixture below: at module level collection would pay its ~5 s import


@pytest.fixture(scope="module", autouse=True)
def _mlflow():
    global mlflow
    mlflow = need("mlflow", reason="rankwise[mlflow]")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite tracking store for the module (creating its tables takes seconds), artifacts in a
    temp folder; every test gets its own experiment. The tracking URI is restored afterwards."""
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    yield {"uri": uri, "root": root, "client": client}
    mlflow.set_tracking_uri(before)


@pytest.fixture
def experiment(store, request, monkeypatch):
    """An experiment of this test, its artifacts under the store's temp folder; MLFLOW_TRACKING_URI
    set."""
    name = request.node.name[:200]
    store["client"].create_experiment(name, artifact_location=(store["root"] / "artifacts" / name).as_uri())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    mlflow.set_tracking_uri(store["uri"])
    mlflow.set_experiment(name)  # the caller's own active experiment (rankwise's logging leaves it as it is)
    return name


def _only_run(store, experiment: str, *, parent: bool = True):
    exp = store["client"].get_experiment_by_name(experiment)
    runs = store["client"].search_runs([exp.experiment_id])
    tops = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(tops) == 1, [r.info.run_name for r in runs]
    return tops[0], runs


def _artifacts(store, run_id: str, path: str | None = None) -> list[str]:
    return sorted(a.path for a in store["client"].list_artifacts(run_id, path))


def test_log_a_rag_result_reads_back(store, experiment):
    result = rankwise.evaluate_rag(EXAMPLES / "rich_testset.jsonl", relevance="span", k=(1, 3))
    run_id = rankwise.mlflow.log(result, experiment=experiment, run_name="rich")
    run = store["client"].get_run(run_id)
    assert run.data.metrics == {rankwise.mlflow.mlflow_name(m): v for m, v in result.mean.items()}
    assert run.data.metrics["ndcg_at_3"] == result.mean["ndcg@3"] and "wcp_at_3" in run.data.metrics
    params = run.data.params
    assert params["verdict_source"] == "span" and params["r_basis"] == "reference passages"
    assert params["cutoffs"] == "1,3" and params["cases"] == "6" and params["unscorable"] == "1"
    assert _artifacts(store, run_id) == ["per_query.json", "per_query.parquet", "records"]
    assert _artifacts(store, run_id, "records") == ["records/records.jsonl"]
    table = mlflow.load_table("per_query.parquet", run_ids=[run_id])
    assert list(table["query_id"]) == list(result.per_query.query_ids)
    assert list(table["ndcg@3"]) == result.per_query.column("ndcg@3").tolist()  # every digit
    shown = mlflow.load_table("per_query.json", run_ids=[run_id])  # MLflow's table view: 10 digits
    assert list(shown["ndcg@3"]) == pytest.approx(result.per_query.column("ndcg@3").tolist(), abs=1e-9)


def test_judge_model_and_prompt_version_are_parameters(store, experiment, srv, tmp_path):
    from rankwise.data.records import records_from_testset
    from rankwise.data.testset import load_testset
    from rankwise.relevance.llm_judge import judge_records

    records = records_from_testset(load_testset(EXAMPLES / "ragas_testset.jsonl"))
    summary = judge_records(records, model="judge-test", base_url=srv.base_url, cache=tmp_path / "c.sqlite")
    result = rankwise.evaluate_rag(records, relevance="llm", k=(1, 3))
    run = store["client"].get_run(rankwise.mlflow.log(result, experiment=experiment))
    assert run.data.params["judge_model"] == "judge-test"
    assert run.data.params["judge_prompt_version"] == summary.prompt_version
    assert run.data.params["verdict_source"] == "llm"
    assert run.data.metrics["precision_at_3"] == result.mean["precision@3"]


def test_eval_command_logs_the_same_numbers(store, experiment, shared_data):
    qrels, run = shared_data / "trec_eval" / "qrels.test", shared_data / "trec_eval" / "results.test"
    out = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "ndcg@10,map,P@5", "--mlflow",
                                    "--mlflow-experiment", experiment])
    assert out.exit_code == 0, out.output
    logged, _ = _only_run(store, experiment)
    assert f"rankwise: logged to MLflow run {logged.info.run_id} (experiment {experiment})" in out.stderr
    expected = rankwise.evaluate(qrels, run, ["ndcg@10", "map", "P@5"]).mean
    assert logged.data.metrics == {"ndcg_at_10": expected["ndcg@10"], "map": expected["map"],
                                   "precision_at_5": expected["precision@5"]}
    assert logged.data.params["cutoffs"] == "5,10" and logged.data.tags["rankwise.kind"] == "eval"
    table = mlflow.load_table("per_query.parquet", run_ids=[logged.info.run_id])
    assert len(table) == len(rankwise.evaluate(qrels, run, ["map"]).per_query.query_ids)


def test_compare_rag_logs_means_deltas_table_and_report(store, experiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = [json.loads(line) for line in (EXAMPLES / "rich_testset.jsonl").read_text().splitlines()]
    for case in cases:
        case["retrieved_contexts"] = case["retrieved_contexts"][::-1]
    Path("reordered.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    out = CliRunner().invoke(main, ["compare-rag", str(EXAMPLES / "rich_testset.jsonl"), "reordered.jsonl",
                                    "--source", "span", "-m", "ndcg@3,recall@3", "--html", "report.html",
                                    "--mlflow-uri", store["uri"], "--mlflow-experiment", experiment])
    assert out.exit_code == 0, out.output
    logged, _ = _only_run(store, experiment)
    from rankwise.analysis.compare import compare_records, load_record_sets

    sets = load_record_sets([EXAMPLES / "rich_testset.jsonl", "reordered.jsonl"], source="span")
    cmp = compare_records(sets, "span", ["ndcg@3", "recall@3"])
    m = logged.data.metrics
    assert m["rich_testset.ndcg_at_3"] == cmp.means["rich_testset"]["ndcg@3"]
    assert m["reordered.ndcg_at_3.delta"] == cmp.comparison("reordered", "ndcg@3").delta
    assert m["reordered.ndcg_at_3.p_value"] == cmp.comparison("reordered", "ndcg@3").p_value
    assert logged.data.params["verdict_source"] == "span" and logged.data.params["baseline"] == "rich_testset"
    assert _artifacts(store, logged.info.run_id, "report") == ["report/report.html"]
    assert _artifacts(store, logged.info.run_id, "records") == ["records/reordered.jsonl", "records/rich_testset.jsonl"]
    table = mlflow.load_table("per_query.parquet", run_ids=[logged.info.run_id])
    # 5 cases per system: colours has no ground truth, left out of the means (--unscorable skip, the
    # default)
    assert sorted(set(table["system"])) == ["reordered", "rich_testset"] and len(table) == 10


def test_gate_logs_its_verdict(store, experiment, tmp_path, monkeypatch):
    from integrations.test_integrations_pytest import _write_inputs

    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["gate", "--baseline", "base.trec", "--candidate", "worse.trec", "--qrels",
                                    "qrels.txt", "-m", "ndcg@10", "--min", "recall@10=0.5", "--mlflow",
                                    "--mlflow-experiment", experiment])
    assert out.exit_code == 1, out.output
    logged, _ = _only_run(store, experiment)
    m = logged.data.metrics
    assert m["gate_passed"] == 0.0 and m["ndcg_at_10.failed"] == 1.0 and m["recall_at_10.failed"] == 0.0
    assert m["ndcg_at_10.baseline"] == 1.0 and round(m["ndcg_at_10.delta"], 4) == -0.2277
    assert m["ndcg_at_10.ci_low"] < m["ndcg_at_10.delta"] < m["ndcg_at_10.ci_high"] < 0
    assert logged.data.params["max_drop"] == "0.01" and logged.data.params["floors"] == '{"recall@10": 0.5}'
    worst = mlflow.load_table("worst_queries.parquet", run_ids=[logged.info.run_id])
    assert list(worst["query_id"])[:2] == ["q00", "q01"] and round(float(worst["delta"][0]), 4) == -0.5693


def test_sweep_logs_one_child_run_per_configuration(store, experiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["sweep", "--retriever", "bm25", "--chunk-size", "300,600", "--overlap", "0",
                                    "--depth", "5", "--out", "sw", "--quiet", "--mlflow", "--mlflow-experiment",
                                    experiment])
    assert out.exit_code == 0, out.output
    parent, runs = _only_run(store, experiment)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    saved = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert sorted(r.info.run_name for r in children) == sorted(row["label"] for row in saved["rows"])
    metric = saved["metrics"][0]
    for child in children:
        row = next(r for r in saved["rows"] if r["label"] == child.info.run_name)
        assert child.data.metrics[rankwise.mlflow.mlflow_name(metric)] == row[metric]
        assert child.data.params["chunk_size"] == str(row["chunk_size"])
        assert _artifacts(store, child.info.run_id, "records")
    assert _artifacts(store, parent.info.run_id, "report") == ["report/report.html"]
    assert parent.data.params["configurations"] == "2"


CORPUS = {"d1": "Paris is the capital of France.", "d2": "Rome is the capital of Italy.",
          "d3": "Berlin is the capital of Germany.", "d4": "Madrid is the capital of Spain.",
          "d5": "Capitals of Europe, a list."}
RANKED = {"capital of France?": ["d5", "d1", "d2"], "capital of Germany?": ["d3", "d5"],
          "capital of Spain?": ["d2", "d5", "d1"], "capital of Italy?": ["d2"]}
GOLD = {"capital of France?": ["d1"], "capital of Germany?": ["d3"], "capital of Spain?": ["d4"],
        "capital of Italy?": ["d2", "d5"]}


def test_genai_evaluate_with_rankwise_scorers_returns_evaluate_rags_numbers(store, experiment):
    from mlflow.entities import Document, SpanType

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question):
        return [Document(page_content=CORPUS[d], metadata={"doc_uri": d}, id=d) for d in RANKED[question]]

    @mlflow.trace
    def app(question):
        return retrieve(question)[0].page_content

    data, rows = [], []
    for question in RANKED:
        app(question)
        mlflow.flush_trace_async_logging()
        trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
        data.append({"trace": trace, "expectations": {"expected_retrieved_context": [{"doc_uri": d}
                                                                                      for d in GOLD[question]]}})
        rows.append({"id": trace.info.trace_id, "question": question, "reference_context_ids": GOLD[question],
                     "retrieved_contexts": [{"id": d, "doc_id": d, "text": CORPUS[d]} for d in RANKED[question]]})
    metrics = ["ndcg@10", "recall@3", "wcp@3", "mrr"]
    got = mlflow.genai.evaluate(data=data, scorers=rankwise.mlflow.scorers(metrics))
    expected = rankwise.evaluate_rag(rows, relevance="ids", metrics=metrics, id_field="doc_id")
    for m in metrics:
        name = rankwise.mlflow.mlflow_name(m)
        assert got.metrics[f"{name}/mean"] == expected.mean[m], m  # to the last digit
    # by hand: relevance by doc id, per question (France, Germany, Spain, Italy):
    #   France  d5 d1 d2 / gold d1     -> [0, 1, 0], R = 1   Germany d3 d5 / gold d3 -> [1, 0], R = 1
    #   Spain   d2 d5 d1 / gold d4     -> [0, 0, 0], R = 1   Italy   d2    / gold d2 d5 -> [1], R = 2
    w2, w3 = 1 / math.log2(3), 1 / math.log2(4)  # log discounts of ranks 2 and 3 (rank 1: 1)
    hand = {
        "ndcg@10": (w2 / 1 + 1 / 1 + 0 + 1 / (1 + w2)) / 4,  # DCG / ideal DCG of min(R, 10) relevant
        "recall@3": (1 + 1 + 0 + 1 / 2) / 4,
        "wcp@3": (w2 + 1 + 0 + 1) / (1 + w2 + w3) / 4,  # sum w_i rel_i / sum of the 3 positions' weights
        "mrr": (1 / 2 + 1 + 0 + 1) / 4,
    }
    for m, value in hand.items():
        assert got.metrics[f"{rankwise.mlflow.mlflow_name(m)}/mean"] == pytest.approx(value, abs=1e-12), m
    table = got.tables["eval_results"]
    by_trace = dict(zip(expected.per_query.query_ids, expected.per_query.column("ndcg@10").tolist(), strict=True))
    assert {t: v for t, v in zip(table["trace_id"], table["ndcg_at_10/value"], strict=True)} == by_trace
    assert not any(math.isnan(v) for v in by_trace.values())


def test_log_leaves_the_callers_tracking_uri_and_experiment_alone(store, experiment, tmp_path):
    """A notebook that logs its own runs to its own store calls rankwise.mlflow.log(...,
    tracking_uri=other): its tracking URI and active experiment are what they were, and its next run
    lands where it did before."""
    mine = f"sqlite:///{tmp_path / 'mine.db'}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    for uri, name in ((mine, "callers-own"), (other, "rankwise-side")):  # artifacts in tmp_path, not ./mlruns
        mlflow.MlflowClient(uri).create_experiment(name, artifact_location=(tmp_path / name).as_uri())
    mlflow.set_tracking_uri(mine)
    exp = mlflow.set_experiment("callers-own")
    result = rankwise.evaluate_rag(EXAMPLES / "rich_testset.jsonl", relevance="span", k=(1,))
    run_id = rankwise.mlflow.log(result, tracking_uri=other, experiment="rankwise-side")
    assert mlflow.get_tracking_uri() == mine
    assert mlflow.tracking.fluent._active_experiment_id == exp.experiment_id  # noqa: SLF001
    logged = mlflow.MlflowClient(other).get_run(run_id)
    assert mlflow.MlflowClient(other).get_experiment(logged.info.experiment_id).name == "rankwise-side"
    with mlflow.start_run() as mine_run:  # the caller's next run: its own store, its own experiment
        pass
    assert mlflow.MlflowClient(mine).get_run(mine_run.info.run_id).info.experiment_id == exp.experiment_id
    mlflow.set_tracking_uri(store["uri"])


def test_mlflow_prints_no_info_lines_on_stderr(tmp_path, shared_data):
    """``--mlflow-uri`` to a new SQLite store: MLflow creates its tables (alembic's and MLflow's
    INFO lines before this fix); the command's stderr holds rankwise's one line and nothing of
    MLflow's."""
    import subprocess
    import sys

    qrels, run = shared_data / "trec_eval" / "qrels.test", shared_data / "trec_eval" / "results.test"
    out = subprocess.run([sys.executable, "-m", "rankwise.cli", "eval", str(qrels), str(run), "-m", "map",
                          "--mlflow-uri", f"sqlite:///{tmp_path / 'new.db'}", "--mlflow-experiment", "quiet"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)  # its ./mlruns in tmp_path
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rankwise: logged to MLflow run "), out.stderr
