"""Prediction-powered inference (issue 25): the statistics against an independent reference,
simulations of coverage and width with a planted judge bias and a noise-only judge, and the commands
end to end."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.analysis.label_sample import sample_cases
from rankwise.analysis.ppi import plan_labels, ppi_batch, ppi_mean, ppi_records
from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, write_records
from rankwise.metrics.rag import evaluate_rag
from rankwise.relevance.human import read_labels

Z95 = statistics.NormalDist().inv_cdf(0.975)


def run(*args) -> tuple[int, str, str]:
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


# ------------------------------------------------------------------------ reference (Angelopoulos
# et al. 2023)
def _mean(xs):
    return math.fsum(xs) / len(xs)


def _var(xs):
    m = _mean(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def reference_ppi(y, f, fu, alpha=0.05):
    """PPI++ for a mean written from the paper's formulas with plain Python (no rankwise, no numpy):
    λ = Cov(Y, f) / ((1 + n/N) Var(f ∪ f̃)) clipped to [0, 1]; θ = λ mean(f̃) + mean(Y − λ f);
    Var = λ² Var(f̃)/N + Var(Y − λ f)/n."""
    n, big_n = len(y), len(fu)
    my, mf = _mean(y), _mean(f)
    cov = math.fsum((a - my) * (b - mf) for a, b in zip(y, f, strict=True)) / (n - 1)
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * _var(list(f) + list(fu)))))
    rect = [a - lam * b for a, b in zip(y, f, strict=True)]
    theta = lam * _mean(fu) + _mean(rect)
    se = math.sqrt(lam ** 2 * _var(fu) / big_n + _var(rect) / n)
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return theta, se, lam, (theta - z * se, theta + z * se)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_equals_reference_to_1e12(seed):
    rng = np.random.default_rng(seed)
    n, big_n = 37 + seed, 400 + 50 * seed
    y_all = rng.random(n + big_n) if seed % 2 else (rng.random(n + big_n) < 0.4).astype(float)
    f_all = y_all + rng.normal(0.1, 0.5, n + big_n)
    y, f, fu = y_all[:n], f_all[:n], f_all[n:]
    theta, se, lam, ci = reference_ppi(list(y), list(f), list(fu), alpha=0.1)
    est = ppi_mean(y, f, fu, alpha=0.1)
    assert 0 < lam < 1
    assert abs(est.estimate - theta) < 1e-12 and abs(est.se - se) < 1e-12 and abs(est.lam - lam) < 1e-12
    assert abs(est.ci[0] - ci[0]) < 1e-12 and abs(est.ci[1] - ci[1]) < 1e-12
    assert abs(est.human_mean - _mean(list(y))) < 1e-12
    assert abs(est.judge_mean - _mean(list(f) + list(fu))) < 1e-12
    assert abs(est.effective_n - _var(list(y)) / se ** 2) < 1e-9


def test_classic_ppi_and_clipping_equal_reference():
    y, f, fu = [1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0, 0.0]
    est = ppi_mean(y, f, fu)  # judge anti-correlated: λ clipped to 0, the human-only mean and width
    assert est.lam == 0.0 and est.estimate == est.human_mean == 0.75 and est.se == pytest.approx(est.human_se, abs=1e-15)
    e1, se1, _ = ppi_batch([y], [f], [fu], lam=1.0)
    assert float(e1[0]) == pytest.approx(_mean(fu) + _mean([a - b for a, b in zip(y, f, strict=True)]), abs=1e-12)


# -------------------------------------------------------------------------------------------
# simulations
M, N_LAB, N_UNL, TRUE_P = 2000, 200, 2000, 0.4


def _simulate(judge: str, seed: int):
    rng = np.random.default_rng(seed)
    y = (rng.random((M, N_LAB + N_UNL)) < TRUE_P).astype(float)
    if judge == "overcalls":  # agrees with humans, but calls 30% of irrelevant cases relevant
        f = np.where(y == 1, 1.0, (rng.random(y.shape) < 0.30).astype(float))
    else:  # pure noise, unrelated to the humans
        f = (rng.random(y.shape) < 0.5).astype(float)
    yl, fl, fu = y[:, :N_LAB], f[:, :N_LAB], f[:, N_LAB:]
    est, se, lam = ppi_batch(yl, fl, fu)
    human = yl.mean(axis=1)
    human_se = yl.std(axis=1, ddof=1) / math.sqrt(N_LAB)
    covered = np.abs(est - TRUE_P) <= Z95 * se
    return est, se, human, human_se, covered, f.mean(axis=1)


def test_simulation_planted_overcalling_judge():
    est, se, human, human_se, covered, judge_mean = _simulate("overcalls", 11)
    assert abs(judge_mean.mean() - (TRUE_P + 0.6 * 0.30)) < 0.005  # the judge alone is biased by +0.18
    assert abs(est.mean() - TRUE_P) < 3 * est.std() / math.sqrt(M)  # PPI is unbiased
    assert abs(covered.mean() - 0.95) <= 0.015
    assert (se / human_se).mean() < 0.85  # a good judge narrows the interval


def test_simulation_noise_only_judge():
    est, se, human, human_se, covered, _ = _simulate("noise", 12)
    assert abs(est.mean() - TRUE_P) < 3 * est.std() / math.sqrt(M)
    assert abs(covered.mean() - 0.95) <= 0.015
    ratio = se / human_se
    assert ratio.mean() < 1.01 and np.quantile(ratio, 0.95) < 1.03  # never materially wider


# ---------------------------------------------------------------------------------- undefined
# estimates
def test_undefined_estimates_say_why():
    one = ppi_mean([1.0], [1.0], [0.0, 1.0])
    assert one.ci is None and one.estimate is None and "at least 2" in one.note
    flat = ppi_mean([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0])
    assert flat.ci is None and flat.human_ci is None and "zero variance" in flat.note
    none = ppi_mean([], [], [0.5, 1.0])
    assert none.human_mean is None and none.judge_mean == 0.75 and "no case has human labels" in none.note
    every = ppi_mean([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [])
    assert every.estimate == every.human_mean and every.lam == 0.0 and "every case is labelled" in every.note
    for e in (one, flat, none, every):
        assert "nan" not in json.dumps(e.to_dict()).lower()


# -------------------------------------------------------------------------------------------
# planning
def test_plan_labels_is_the_smallest_n_reaching_the_width():
    rng = np.random.default_rng(5)
    y = (rng.random(60) < 0.5).astype(float)
    f = np.where(rng.random(60) < 0.85, y, 1 - y)
    f_all = np.concatenate([f, (rng.random(2000) < 0.5).astype(float)])
    w = 0.04
    p = plan_labels(y, f, f_all, w, price_per_label=2.0)
    vy, vf, vfp = _var(list(y)), _var(list(f_all)), _var(list(f))
    cov = float(np.cov(y, f, ddof=1)[0, 1])

    def half(n):
        lam = min(1, max(0, cov / ((1 + n / (len(f_all) - n)) * vf)))
        return Z95 * math.sqrt(lam ** 2 * vf / (len(f_all) - n) + (vy - 2 * lam * cov + lam ** 2 * vfp) / n)

    assert half(p.ppi_labels) <= w < half(p.ppi_labels - 1)
    assert p.human_labels == math.ceil(Z95 ** 2 * vy / w ** 2)
    assert p.ppi_labels < p.human_labels
    assert p.to_dict()["ppi_cost"] == 2.0 * p.ppi_labels and p.to_dict()["all_cost"] == 2.0 * 2060



def test_plan_labels_never_suggests_more_labels_than_cases():
    """30 judged cases, a width humans alone would need 1,537 labels for: no '1537 labels' next to
    'label everything: 30' — the plan says it is not reachable, how many it would take and what all
    30 give."""
    from rankwise.report.ppi_text import ppi_plan_lines

    y = [1.0, 0.0] * 5
    f = [1.0, 0.0] * 5
    p = plan_labels(y, f, [1.0, 0.0] * 15, 0.025, min_labels=2)
    needed = math.ceil(Z95 ** 2 * _var(y) / 0.025 ** 2)
    assert needed > 30 and p.human_labels is None and p.human_labels_needed == needed
    assert f"humans alone would need {needed} labels for ±0.025, more than the 30 cases there are" in p.note
    assert f"(labelling all 30 gives ±{Z95 * math.sqrt(_var(y) / 30):.4f})" in p.note
    text = "\n".join(ppi_plan_lines([p]))
    assert f"humans only:            not reachable ({needed} labels needed, 30 cases exist)" in text
    shown = "\n".join(line for line in text.splitlines() if "note:" not in line)
    assert all(int(n) <= 30 for n in re.findall(r"\b(\d+) labels\b(?! needed)", shown)), text
    assert p.to_dict()["human_labels"] is None and p.to_dict()["human_labels_needed"] == needed


def test_ppi_intervals_stay_inside_the_metrics_range():
    """Nearly every case relevant: the normal interval of a [0, 1] metric passes 1.0. With the range
    given it is clipped there, and the note and the JSON say so; without a range (or inside it)
    nothing changes."""
    y, f, fu = [1.0] * 9 + [0.0], [1.0] * 10, [1.0] * 40
    free = ppi_mean(y, f, fu)
    assert free.ci[1] > 1.0 and free.human_ci[1] > 1.0 and free.clipped_to is None
    e = ppi_mean(y, f, fu, value_range=(0.0, 1.0))
    assert e.ci == (free.ci[0], 1.0) and e.human_ci == (free.human_ci[0], 1.0)
    assert e.estimate == free.estimate and e.se == free.se  # the estimate itself is not moved
    assert "interval clipped to [0, 1], the values' possible range" in e.note
    assert e.to_dict()["clipped_to"] == [0.0, 1.0]
    inside = ppi_mean([1, 0] * 20, [1, 0] * 20, [1, 0] * 20, value_range=(0.0, 1.0))
    assert inside.clipped_to is None and inside.note is None


def test_ppi_records_clip_by_the_metric_and_differences_by_their_range():
    from rankwise.analysis.ppi import metric_range

    assert metric_range("hit_rate@1") == (0.0, 1.0) and metric_range("mrr", difference=True) == (-1.0, 1.0)
    assert metric_range("dcg@10") is None  # unbounded above: nothing to clip to

# ------------------------------------------------------------------------------------ records and
# CLI
def _records(n_cases=60, seed=3, depth=3, system_shift=0.0):
    rng = np.random.default_rng(seed)
    recs = []
    truth = {}
    for i in range(n_cases):
        chunks = []
        for r in range(1, depth + 1):
            rel = int(rng.random() < 0.35 + system_shift)
            judge = 1 if rel else int(rng.random() < 0.3)
            truth[(f"q{i:02d}", r)] = rel
            chunks.append(ChunkRecord(rank=r, id=f"c{i}-{r}", text=f"chunk {i} {r}", verdicts={"llm": Verdict(judge)}))
        recs.append(CaseRecord(f"q{i:02d}", question=f"question {i}?", chunks=chunks))
    return recs, truth


def _labels_file(path, truth, cases, system=None):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "rank", "verdict"] + (["system"] if system else []))
        for (q, r), v in sorted(truth.items()):
            if q in cases:
                w.writerow([q, r, v] + ([system] if system else []))
    return path


def test_ppi_records_same_numbers_as_eval_rag(tmp_path):
    recs, truth = _records()
    path = write_records(recs, tmp_path / "sys.jsonl")
    labelled = {f"q{i:02d}" for i in range(0, 60, 3)}
    labels = _labels_file(tmp_path / "labels.csv", truth, labelled)
    res = ppi_records(str(path), "llm", labels=str(labels), metrics=["hit_rate@3", "precision@3", "mrr"])
    judge = evaluate_rag(str(path), "llm", metrics=["hit_rate@3", "precision@3", "mrr"])
    human_recs = [r for r in evaluate_rag(str(path), "human", labels=str(labels), incomplete="skip",
                                          metrics=["mrr"]).records if r.id in labelled]
    e = res.estimates["precision@3"]
    assert (e.n, e.N) == (20, 40)
    assert e.judge_mean == pytest.approx(judge.mean["precision@3"], abs=1e-15)
    human_prec = _mean([_mean([truth[(q, r)] for r in (1, 2, 3)]) for q in sorted(labelled)])
    assert e.human_mean == pytest.approx(human_prec, abs=1e-12)
    mrr_h = [r.scores["human"]["mrr"] for r in human_recs]
    assert res.estimates["mrr"].human_mean == pytest.approx(_mean(mrr_h), abs=1e-12)
    lab_ids = sorted(labelled)
    unl = [q for q in sorted(judge.per_query) if q not in labelled]
    theta, se, lam, _ = reference_ppi([_mean([truth[(q, r)] for r in (1, 2, 3)]) for q in lab_ids],
                                      [judge.per_query[q]["precision@3"] for q in lab_ids],
                                      [judge.per_query[q]["precision@3"] for q in unl])
    assert abs(e.estimate - theta) < 1e-12 and abs(e.se - se) < 1e-12


def test_cli_eval_rag_ppi(tmp_path):
    recs, truth = _records()
    path = write_records(recs, tmp_path / "sys.jsonl")
    labels = _labels_file(tmp_path / "labels.csv", truth, {f"q{i:02d}" for i in range(25)})
    code, out, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi", "-m", "hit_rate@3",
                         "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    e = d["estimates"]["hit_rate@3"]
    ref = ppi_records(str(path), "llm", labels=str(labels), metrics=["hit_rate@3"]).estimates["hit_rate@3"]
    assert (e["n"], e["N"], e["estimate"], e["ci"]) == (25, 35, ref.estimate, list(ref.ci))
    assert "without human labels" in d["summary"]["unlabelled_set"]
    code, out, _ = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi", "-m", "hit_rate@3")
    assert code == 0 and "PPI++" in out and "effective n" in out and "n = 25, N = 35" in out
    assert f"{ref.estimate:.4f}" in out and "nan" not in out.lower()


def test_cli_ppi_without_labelled_case_is_one_line_error(tmp_path):
    recs, truth = _records(10)
    path = write_records(recs, tmp_path / "sys.jsonl")
    labels = tmp_path / "labels.csv"
    labels.write_text("query_id,rank,verdict\nq00,1,1\n")
    code, _, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi")
    assert code == 2 and "every retrieved chunk" in err and "Traceback" not in err
    labels.write_text("query_id,rank,verdict\nq00,1,maybe\n")
    code, _, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi")
    assert code == 2 and "labels.csv:2" in err and "verdict" in err


def test_cli_compare_rag_and_gate_ppi(tmp_path):
    base, truth_b = _records(seed=3)
    cand, truth_c = _records(seed=4, system_shift=0.25)
    pb, pc = write_records(base, tmp_path / "base.jsonl"), write_records(cand, tmp_path / "cand.jsonl")
    cases = {f"q{i:02d}" for i in range(0, 60, 2)}
    sheet = tmp_path / "sheet.csv"
    with open(sheet, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "query_id", "rank", "verdict"])
        for system, truth in (("base", truth_b), ("cand", truth_c)):
            for (q, r), v in sorted(truth.items()):
                if q in cases:
                    w.writerow([system, q, r, v])
    code, out, err = run("compare-rag", pb, pc, "--source", "llm", "--labels", sheet, "--ppi", "-m", "precision@3",
                         "--format", "json")
    assert code == 0, err
    e = json.loads(out)["estimates"]["cand − base: precision@3"]
    jb = evaluate_rag(str(pb), "llm", metrics=["precision@3"]).per_query
    jc = evaluate_rag(str(pc), "llm", metrics=["precision@3"]).per_query

    def prec(truth, q):
        return _mean([truth[(q, r)] for r in (1, 2, 3)])

    lab = sorted(cases)
    unl = sorted(set(jb) - cases)
    theta, se, _, _ = reference_ppi([prec(truth_c, q) - prec(truth_b, q) for q in lab],
                                    [jc[q]["precision@3"] - jb[q]["precision@3"] for q in lab],
                                    [jc[q]["precision@3"] - jb[q]["precision@3"] for q in unl])
    assert (e["n"], e["N"]) == (30, 30)
    assert abs(e["estimate"] - theta) < 1e-12 and abs(e["se"] - se) < 1e-12
    # the candidate improves: the gate passes; reversed it fails (exit 1)
    code, out, _ = run("gate", "--baseline", pb, "--candidate", pc, "--relevance", "llm", "--labels", sheet,
                       "--ppi", "-m", "precision@3")
    assert code == 0 and "PASS" in out
    code, out, _ = run("gate", "--baseline", pc, "--candidate", pb, "--relevance", "llm", "--labels", sheet,
                       "--ppi", "-m", "precision@3")
    assert code == 1 and "FAIL" in out
    bad = tmp_path / "bad.csv"
    bad.write_text("system,query_id,rank,verdict\nother,q00,1,1\n")
    code, _, err = run("compare-rag", pb, pc, "--source", "llm", "--labels", bad, "--ppi")
    assert code == 2 and "bad.csv:2" in err and "system" in err


def test_gate_ppi_undecided_without_interval(tmp_path):
    base, truth = _records(10)
    pb = write_records(base, tmp_path / "base.jsonl")
    pc = write_records(base, tmp_path / "cand.jsonl")
    labels = tmp_path / "l.csv"  # by chunk id, no system column: the label goes to every system that retrieved it
    labels.write_text("query_id,chunk_id,verdict\n" + "".join(f"q00,c0-{r},{truth[('q00', r)]}\n" for r in (1, 2, 3)))
    code, out, err = run("gate", "--baseline", pb, "--candidate", pc, "--relevance", "llm", "--labels", labels,
                         "--ppi", "-m", "precision@3")
    assert code == 2 and "UNDECIDED" in out, err and "at least 2 labelled cases" in out


def test_sample_labels_sheet_round_trip(tmp_path):
    base, truth = _records(60, seed=3)
    cand, _ = _records(60, seed=4)
    pb, pc = write_records(base, tmp_path / "base.jsonl"), write_records(cand, tmp_path / "cand.jsonl")
    sheet = tmp_path / "sheet.csv"
    code, _, err = run("sample-labels", pb, pc, "--relevance", "llm", "-n", "12", "--seed", "3", "--out", sheet)
    assert code == 0, err
    with open(sheet, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    picked = sample_cases({"base": base, "cand": cand}, 12, seed=3)
    assert sorted({r["query_id"] for r in rows}) == picked and len(rows) == 12 * 3 * 2
    assert {r["system"] for r in rows} == {"base", "cand"} and all(r["verdict"] == "" for r in rows)
    again = tmp_path / "again.csv"
    run("sample-labels", pb, pc, "--relevance", "llm", "-n", "12", "--seed", "3", "--out", again)
    assert again.read_text() == sheet.read_text()
    # a labeller fills the verdict column; the reader takes the sheet back as is
    for r in rows:
        r["verdict"] = "yes" if int(r["rank"]) == 1 else "no"
    with open(sheet, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    labs = read_labels(str(sheet))
    assert len(labs) == 72 and {lab.system for lab in labs} == {"base", "cand"}
    code, out, err = run("compare-rag", pb, pc, "--source", "llm", "--labels", sheet, "--ppi", "-m", "mrr",
                         "--format", "json")
    assert code == 0, err and json.loads(out)["estimates"]["cand − base: mrr"]["n"] == 12
    code, _, err = run("sample-labels", pb, "--relevance", "llm", "-n", "99", "--out", tmp_path / "x.csv")
    assert code == 2 and "between 1 and the 60 questions" in err


def test_sample_is_stratified_proportionally():
    recs = [CaseRecord(f"q{i:03d}", chunks=[ChunkRecord(rank=1, verdicts={"llm": Verdict(int(i < 20))})])
            for i in range(100)]
    for seed in range(5):
        picked = sample_cases({"a": recs}, 30, seed=seed)
        assert len(picked) == 30 and sum(int(q[1:]) < 20 for q in picked) == 6  # 20% hits -> 6 of 30


def test_cli_plan_labels(tmp_path):
    recs, truth = _records(300, seed=8)
    path = write_records(recs, tmp_path / "sys.jsonl")
    labels = _labels_file(tmp_path / "pilot.csv", truth, {f"q{i:02d}" for i in range(40)})
    code, out, err = run("plan-labels", path, "--relevance", "llm", "--labels", labels, "-m", "precision@3",
                         "--half-width", "0.05", "--price-per-label", "3", "--format", "json")
    assert code == 0, err
    p = json.loads(out)[0]
    assert p["pilot"] == 40 and p["total"] == 300 and p["ppi_cost"] == 3 * p["ppi_labels"]
    assert p["ppi_labels"] < p["human_labels"] and p["all_cost"] == 900
    code, out, _ = run("plan-labels", path, "--relevance", "llm", "--labels", labels, "-m", "precision@3",
                       "--half-width", "0.05", "--price-per-label", "3")
    assert code == 0 and f"{p['ppi_labels']} labels (cost {3 * p['ppi_labels']:,.2f})" in out
    code, _, err = run("plan-labels", path, "--labels", labels, "--half-width", "0", "-m", "mrr")
    assert code == 2 and "half-width" in err


def test_cli_ppi_csv_and_refusals(tmp_path):
    recs, truth = _records(30)
    path = write_records(recs, tmp_path / "sys.jsonl")
    labels = _labels_file(tmp_path / "labels.csv", truth, {f"q{i:02d}" for i in range(10)})
    code, out, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi", "-m", "mrr,hit_rate@1",
                         "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(out.splitlines()))
    ref = ppi_records(str(path), "llm", labels=str(labels), metrics=["mrr"]).estimates["mrr"]
    assert [r["metric"] for r in rows] == ["mrr", "hit_rate@1"]
    assert float(rows[0]["estimate"]) == ref.estimate and int(rows[0]["n"]) == 10 and int(rows[0]["N"]) == 20
    code, _, err = run("eval-rag", path, "--relevance", "llm", "--ppi")
    assert code == 2 and "PPI needs human labels" in err and "--labels" in err
    code, _, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi", "--records",
                       tmp_path / "out.jsonl")
    assert code == 2 and "--records is not available with --ppi" in err
    code, _, err = run("compare-rag", path, path, "--source", "llm", "--labels", labels, "--ppi", "--html",
                       tmp_path / "r.html")
    assert code == 2 and "--html is not available with --ppi" in err
    code, _, err = run("eval-rag", path, "--relevance", "llm", "--labels", labels, "--ppi", "--alpha", "1.5")
    assert code == 2 and "alpha" in err


def test_eval_rag_ppi_takes_its_system_from_a_multi_system_sheet(tmp_path):
    base, truth_b = _records(seed=3)
    path = write_records(base, tmp_path / "base.jsonl")
    sheet = tmp_path / "sheet.csv"
    cases = {f"q{i:02d}" for i in range(12)}
    with open(sheet, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "query_id", "rank", "verdict"])
        for system in ("base", "other"):
            for (q, r), v in sorted(truth_b.items()):
                if q in cases:
                    w.writerow([system, q, r, 1 - v if system == "other" else v])
    code, out, err = run("eval-rag", path, "--relevance", "llm", "--labels", sheet, "--ppi", "-m", "precision@3",
                         "--format", "json")
    assert code == 0, err
    e = json.loads(out)["estimates"]["precision@3"]
    assert e["n"] == 12 and e["human_mean"] == pytest.approx(
        _mean([_mean([truth_b[(q, r)] for r in (1, 2, 3)]) for q in sorted(cases)]), abs=1e-12)
    renamed = write_records(base, tmp_path / "run1.jsonl")
    code, _, err = run("eval-rag", renamed, "--relevance", "llm", "--labels", sheet, "--ppi")
    assert code == 2 and "sheet.csv:2" in err and "'run1'" in err and "system" in err


def test_gate_ppi_refuses_floors_and_qrels(tmp_path):
    base, truth = _records(10)
    pb = write_records(base, tmp_path / "base.jsonl")
    labels = _labels_file(tmp_path / "l.csv", truth, {"q00", "q01"})
    code, _, err = run("gate", "--baseline", pb, "--candidate", pb, "--labels", labels, "--ppi", "-m", "mrr",
                       "--min", "mrr=0.5")
    assert code == 2 and "--min floors are not used with --ppi" in err
    code, _, err = run("gate", "--baseline", pb, "--candidate", pb, "--labels", labels, "--ppi", "-m", "mrr",
                       "--qrels", labels)
    assert code == 2 and "--qrels is not used with --ppi" in err



@pytest.mark.parametrize("option", [["--test", "t"], ["--correction", "holm"], ["--permutations", "500"],
                                    ["--seed", "7"], ["--missing", "skip"], ["--worst", "3"]])
def test_gate_ppi_refuses_the_randomization_tests_options(tmp_path, option):
    """--ppi decides by its own interval: a test, correction, permutation count, seed, missing rule
    or --worst typed beside it would be ignored, so it is refused in one line (the defaults, not
    typed, are fine)."""
    base, truth = _records(10)
    pb = write_records(base, tmp_path / "base.jsonl")
    labels = _labels_file(tmp_path / "l.csv", truth, {"q00", "q01"})
    code, _, err = run("gate", "--baseline", pb, "--candidate", pb, "--labels", labels, "--ppi", "-m", "mrr",
                       *option)
    assert code == 2 and f"{option[0]} is not available with --ppi" in err, err
    assert len(err.strip().splitlines()) == 1

def test_the_output_guard_knows_the_label_sheet_header():
    from rankwise._outputs import LABEL_SHEET_HEADER
    from rankwise.analysis.label_sample import SHEET_COLUMNS

    assert ",".join(SHEET_COLUMNS).encode() == LABEL_SHEET_HEADER


def test_partially_labelled_cases_are_warned_about_once_by_every_ppi_command(tmp_path):
    """eval-rag --ppi warned of cases labelled on some chunks only; plan-labels, compare-rag --ppi
    and gate --ppi counted them as unlabelled in silence. Now the one warning comes from the
    library, in each (issue 33)."""
    base, truth_b = _records(seed=3)
    cand, truth_c = _records(seed=4)
    pb, pc = write_records(base, tmp_path / "base.jsonl"), write_records(cand, tmp_path / "cand.jsonl")
    full = {f"q{i:02d}" for i in range(0, 60, 2)}
    sheet = tmp_path / "sheet.csv"
    with open(sheet, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "query_id", "rank", "verdict"])
        for system, truth in (("base", truth_b), ("cand", truth_c)):
            for (q, r), v in sorted(truth.items()):
                if q in full or (system == "cand" and q in ("q01", "q03") and r == 1):  # 2 cases of cand: rank 1 only
                    w.writerow([system, q, r, v])
    said = ("2 cases have human labels on some chunks only; they count as unlabelled (label every chunk of a "
            "case), e.g. ['q01', 'q03']")
    runs = {"eval-rag": ["eval-rag", pc, "--relevance", "llm", "--labels", sheet, "--ppi", "-m", "precision@3"],
            "plan-labels": ["plan-labels", pc, "--relevance", "llm", "--labels", sheet, "-m", "precision@3",
                            "--half-width", "0.05"],
            "compare-rag": ["compare-rag", pb, pc, "--source", "llm", "--labels", sheet, "--ppi", "-m", "precision@3"],
            "gate": ["gate", "--baseline", pb, "--candidate", pc, "--relevance", "llm", "--labels", sheet, "--ppi",
                     "-m", "precision@3"]}
    for command, args in runs.items():
        code, _, err = run(*args)
        assert code in (0, 1), (command, err)
        assert err.count("some chunks only") == 1, (command, err)
        whose = "" if command in ("eval-rag", "plan-labels") else "cand: "  # several systems: which one
        assert f"rankwise: warning: {whose}{said}\n" in err, (command, err)
    code, _, err = run("plan-labels", pb, "--relevance", "llm", "--labels", sheet, "-m", "precision@3", "--half-width",
                       "0.05")
    assert code == 0 and "some chunks only" not in err  # base's labels are whole cases


def test_human_labels_honour_the_sheets_system_column(tmp_path):
    """One labelling sheet for two systems (its ``system`` column, as ``--ppi`` reads it):
    ``--relevance human`` takes each records file's own rows — eval-rag by the file's name,
    compare-rag by each system's — and gives the numbers of a sheet holding that system's rows alone
    (before: a rank mismatch or the wrong rows)."""
    base, truth_b = _records(12, seed=3)
    cand, truth_c = _records(12, seed=8, system_shift=0.3)
    pb, pc = write_records(base, tmp_path / "bm25.jsonl"), write_records(cand, tmp_path / "hybrid.jsonl")
    cases = {f"q{i:02d}" for i in range(12)}
    one_b = _labels_file(tmp_path / "b.csv", truth_b, cases)
    one_c = _labels_file(tmp_path / "c.csv", truth_c, cases)
    sheet = tmp_path / "sheet.csv"
    rows_b = _labels_file(tmp_path / "sb.csv", truth_b, cases, system="bm25").read_text().splitlines()
    rows_c = _labels_file(tmp_path / "sc.csv", truth_c, cases, system="hybrid").read_text().splitlines()
    sheet.write_text("\n".join(rows_b + rows_c[1:]) + "\n")
    assert truth_b != truth_c
    for path, alone in ((pb, one_b), (pc, one_c)):
        want = evaluate_rag(str(path), "human", labels=str(alone), metrics=["precision@3", "mrr"]).mean
        assert evaluate_rag(str(path), "human", labels=str(sheet), metrics=["precision@3", "mrr"]).mean == want
        code, out, err = run("eval-rag", path, "-r", "human", "--labels", sheet, "-m", "precision@3,mrr",
                             "--format", "json")
        assert code == 0, err
        assert json.loads(out)["mean"] == want
    code, out, err = run("compare-rag", pb, pc, "--source", "human", "--labels", sheet, "-m", "mrr", "--format",
                         "json")
    assert code == 0, err
    got = json.loads(out)
    means = {s: got["means"][s]["mrr"] for s in ("bm25", "hybrid")}
    assert means == {"bm25": evaluate_rag(str(pb), "human", labels=str(one_b), metrics=["mrr"]).mean["mrr"],
                     "hybrid": evaluate_rag(str(pc), "human", labels=str(one_c), metrics=["mrr"]).mean["mrr"]}
    # a records file named like neither system: one line naming the column and the choices
    other = write_records(base, tmp_path / "run1.jsonl")
    code, _, err = run("eval-rag", other, "-r", "human", "--labels", sheet)
    assert code == 2 and "['bm25', 'hybrid']" in err and "'run1'" in err and "system" in err
    assert len(err.strip().splitlines()) == 1
