"""Calibration against answers: planted position curves are recovered, the planted metric ranks
first, too few cases are refused; answer scores (EM, token F1, files)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.analysis.answers import exact_match, read_answer_scores, score_answers, token_f1
from rankwise.analysis.calibrate import calibrate, candidate_metrics
from rankwise.analysis.position import discount_weights, fit_position_curve, position_accuracy
from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, write_records
from rankwise.errors import InputError
from rankwise.metrics import weighted_context_precision


def _simulate(curve: np.ndarray, per_position: int, seed: int):
    rng = random.Random(seed)
    outcomes = [(i + 1, 1.0 if rng.random() < curve[i] else 0.0) for i in range(len(curve))
                for _ in range(per_position)]
    return position_accuracy(outcomes, len(curve))


def test_position_curve_recovers_a_planted_rbp():
    k = 10
    planted = 0.1 + 0.8 * discount_weights("rbp", k, p=0.7)
    acc, counts, intervals = _simulate(planted, 2000, seed=1)  # 20,000 simulated answers
    fit = fit_position_curve(acc, counts)
    assert fit.best.name == "rbp"
    assert abs(fit.best.params["p"] - 0.7) <= 0.05  # the stated tolerance
    for a, (lo, hi) in zip(acc, intervals, strict=True):
        assert lo <= a <= hi


def test_position_curve_recovers_a_u_shape():
    k = 10
    planted = 0.2 + 0.6 * discount_weights("u_shape", k, p=0.5, q=0.5, b=1.0) / 1.0
    acc, counts, _ = _simulate(np.clip(planted, 0, 1), 500, seed=2)
    fit = fit_position_curve(acc, counts)
    assert fit.best.name == "u_shape"
    assert fit.best.params["b"] >= 0.5  # the late positions matter again
    monotone = next(f for f in fit.fits if f.name == "log")
    assert fit.best.aic < monotone.aic


def test_position_curve_needs_three_positions():
    with pytest.raises(InputError, match="three positions"):
        fit_position_curve([1.0, 0.5], [10, 10])


def _records(n: int, seed: int, planted: str = "rbp") -> list[CaseRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        v = [1 if rng.random() < 0.35 else 0 for _ in range(8)]
        rec = CaseRecord(f"c{i:03d}", chunks=[ChunkRecord(rank=r + 1, id=f"c{i}-{r}", verdicts={"llm": Verdict(x)})
                                              for r, x in enumerate(v)])
        # the planted answer score: wcp@5 with RBP(0.8), as the generator's answers would follow it
        rec.answer_score = weighted_context_precision(v, 5, "rbp", p=0.8)
        rec.answer_score_source = "planted"
        out.append(rec)
    return out


def test_calibrate_ranks_the_planted_metric_first():
    result = calibrate(_records(200, 1), "llm")
    assert result.statistic == "kendall_tau_b"
    assert result.best.name == "wcp(decay=rbp,p=0.8)@5"
    assert result.best.held_out == pytest.approx(1.0)
    assert result.best.ci_low is not None and result.best.ci_low <= 1.0
    others = [c for c in result.candidates if c.name.startswith("precision@5")]
    assert others[0].held_out < 0.95
    assert result.sentence().startswith("wcp(decay=rbp,p=0.8)@5 predicts the answer score best: tau 1.00")


def test_calibrate_binary_answers_use_auc_and_systems_agree():
    recs = _records(120, 3)
    for r in recs:
        r.answer_score = 1.0 if r.chunks[0].verdicts["llm"].verdict == 1 else 0.0
    worse = _records(120, 3)
    for r in worse:  # the same cases, relevant chunks pushed down one rank
        r.chunks = [ChunkRecord(rank=1, id="pad", verdicts={"llm": Verdict(0)})] + [
            ChunkRecord(rank=c.rank + 1, id=c.id, verdicts=c.verdicts) for c in r.chunks]
        r.answer_score = 0.0
    result = calibrate({"good": recs, "worse": worse}, "llm")
    assert result.statistic == "auc" and result.systems == ["good", "worse"]
    assert result.best.name.endswith("@1") and result.best.held_out == pytest.approx(1.0)
    assert result.best.system_tau == pytest.approx(1.0)


def test_calibrate_refuses_on_too_few_cases():
    result = calibrate(_records(12, 4), "llm")
    assert result.best is None
    assert "12 cases have answer scores; at least 30 are needed" in result.refused
    assert result.sentence().startswith("No recommendation:")


def test_candidates_cover_the_issue_grid():
    names = candidate_metrics(curve="c.json")
    for n in ("hit_rate@1", "mrr@3", "ndcg@10", "acp", "wcp(decay=rbp,p=0.95)@5", "wcp(decay=flat)@10",
              "wcp(decay=curve,curve=c.json)@5", "recall"):
        assert n in names


def test_answer_scores():
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert token_f1("x y z", "y z w") == pytest.approx(2 / 3)
    recs = [CaseRecord("q1", reference="Paris", response="Paris"), CaseRecord("q2", reference="Rome", response="x"),
            CaseRecord("q3")]
    assert score_answers(recs, "em") == {"scored": 2, "kept": 0, "missing": 1}
    assert [r.answer_score for r in recs] == [1.0, 0.0, None]
    assert score_answers(recs, "f1", scores={"q3": 0.5}, source="human") == {"scored": 1, "kept": 2, "missing": 0}
    assert (recs[2].answer_score, recs[2].answer_score_source) == (0.5, "human")


def test_read_answer_scores_errors_name_the_line(tmp_path):
    p = tmp_path / "scores.csv"
    p.write_text("query_id,answer_score\nq1,1\nq2,lots\n")
    with pytest.raises(InputError, match=r"scores.csv:3: field 'answer_score'"):
        read_answer_scores(p)
    p.write_text("query_id,answer_score\nq1,1\nq2,0.5\n")
    assert read_answer_scores(p) == {"q1": 1.0, "q2": 0.5}


def test_calibrate_cli(tmp_path):
    path = tmp_path / "records.jsonl"
    write_records(_records(120, 5), path)
    res = CliRunner().invoke(main, ["calibrate", str(path), "--relevance", "llm", "--format", "json",
                                    "--plot", str(tmp_path / "cal.png")])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["recommendation"] == "wcp(decay=rbp,p=0.8)@5"
    assert (tmp_path / "cal.png").stat().st_size > 1000
    res = CliRunner().invoke(main, ["calibrate", str(path), "--relevance", "llm"], terminal_width=200)
    assert res.exit_code == 0
    assert "predicts the answer score best" in res.output


# ------------------------------------------------------------- a split stratified by outcome;
# undefined AUC
def _binary_records(n: int, positives: set[str], seed: int = 7) -> list[CaseRecord]:
    """Cases c000..: the answer is right exactly when the first chunk is relevant."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cid = f"c{i:03d}"
        v = [1 if cid in positives else 0] + [1 if rng.random() < 0.4 else 0 for _ in range(4)]
        rec = CaseRecord(cid, chunks=[ChunkRecord(rank=r + 1, id=f"{cid}-{r}", verdicts={"llm": Verdict(x)})
                                      for r, x in enumerate(v)])
        rec.answer_score = float(v[0])
        out.append(rec)
    return out


