"""rankwise.compare / compare_records and the `rankwise compare` / `compare-rag` commands."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import rankwise
from _synthetic_runs import qrels_dict, system_run, write_trec
from rankwise.analysis.compare import compare, compare_per_query, compare_records, system_names
from rankwise.analysis.significance import correct_pvalues
from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, write_records
from rankwise.errors import InputError
from rankwise.metrics.engine import evaluate

METRICS = ["ndcg@10", "map", "P@10"]


@pytest.fixture(scope="module")
def cranfield(shared_data):
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    runs = {
        "weak": system_run(qrels, strength=0.6, seed=1),
        "strong": system_run(qrels, strength=1.2, seed=2),
        "same": system_run(qrels, strength=0.6, seed=3),
    }
    return qrels_path, qrels, runs


def test_small_example_by_hand():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    base = {"q1": ["x", "a"], "q2": ["x", "b"], "q3": ["x", "c"]}
    cand = {"q1": ["a", "x"], "q2": ["b", "x"], "q3": ["x", "y", "c"]}
    r = compare(qrels, [base, cand], ["mrr", "P@1"], names=["base", "cand"])
    c = r.comparison("cand", "mrr")
    assert (c.baseline_mean, c.mean) == (0.5, pytest.approx(7 / 9))
    assert (c.wins, c.ties, c.losses, c.n) == (2, 0, 1, 3)
    # deltas +0.5, +0.5, -1/6: of 8 sign assignments |sum| >= 5/6 for ++-, --+, +++, --- -> 4/8
    assert c.p_value == 0.5
    assert r.comparison("cand", "precision@1").delta == pytest.approx(2 / 3)
    assert r.comparison("cand", "P_1") is r.comparison("cand", "precision@1")  # aliases resolve
    assert r.candidates == ["cand"] and r.baseline == "base"


def test_cranfield_means_tests_and_correction(cranfield):
    from scipy import stats  # here, not at module level: collection would pay its import
    qrels_path, _, runs = cranfield
    r = rankwise.compare(qrels_path, list(runs.values()), METRICS, names=list(runs), test=["t", "wilcoxon",
                                                                                            "randomization"])
    assert r.systems == ["weak", "strong", "same"] and r.baseline == "weak"
    assert len(r.query_ids) == 225
    raw = []
    for system in r.systems:
        ev = evaluate(qrels_path, runs[system], METRICS)
        for m in ("ndcg@10", "map", "precision@10"):
            assert r.means[system][m] == ev.mean[m]  # the same digits as `rankwise eval`
    for system in ("strong", "same"):
        for m in ("ndcg@10", "map", "precision@10"):
            a = evaluate(qrels_path, runs["weak"], [m]).per_query.column(m)
            b = evaluate(qrels_path, runs[system], [m]).per_query.column(m)
            c = r.comparison(system, m)
            assert c.p_values["t"] == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=1e-12)
            assert c.p_values["wilcoxon"] == pytest.approx(stats.wilcoxon(b, a).pvalue, abs=1e-12)
            assert c.p_value == c.p_values["t"]  # the first test decides
            assert c.delta == pytest.approx(b.mean() - a.mean(), abs=1e-12)
            assert c.ci_low < c.delta < c.ci_high
            assert c.wins + c.ties + c.losses == 225
            assert c.effect_size == pytest.approx((b - a).mean() / (b - a).std(ddof=1))
            raw.append(c.p_value)
    adjusted = correct_pvalues(raw, "holm")
    assert [c.p_adjusted for c in r.comparisons] == pytest.approx(adjusted)
    strong = r.comparison("strong", "ndcg@10")
    assert strong.significant and strong.delta > 0.1  # a real gap
    assert not r.comparison("same", "ndcg@10").significant  # same system, other noise


def test_correction_choice_changes_only_adjusted_p(cranfield):
    qrels_path, _, runs = cranfield
    kw = dict(names=list(runs), test="t")
    holm = compare(qrels_path, list(runs.values()), METRICS, correction="holm", **kw)
    bonf = compare(qrels_path, list(runs.values()), METRICS, correction="bonferroni", **kw)
    none = compare(qrels_path, list(runs.values()), METRICS, correction="none", **kw)
    for h, b, n in zip(holm.comparisons, bonf.comparisons, none.comparisons, strict=True):
        assert h.p_value == b.p_value == n.p_value == n.p_adjusted
        assert n.p_adjusted <= h.p_adjusted <= b.p_adjusted
        assert b.p_adjusted == pytest.approx(min(1.0, 6 * n.p_value))


def test_baseline_by_name_and_index(cranfield):
    qrels_path, _, runs = cranfield
    by_name = compare(qrels_path, list(runs.values()), "ndcg@10", names=list(runs), baseline="strong",
                      permutations=2000)
    by_index = compare(qrels_path, list(runs.values()), "ndcg@10", names=list(runs), baseline=1,
                       permutations=2000)
    assert by_name.baseline == by_index.baseline == "strong"
    assert by_name.comparison("weak", "ndcg@10").delta == by_index.comparison("weak", "ndcg@10").delta < 0
    with pytest.raises(InputError, match="baseline"):
        compare(qrels_path, list(runs.values()), "ndcg@10", baseline="nope")
    with pytest.raises(InputError, match="out of range"):
        compare(qrels_path, list(runs.values()), "ndcg@10", baseline=5)


def test_bad_input():
    qrels = {"q": {"a": 1}}
    with pytest.raises(InputError, match="at least two runs"):
        compare(qrels, [{"q": ["a"]}])
    with pytest.raises(InputError, match="2 names for 3 systems"):
        compare(qrels, [{"q": ["a"]}] * 3, names=["a", "b"])
    with pytest.raises(InputError, match="unique"):
        compare(qrels, [{"q": ["a"]}] * 2, names=["a", "a"])
    with pytest.raises(InputError, match="unknown test"):
        compare(qrels, [{"q": ["a"]}] * 2, test="sign")
    with pytest.raises(InputError, match="correction"):
        compare(qrels, [{"q": ["a"]}] * 2, correction="fdr")
    with pytest.raises(InputError, match="alpha"):
        compare(qrels, [{"q": ["a"]}] * 2, alpha=1.5)


def test_names_from_file_stems(tmp_path):
    assert system_names(["x/bm25.trec", "y/bm25.trec", "dense.run"]) == ["bm25", "bm25#2", "dense"]
    qrels = {"q1": {"a": 1}}
    p1 = write_trec({"q1": {"a": 1.0}}, tmp_path / "bm25.trec")
    p2 = write_trec({"q1": {"b": 1.0, "a": 0.5}}, tmp_path / "dense.trec")
    r = compare(qrels, [p1, p2], "mrr")
    assert r.systems == ["bm25", "dense"]
    assert r.means == {"bm25": {"mrr": 1.0}, "dense": {"mrr": 0.5}}


def test_skip_mode_compares_shared_queries_and_says_so():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    r = compare(qrels, [{"q1": ["a"], "q2": ["b"]}, {"q1": ["a"], "q2": ["x"], "q3": ["c"]}], "P@1",
                missing="skip")
    assert r.query_ids == ["q1", "q2"]
    assert r.summary["left_out_not_in_every_run"] == {"run1": 0, "run2": 1}


def test_undefined_values_are_left_out_of_pairs_not_averaged():
    # id_precision is undefined for a query with nothing retrieved
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    r = compare(qrels, [{"q1": ["a"], "q2": ["b", "x"], "q3": []}, {"q1": ["a"], "q2": ["b"], "q3": ["c"]}],
                "id_precision", missing="zero")
    c = r.comparison("run2", "id_precision")
    assert c.n == 2  # q3 is undefined for run1
    assert c.baseline_mean == pytest.approx(0.75) and c.mean == 1.0
    assert math.isnan(r.per_query("run1", "id_precision")[2])


def test_compare_per_query_shape_check():
    with pytest.raises(InputError, match="shape"):
        compare_per_query({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}, ["q1", "q2"], ["m"])


def test_json_and_rows_are_strict(cranfield):
    qrels_path, _, runs = cranfield
    r = compare(qrels_path, [runs["weak"], runs["strong"]], ["ndcg@10", "id_recall"], names=["w", "s"],
                permutations=1000)
    data = json.loads(json.dumps(r.to_json(per_query=True), allow_nan=False))
    assert data["comparisons"][0]["system"] == "s"
    assert len(data["per_query"]["w"]) == 225
    rows = r.rows()
    assert [row["system"] for row in rows] == ["w", "s", "w", "s"]
    assert rows[1]["p_randomization"] == r.comparison("s", "ndcg@10").p_value


# ------------------------------------------------------------------------------------------ records
def _record(cid: str, wcp: float | None, verdicts: list[int], reason: str = "") -> dict:
    return {"id": cid, "question": f"question {cid}",
            "chunks": [{"rank": i + 1, "id": f"{cid}-c{i}", "text": f"chunk {i} of {cid}",
                        "verdicts": {"llm": {"verdict": v, "reason": reason or None}}}
                       for i, v in enumerate(verdicts)],
            "scores": {"llm": {"wcp@3": wcp, "precision@3": sum(verdicts) / 3}}}


def _wcp3(verdicts: list[int]) -> float:
    from rankwise.metrics import weighted_context_precision

    return weighted_context_precision(verdicts, k=3)


def test_compare_records_matches_cases_by_id():
    from scipy import stats  # here, not at module level: collection would pay its import
    a = [_record("c1", 0.5, [1, 0, 0]), _record("c2", 0.2, [0, 0, 1]), _record("c3", 1.0, [1, 1, 1])]
    b = [_record("c3", 1.0, [1, 1, 1]), _record("c1", 0.9, [1, 1, 0]), _record("c2", 0.6, [1, 0, 1])]
    r = compare_records({"A": a, "B": b}, "llm", test="t", correction="none")
    assert r.query_ids == ["c1", "c2", "c3"]
    assert r.metrics == ["wcp@3", "precision@3"]  # the metrics the records were scored with
    c = r.comparison("B", "wcp@3")
    # recomputed from the stored verdicts, not read from the stored scores
    base = [_wcp3([1, 0, 0]), _wcp3([0, 0, 1]), _wcp3([1, 1, 1])]
    cand = [_wcp3([1, 1, 0]), _wcp3([1, 0, 1]), _wcp3([1, 1, 1])]
    assert c.baseline_mean == pytest.approx(sum(base) / 3) and c.mean == pytest.approx(sum(cand) / 3)
    assert (c.wins, c.ties, c.losses) == (2, 1, 0)
    assert c.p_value == pytest.approx(stats.ttest_rel(cand, base).pvalue)
    # any registered metric, though no record stored it
    assert r.comparison("B", "precision@3").delta == pytest.approx((1 / 3 + 1 / 3) / 3)
    ndcg = compare_records({"A": a, "B": b}, "llm", "ndcg@3", test="t", correction="none")
    assert ndcg.metrics == ["ndcg@3"]


def test_compare_records_mismatch_and_nulls():
    a = [_record("c1", 0.5, [1, 0, 0]), _record("c2", None, [0, 0, 0])]
    b = [_record("c1", 0.7, [1, 0, 1]), _record("c2", 0.4, [0, 1, 0]), _record("c9", 0.1, [0, 0, 1])]
    with pytest.raises(InputError, match="different cases.*c9"):
        compare_records({"A": a, "B": b}, "llm")
    r = compare_records({"A": a, "B": b}, "llm", "wcp@3", allow_mismatch=True)
    assert r.summary["left_out_not_in_every_set"] == {"A": 0, "B": 1}
    assert r.comparison("B", "wcp@3").n == 2
    r = compare_records({"A": a, "B": b}, "llm", "id_precision", allow_mismatch=True)
    assert "undefined" not in r.summary
    with pytest.raises(InputError, match="appears twice"):
        compare_records({"A": a + a, "B": b}, "llm")


# -------------------------------------------------------------------------------------------------
# CLI
def test_cli_compare_table_json_csv_markdown(cranfield, tmp_path):
    qrels_path, _, runs = cranfield
    paths = [write_trec(runs[n], tmp_path / f"{n}.trec") for n in ("weak", "strong")]
    args = ["compare", str(qrels_path), *map(str, paths), "-m", "ndcg@10,map", "--permutations", "2000"]
    runner = CliRunner()
    lib = compare(qrels_path, paths, ["ndcg@10", "map"], permutations=2000)

    out = runner.invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "baseline: weak" in out.output
    assert f"{lib.means['strong']['ndcg@10']:.4f}" in out.output
    assert f"{lib.comparison('strong', 'ndcg@10').delta:+.4f}" in out.output
    assert "Holm-Bonferroni correction over 2 comparisons" in out.output

    out = runner.invoke(main, [*args, "--format", "json"])
    data = json.loads(out.output)
    assert data["means"]["strong"]["map"] == lib.means["strong"]["map"]
    assert data["comparisons"][0]["p_adjusted"] == lib.comparisons[0].p_adjusted

    out = runner.invoke(main, [*args, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert [r["system"] for r in rows] == ["weak", "strong", "weak", "strong"]
    assert float(rows[1]["delta"]) == lib.comparison("strong", "ndcg@10").delta

    out = runner.invoke(main, [*args, "--format", "markdown", "--name", "A", "--name", "B", "--baseline", "B"])
    assert out.exit_code == 0, out.output
    assert "| ndcg@10 | B (baseline) |" in out.output
    assert "| ndcg@10 | A |" in out.output and "**-" in out.output  # a significant drop, in bold


def test_cli_compare_bad_input_exits_2(tmp_path):
    runner = CliRunner()
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\n")
    run = write_trec({"q1": {"a": 1.0}}, tmp_path / "r.trec")
    out = runner.invoke(main, ["compare", str(qrels), str(run)])
    assert out.exit_code == 2 and "at least two runs" in out.output
    out = runner.invoke(main, ["compare", str(qrels), str(run), str(tmp_path / "missing.trec")])
    assert out.exit_code == 2 and "missing.trec" in out.output


def test_cli_compare_rag_records(tmp_path):
    a = [CaseRecord("c1", question="q?", chunks=[ChunkRecord(rank=1, id="x", text="t", verdicts={"llm": Verdict(1)})],
                    scores={"llm": {"wcp@1": 1.0}}),
         CaseRecord("c2", chunks=[ChunkRecord(rank=1, id="y", verdicts={"llm": Verdict(0)})], scores={"llm": {"wcp@1": 0.0}})]
    b = [CaseRecord("c2", chunks=[ChunkRecord(rank=1, id="y", verdicts={"llm": Verdict(1)})], scores={"llm": {"wcp@1": 1.0}}),
         CaseRecord("c1", chunks=[ChunkRecord(rank=1, id="x", verdicts={"llm": Verdict(1)})], scores={"llm": {"wcp@1": 1.0}})]
    pa, pb = write_records(a, tmp_path / "bm25.jsonl"), write_records(b, tmp_path / "dense.jsonl")
    out = CliRunner().invoke(main, ["compare-rag", str(pa), str(pb), "--source", "llm", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["systems"] == ["bm25", "dense"]
    assert data["means"] == {"bm25": {"wcp@1": 0.5}, "dense": {"wcp@1": 1.0}}
    assert data["comparisons"][0]["wins"] == 1
    # mismatched case sets: exit 2 unless allowed
    write_records(b + [CaseRecord("c3", scores={"llm": {"wcp@1": 0.0}})], tmp_path / "more.jsonl")
    out = CliRunner().invoke(main, ["compare-rag", str(pa), str(tmp_path / "more.jsonl"), "--source", "llm"])
    assert out.exit_code == 2 and "different cases" in out.output
    # the command line names its flag, not the library's parameter
    assert "(--allow-mismatch compares the shared ones)" in out.output and "allow_mismatch" not in out.output
    out = CliRunner().invoke(main, ["compare-rag", str(pa), str(tmp_path / "more.jsonl"), "--source", "llm",
                                    "--allow-mismatch"])
    assert out.exit_code == 0, out.output


def test_compare_results_refuses_systems_scored_with_other_metrics():
    """``compare_results`` compares values column by column: results scored with other metrics (or
    another order) are an error naming both lists, not a silent comparison of one metric with
    another."""
    from rankwise.analysis.compare import compare_results
    from rankwise.errors import InputError
    from rankwise.metrics.rag import evaluate_rag

    rows = [{"id": "c1", "retrieved_context_ids": ["x", "d1"], "reference_context_ids": ["d1"]},
            {"id": "c2", "retrieved_context_ids": ["d2", "x"], "reference_context_ids": ["d2"]}]
    a = evaluate_rag(rows, "ids", metrics=["mrr", "precision@1"])
    b = evaluate_rag(rows, "ids", metrics=["precision@1", "mrr"])
    with pytest.raises(InputError, match=r"system 'b' was scored with metrics \['precision@1', 'mrr'\], system 'a' "
                                         r"with \['mrr', 'precision@1'\]"):
        compare_results({"a": a, "b": b}, "ids")
    same = compare_results({"a": a, "b": evaluate_rag(rows, "ids", metrics=["mrr", "precision@1"])}, "ids")
    assert [c.delta for c in same.comparisons] == [0.0, 0.0]


def test_runs_covering_different_queries_are_refused_unless_allowed(tmp_path):
    """A judged query one run lacks would score 0 for that run alone under --missing zero: refused,
    naming the run and the queries; --allow-query-mismatch compares the queries every run covers
    (the gate's rule)."""
    from _inprocess import run_cli

    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq2 0 b 1\nq3 0 c 1\n")
    (tmp_path / "full.trec").write_text("q1 Q0 a 1 1.0 r\nq2 Q0 b 1 1.0 r\nq3 Q0 x 1 1.0 r\n")
    (tmp_path / "partial.trec").write_text("q1 Q0 a 1 1.0 r\nq3 Q0 c 1 1.0 r\n")
    done = run_cli(["compare", tmp_path / "qrels.txt", tmp_path / "full.trec", tmp_path / "partial.trec", "-m", "P@1"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "runs cover different queries: partial lacks 1 judged query another run covers (e.g. 'q2')" in done.stderr
    allowed = run_cli(["compare", tmp_path / "qrels.txt", tmp_path / "full.trec", tmp_path / "partial.trec", "-m",
                       "P@1", "--allow-query-mismatch", "--format", "json"])
    assert allowed.returncode == 0, allowed.stderr
    out = json.loads(allowed.stdout)
    assert out["summary"]["queries"] == 2  # q1 and q3: q2 left out, not scored 0 for one side
    assert out["means"] == {"full": {"precision@1": 0.5}, "partial": {"precision@1": 1.0}}
