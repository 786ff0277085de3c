"""`rankwise gate`: exit 1 on a real regression, 0 on noise, 2 on bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from _synthetic_runs import jitter, qrels_dict, regress, system_run, write_trec
from rankwise.analysis.gate import gate
from rankwise.analysis.sides import per_query_values
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics.engine import evaluate


@pytest.fixture(scope="module")
def files(shared_data, tmp_path_factory):
    """Cranfield qrels; a baseline run; the same run broken on 40% of queries; the same run with
    tiny noise; a run over only some of the queries; and saved per-query results of the first two.
    """
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
    out = " ".join(res.output.split())
    assert f"the candidate covers 10 queries that the baseline ({files['partial_json']}) lacks: " in out
    assert "--allow-query-mismatch compares only" in out
    res = run_gate("--baseline", files["partial_json"], "--candidate", files["regressed_json"], "--metric",
                   "ndcg@10", "--allow-query-mismatch")
    assert res.exit_code == 1, res.output
    assert "10 only in the candidate" in res.output


@pytest.mark.parametrize("case, message", [
    ("no_qrels", "needs qrels"),
    ("means_only_metric", "no mean for metric 'map'"),
    ("unknown_metric", "unknown metric"),
    ("metric_not_saved", "no value for metric 'map'"),
    ("missing_file", "missing.trec"),
])
def test_bad_input_exits_2(files, case, message):
    args = {
        "no_qrels": ["--baseline", files["base"], "--candidate", files["noise"], "-m", "ndcg@10"],
        "means_only_metric": ["--baseline", files["means_json"], "--candidate", files["base_json"], "-m", "map"],
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


# ------------------------------------------------------------------ one query-set check for every
# pairing
DROPPED = "5"  # the judged query the "lacking" systems do not retrieve for / do not hold


@pytest.fixture(scope="module")
def pairing_files(shared_data, tmp_path_factory):
    """Every kind of gate input, once covering every query and once lacking one: IR (a run, a saved
    `eval --per-query` result, a saved result of means only, all from `rankwise eval`) and RAG (a
    test set, a saved `eval-rag --per-query` result, a saved result of means only)."""
    d = tmp_path_factory.mktemp("pairings")
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    assert DROPPED in qrels
    run = system_run(qrels, strength=1.0, seed=5)
    out = {"qrels": qrels_path}
    runner = CliRunner()
    cases = [{"id": f"c{i:02d}", "question": f"question {i}", "retrieved_context_ids": [f"x{i}", f"d{i}", "y"],
              "reference_context_ids": [f"d{i}"] if i % 3 else ["y"]} for i in range(30)]
    for variant, keep in (("full", lambda q: True), ("lacking", lambda q: q != DROPPED)):
        out[f"run_{variant}"] = write_trec({q: docs for q, docs in run.items() if keep(q)}, d / f"{variant}.trec")
        res = runner.invoke(main, ["eval", str(qrels_path), str(out[f"run_{variant}"]), "-m", "ndcg@10",
                                   "--format", "json", "--per-query"])
        assert res.exit_code == 0, res.output
        saved = json.loads(res.output)
        out[f"saved_{variant}"] = d / f"{variant}.per_query.json"
        out[f"saved_{variant}"].write_text(json.dumps(saved))
        del saved["per_query"]
        out[f"means_{variant}"] = d / f"{variant}.means.json"
        out[f"means_{variant}"].write_text(json.dumps(saved))
        rag = [c for c in cases if keep(c["id"]) and (variant == "full" or c["id"] != "c07")]
        out[f"testset_{variant}"] = d / f"{variant}.testset.jsonl"
        out[f"testset_{variant}"].write_text("".join(json.dumps(c) + "\n" for c in rag))
        res = runner.invoke(main, ["eval-rag", str(out[f"testset_{variant}"]), "-r", "ids", "-m", "mrr",
                                   "--format", "json", "--per-query"])
        assert res.exit_code == 0, res.output
        saved = json.loads(res.output)
        out[f"ragsaved_{variant}"] = d / f"{variant}.rag.json"
        out[f"ragsaved_{variant}"].write_text(json.dumps(saved))
        del saved["per_query"]
        out[f"ragmeans_{variant}"] = d / f"{variant}.ragmeans.json"
        out[f"ragmeans_{variant}"].write_text(json.dumps(saved))
    return out


IR_KINDS = ("run", "saved", "means")
RAG_KINDS = ("testset", "ragsaved", "ragmeans")
PAIRINGS = [(b, c) for kinds in (IR_KINDS, RAG_KINDS) for b in kinds for c in kinds]


def _pairing_args(files, base_kind, cand_kind, case, *extra):
    base = files[f"{base_kind}_{'lacking' if case == 'extra' else 'full'}"]
    cand = files[f"{cand_kind}_{'lacking' if case == 'missing' else 'full'}"]
    ir = base_kind in IR_KINDS
    args = ["--baseline", base, "--candidate", cand, "-m", "ndcg@10" if ir else "mrr", "--permutations", "500"]
    args += ["--qrels", files["qrels"]] if ir else ["--relevance", "ids"]
    return base, cand, [*args, *extra]


@pytest.mark.parametrize("case", ["same", "missing", "extra"])
@pytest.mark.parametrize("base_kind, cand_kind", PAIRINGS)
def test_every_pairing_refuses_different_query_sets(pairing_files, base_kind, cand_kind, case):
    base, cand, args = _pairing_args(pairing_files, base_kind, cand_kind, case)
    res = run_gate(*args)
    means_only = "means" in base_kind + cand_kind
    if case == "same":
        assert res.exit_code == 0, res.output
        assert "GATE PASSED" in res.output
        assert ("no significance test" in res.output) == means_only
        assert ("holds no per-query values" in res.output) == means_only
        return
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert f"{cand}: field 'query_id': baseline and candidate cover different queries" in out
    assert "--allow-query-mismatch compares only the queries both cover" in out
    assert "allow_query_mismatch" not in out and "Traceback" not in out
    named = not ({base_kind, cand_kind} & {"ragmeans"})  # a RAG summary of means names no case
    lost = DROPPED if base_kind in IR_KINDS else "c07"
    if named:
        verb = "lacks" if case == "missing" else "covers"
        other = "covers" if case == "missing" else "lacks"
        assert f"the candidate {verb} 1 query that the baseline ({base}) {other}: '{lost}'" in out
    else:
        counts = (30, 29) if case == "missing" else (29, 30)
        assert f"the baseline ({base}) covers {counts[0]} queries and the candidate ({cand}) {counts[1]}" in out


@pytest.mark.parametrize("case", ["missing", "extra"])
@pytest.mark.parametrize("base_kind, cand_kind", PAIRINGS)
def test_allow_query_mismatch_compares_the_queries_both_cover(pairing_files, base_kind, cand_kind, case):
    base, cand, args = _pairing_args(pairing_files, base_kind, cand_kind, case, "--allow-query-mismatch",
                                     "--format", "json")
    res = run_gate(*args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    summary = data["summary"]
    check = data["checks"][0]
    if "means" in base_kind + cand_kind:  # a side of means only: compared on means, untested
        assert check["p_value"] is None and "holds no per-query values" in check["untested"]
        assert abs(check["delta"]) < 0.01
    else:  # the lost query left out; what remains is the same system on both sides
        assert check["delta"] == 0 and check["untested"] is None
        assert check["n"] == (225 if base_kind in IR_KINDS else 30) - 1
    if "ragmeans" not in (base_kind, cand_kind):
        key = "only_in_baseline" if case == "missing" else "only_in_candidate"
        assert summary[key] == 1
    else:
        assert "query sets differ" in summary["notes"][0]


def test_a_run_and_rag_records_are_not_gated_together(pairing_files):
    res = run_gate("--baseline", pairing_files["run_full"], "--candidate", pairing_files["ragsaved_full"],
                   "--qrels", pairing_files["qrels"], "-m", "mrr")
    assert res.exit_code == 2, res.output
    assert "gate two inputs of the same kind" in res.output


def test_means_only_baseline_fails_a_real_drop_without_a_test(files, tmp_path):
    """A saved baseline of means only cannot carry a significance test: the gate says so and judges
    the drop on the budget alone."""
    res = run_gate("--baseline", files["means_json"], "--candidate", files["regressed"], "--qrels", files["qrels"],
                   "-m", "ndcg@10", "--max-drop", "0.01")
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())
    assert f"the baseline ({files['means_json']}) holds no per-query values" in out
    assert "no paired significance test can run" in out and "GATE FAILED: ndcg@10" in out
    g = gate(files["base"], files["regressed"], "ndcg@10", qrels=files["qrels"])
    means = json.loads(files["means_json"].read_text())["mean"]["ndcg@10"]
    assert f"{means:.4f} -> {g.checks[0].candidate_mean:.4f}" in out
    assert "nan" not in out.lower()


def test_gate_names_the_verdict_source_it_used(tmp_path):
    """Without --relevance a RAG gate scores by containment: it says so (table and JSON); with it,
    names it."""
    import json as _json

    from _inprocess import run_cli

    rows = [{"id": f"q{i}", "retrieved_contexts": ["paris is the capital of france", "x"],
             "reference_contexts": ["paris is the capital of france"]} for i in range(4)]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    table = run_cli(["gate", "--baseline", path, "--candidate", path, "-m", "recall@2"])
    assert table.returncode == 0, table.stderr
    assert "verdict source: containment (the default; --relevance names another)" in table.stdout
    out = run_cli(["gate", "--baseline", path, "--candidate", path, "-m", "recall@2", "--relevance", "fuzzy",
                   "--format", "json"])
    summary = _json.loads(out.stdout)["summary"]
    assert (summary["verdict_source"], summary["verdict_source_from"]) == ("fuzzy", "--relevance")
