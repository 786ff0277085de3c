"""`rankwise gate`: exit 1 on a real regression, 0 on noise, 2 on bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from _synthetic_runs import jitter, qrels_dict, regress, system_run, write_trec
from rankwise.analysis.gate import gate, per_query_values
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics.evaluate import evaluate


@pytest.fixture(scope="module")
def files(shared_data, tmp_path_factory):
    """Cranfield qrels; a baseline run; the same run broken on 40% of queries; the same run with tiny noise;
    a run over only some of the queries; and saved per-query results of the first two."""
    d = tmp_path_factory.mktemp("gate")
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    base = system_run(qrels, strength=1.0, seed=5)
    out = {
        "qrels": qrels_path,
        "base": write_trec(base, d / "base.trec"),
        "regressed": write_trec(regress(base, share=0.4, seed=1), d / "regressed.trec"),
        "noise": write_trec(jitter(base, scale=0.002, seed=2), d / "noise.trec"),
    }
    runner = CliRunner()
    for name in ("base", "regressed"):
        res = runner.invoke(main, ["eval", str(qrels_path), str(out[name]), "-m", "ndcg@10,P@5,recall@100",
                                   "--format", "json", "--per-query"])
        assert res.exit_code == 0, res.output
        out[f"{name}_json"] = d / f"{name}.json"
        out[f"{name}_json"].write_text(res.output)
    partial = json.loads(out["base_json"].read_text())
    for qid in list(partial["per_query"])[:10]:
        del partial["per_query"][qid]
    out["partial_json"] = d / "partial.json"
    out["partial_json"].write_text(json.dumps(partial))
    means_only = json.loads(out["base_json"].read_text())
    del means_only["per_query"]
    out["means_json"] = d / "means.json"
    out["means_json"].write_text(json.dumps(means_only))
    return out


def run_gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def test_real_regression_fails_with_exit_1(files):
    res = run_gate("--baseline", files["base"], "--candidate", files["regressed"], "--qrels", files["qrels"],
                   "--metric", "ndcg@10", "--max-drop", "0.01")
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output and "GATE FAILED" in res.output
    assert "queries that dropped most" in res.output
    # the verdict is the library's
    g = gate(files["base"], files["regressed"], "ndcg@10", qrels=files["qrels"], max_drop=0.01)
    c = g.checks[0]
    assert c.failed and c.delta < -0.05 and c.p_value < 0.001
    assert f"{c.baseline_mean:.4f} -> {c.candidate_mean:.4f}" in res.output
    assert c.worst[0][0] in res.output
    base = evaluate(files["qrels"], files["base"], ["ndcg@10"]).per_query
    assert c.worst[0][1] == base[c.worst[0][0]]["ndcg@10"]
    assert all(w[3] < 0 for w in c.worst) and len(c.worst) == 5


def test_noise_passes_with_exit_0(files):
    res = run_gate("--baseline", files["base"], "--candidate", files["noise"], "--qrels", files["qrels"],
                   "--metric", "ndcg@10", "--metric", "P@5", "--max-drop", "0.01")
    assert res.exit_code == 0, res.output
    assert "GATE PASSED" in res.output
    g = gate(files["base"], files["noise"], ["ndcg@10", "P@5"], qrels=files["qrels"])
    assert all(abs(c.delta) < 0.01 for c in g.checks)


def test_over_budget_but_not_significant_passes():
    # one query of 10 drops by 0.5: mean drop 0.05 > budget, but a single query is no evidence
    base = {"per_query": {f"q{i}": {"ndcg@10": 0.5} for i in range(10)}}
    cand = {"per_query": {f"q{i}": {"ndcg@10": 0.5 if i else 0.0} for i in range(10)}}
    g = gate(base, cand, "ndcg@10", max_drop=0.01)
    c = g.checks[0]
    assert c.over_budget and not c.significant and not c.failed and g.exit_code == 0
    # the same drop on every query is significant
    cand_all = {"per_query": {f"q{i}": {"ndcg@10": 0.45} for i in range(10)}}
    assert gate(base, cand_all, "ndcg@10", max_drop=0.01).exit_code == 1
    # a big budget lets it through
    assert gate(base, cand_all, "ndcg@10", max_drop=0.1).exit_code == 0


def test_saved_results_work_like_runs(files):
    res = run_gate("--baseline", files["base_json"], "--candidate", files["regressed_json"], "--metric",
                   "ndcg_cut_10", "--format", "json")
    assert res.exit_code == 1, res.output
    data = json.loads(res.output)
    from_runs = gate(files["base"], files["regressed"], "ndcg@10", qrels=files["qrels"])
    assert data["checks"][0]["delta"] == from_runs.checks[0].delta
    assert data["checks"][0]["p_value"] == from_runs.checks[0].p_value
    assert data["passed"] is False
    # mixing a saved result and a run
    res = run_gate("--baseline", files["base_json"], "--candidate", files["noise"], "--qrels", files["qrels"],
                   "--metric", "recall@100")
    assert res.exit_code == 0, res.output


def test_query_mismatch_is_bad_input_unless_allowed(files):
    res = run_gate("--baseline", files["partial_json"], "--candidate", files["regressed_json"], "--metric",
                   "ndcg@10")
    assert res.exit_code == 2
    assert "different queries" in res.output and "10 only in the candidate" in res.output
    res = run_gate("--baseline", files["partial_json"], "--candidate", files["regressed_json"], "--metric",
                   "ndcg@10", "--allow-query-mismatch")
    assert res.exit_code == 1, res.output
    assert "10 only in the candidate" in res.output


@pytest.mark.parametrize("case, message", [
    ("no_qrels", "needs qrels"),
    ("means_only", "no per-query values"),
    ("unknown_metric", "unknown metric"),
    ("metric_not_saved", "no value for metric 'map'"),
    ("missing_file", "missing.trec"),
])
def test_bad_input_exits_2(files, case, message):
    args = {
        "no_qrels": ["--baseline", files["base"], "--candidate", files["noise"], "-m", "ndcg@10"],
        "means_only": ["--baseline", files["means_json"], "--candidate", files["base_json"], "-m", "ndcg@10"],
        "unknown_metric": ["--baseline", files["base_json"], "--candidate", files["base_json"], "-m", "ndgc@10"],
        "metric_not_saved": ["--baseline", files["base_json"], "--candidate", files["base_json"], "-m", "map"],
        "missing_file": ["--baseline", files["base"], "--candidate", files["base"].parent / "missing.trec",
                         "--qrels", files["qrels"], "-m", "ndcg@10"],
    }[case]
    res = run_gate(*args)
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_per_query_values_checks_values():
    with pytest.raises(InputError, match="not a number"):
        per_query_values({"per_query": {"q1": {"ndcg@10": "high"}}}, ["ndcg@10"])
    ids, vals = per_query_values({"per_query": {"q1": {"ndcg@10": None}, "q2": {"ndcg@10": 0.5}}}, ["ndcg@10"])
    assert ids == ["q1", "q2"] and vals[1, 0] == 0.5
    with pytest.raises(InputError, match="max drop"):
        gate({"per_query": {"q": {"mrr": 1.0}}}, {"per_query": {"q": {"mrr": 1.0}}}, "mrr", max_drop=-1)