def _unstratified_held_out(case_ids: list[str], seed: int = 42, share: float = 0.5) -> set[str]:
    """The held-out half of the split calibrate drew before it stratified: a seeded permutation of
    the ids."""
    order = np.random.default_rng(seed).permutation(len(case_ids))
    return {case_ids[i] for i in order[:max(1, int(round(len(case_ids) * share)))]}


def test_calibrate_split_keeps_both_outcomes_in_each_half():
    ids = [f"c{i:03d}" for i in range(40)]
    held = _unstratified_held_out(ids)
    positives = set(sorted(set(ids) - held)[:3])  # planted: every right answer in the training half
    recs = _binary_records(40, positives)
    assert not positives & held  # an unstratified split would hold out only wrong answers
    result = calibrate(recs, "llm")
    assert result.statistic == "auc"
    assert result.best is not None and result.best.name.endswith("@1")
    assert result.best.held_out == pytest.approx(1.0) and result.best.train == pytest.approx(1.0)
    assert "nan" not in result.sentence()
    assert result.held_out_cases == 20 and result.train_cases == 20


def test_calibrate_gives_no_recommendation_on_an_undefined_auc(tmp_path):
    path = tmp_path / "records.jsonl"
    write_records(_binary_records(40, {"c011"}), path)  # one right answer: one half holds none
    res = CliRunner().invoke(main, ["calibrate", str(path), "--relevance", "llm"], terminal_width=200)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "predicts the answer score best" not in out and "nan" not in out
    assert "No recommendation:" in out
    assert ("but its AUC on the held-out half is undefined: every answer of the held-out half is wrong (20 cases)"
            in out or "the AUC is undefined on the training half for every candidate: every answer of the "
                      "training half is wrong (20 cases)" in out)
    res = CliRunner().invoke(main, ["calibrate", str(path), "--relevance", "llm", "--format", "json"])
    data = json.loads(res.stdout)
    assert data["recommendation"] is None and data["sentence"].startswith("No recommendation: ")
    assert "is undefined" in data["refused"]


def test_calibrate_gives_no_recommendation_on_an_undefined_tau():
    recs = _records(40, 6)
    for r in recs:
        r.answer_score = 0.8 if r.id == "c017" else 0.5  # one case differs: one half holds one score
    result = calibrate(recs, "llm")
    assert result.statistic == "kendall_tau_b" and result.best is None
    assert "Kendall tau-b" in result.refused and "is undefined" in result.refused
    assert "every answer score of the" in result.refused and "is the same (0.5, 20 cases)" in result.refused
    assert result.to_json()["recommendation"] is None and "nan" not in result.sentence()


@pytest.mark.parametrize("binary", [True, False])
def test_bootstrap_statistics_as_matrix_products_equal_the_quadratic_forms(binary):
    """The bootstrap's c'Mc as matrix products equals numpy's einsum of the same forms to the last
    bit (whole-number weights, entries multiples of 1/2: every partial sum exact), with ties in x
    and y and an all-zero resample."""
    from rankwise.analysis.calibrate import _pair_matrices, _statistics

    rng = np.random.default_rng(11)
    n = 60
    x = np.round(rng.random(n), 1)  # ties
    y = (rng.random(n) < 0.4).astype(float) if binary else np.round(rng.random(n) * 3) / 3
    weights = rng.multinomial(n, np.full(n, 1 / n), size=300).astype(np.float64)
    weights[0] = 0.0  # nothing drawn: undefined
    num_m, a_m, b_m = _pair_matrices(x, y, binary)
    num = np.einsum("bi,ij,bj->b", weights, num_m, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = ((weights @ a_m) * (weights @ b_m) if binary else
               np.sqrt(np.einsum("bi,ij,bj->b", weights, a_m, weights) * np.einsum("bi,ij,bj->b", weights, b_m, weights)))
        want = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    got = _statistics(x, y, binary, weights)
    assert np.array_equal(got, want, equal_nan=True) and np.isnan(got[0]) and np.isfinite(got[1:]).all()
