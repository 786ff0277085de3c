"""k-sweeps over runs and over per-case records."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from _synthetic_runs import qrels_dict, system_run, write_trec
from rankwise.analysis.ksweep import default_sweep_metric, ksweep, ksweep_records, sweep_measures
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics.engine import evaluate
from rankwise.metrics.rag import evaluate_rag
from rankwise.report.compare_text import ksweep_csv
from rankwise.report.markdown import ksweep_markdown


@pytest.fixture(scope="module")
def cranfield(shared_data):
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    return qrels_path, {"a": system_run(qrels, strength=0.5, seed=1), "b": system_run(qrels, strength=1.0, seed=2)}


@pytest.mark.parametrize("metric", ["ndcg", "P@10", "recall_5", "map"])
def test_sweep_equals_evaluate_at_every_k(cranfield, metric):
    qrels_path, runs = cranfield
    s = ksweep(qrels_path, list(runs.values()), metric, max_k=12, names=list(runs))
    assert s.ks == list(range(1, 13)) and s.systems == ["a", "b"]
    for name, run in runs.items():
        names = [m.name for m in sweep_measures(metric, 12)]
        ev = evaluate(qrels_path, run, names)
        assert s.values[name].tolist() == [ev.mean[n] for n in names]
    assert s.name_at(3) == names[2]


def test_crossings_best_k_and_rows():
    qrels = {"q1": {"a": 1, "b": 1, "c": 1}}
    # early: x finds a at rank 1; late: y finds all three by rank 4
    x = {"q1": ["a", "z1", "z2", "z3", "z4"]}
    y = {"q1": ["z1", "a", "b", "c"]}
    s = ksweep(qrels, [x, y], "recall", max_k=4, names=["x", "y"])
    assert s.values["x"].tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert s.values["y"].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert s.crossings("y", "x") == [3]
    assert s.best_k("y") == 4 and s.best_k("x") == 1
    assert s.rows()[0] == {"k": 1, "x": pytest.approx(1 / 3), "y": 0.0}
    assert "| 4 | 0.3333 | 1.0000 |" in ksweep_markdown(s)
    assert ksweep_csv(s).splitlines()[1] == f"recall,1,x,{1 / 3!r}"


def test_sweep_rejects_metrics_without_cutoff():
    with pytest.raises(InputError, match="no cutoff to sweep"):
        ksweep({"q": {"a": 1}}, [{"q": ["a"]}], "r_precision")
    with pytest.raises(InputError, match="at least 1"):
        ksweep({"q": {"a": 1}}, [{"q": ["a"]}], "ndcg", max_k=0)
    assert default_sweep_metric(["Rprec", "P@5"]) == "precision"
    assert default_sweep_metric(["bpref"]) is None


def test_sweep_over_records_matches_evaluate_rag():
    cases = [
        {"id": "c1", "reference_contexts": ["paris is the capital of france"],
         "retrieved_contexts": ["Rome is in Italy.", "Paris is the capital of France.", "Berlin."]},
        {"id": "c2", "reference_contexts": ["water boils at 100 degrees"],
         "retrieved_contexts": ["Water boils at 100 degrees at sea level.", "Ice melts.", "Steam."]},
    ]
    records = evaluate_rag(cases, "containment", k=3).records
    s = ksweep_records({"sys": records}, "containment", "wcp", max_k=3)
    direct = evaluate_rag(cases, "containment", metrics=["wcp@1", "wcp@2", "wcp@3"])
    assert s.values["sys"].tolist() == [direct.mean["wcp@1"], direct.mean["wcp@2"], direct.mean["wcp@3"]]
    # c1: [0,1,0] -> wcp@2 = 0.6309/1.6309; c2: [1,0,0] -> 1/1.6309
    assert s.values["sys"][1] == pytest.approx((0.63093 / 1.63093 + 1 / 1.63093) / 2, abs=1e-4)
    assert s.summary["sys"]["evaluated"] == 2


def test_cli_sweep_table(cranfield, tmp_path):
    qrels_path, runs = cranfield
    paths = [write_trec(run, tmp_path / f"{n}.trec") for n, run in runs.items()]
    out = CliRunner().invoke(main, ["compare", str(qrels_path), *map(str, paths), "-m", "ndcg@10",
                                    "--sweep", "ndcg", "--max-k", "5", "--permutations", "500"])
    assert out.exit_code == 0, out.output
    s = ksweep(qrels_path, list(runs.values()), "ndcg", max_k=5)
    assert "ndcg at K = 1..5" in out.output
    for v in s.values["run2"].tolist():
        assert f"{v:.4f}" in out.output
