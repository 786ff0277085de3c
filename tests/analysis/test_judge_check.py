"""`rankwise judge-check` and rankwise.analysis.judge_check: planted judges recovered (kappa,
leniency, tau by hand and against scipy), undefined estimates said, the sample, the CLI's outputs
and errors, the loopback judge."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.analysis.judge_check import judge_check, kappa_of_confusion, kendall_tau_b
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.relevance.agreement import cohen_kappa, weighted_kappa
from rankwise.workflows.judge_check_run import run_judge_check, sample_pairs

# Nine pairs over three topics, grades 0-2 (the hand examples).
HUMAN = {"q1": {"a": 2, "b": 1, "c": 0}, "q2": {"d": 2, "e": 0, "f": 0}, "q3": {"g": 1, "h": 0, "i": 1}}
SMALL_RUNS = {"x": {"q1": ["a"], "q2": ["d"], "q3": ["g"]}, "y": {"q1": ["b"], "q2": ["e"], "q3": ["i"]},
              "z": {"q1": ["c"], "q2": ["f"], "q3": ["h"]}}


def _changed(qrels, q, d, grade):
    out = {t: dict(docs) for t, docs in qrels.items()}
    out[q][d] = grade
    return out


# ----------------------------------------------------------------------------------------- planted
# judges
def test_judge_agreeing_but_on_one_grade():
    """h goes 0 -> 1. Binarised: confusion [[3, 1], [0, 5]]; po = 8/9, pe = 4/9*3/9 + 5/9*6/9 =
    42/81, kappa = (72 - 42) / (81 - 42) = 10/13. Quadratic: one disagreement of weight 1 over an
    expected 95/9 (human grades 0:4 1:3 2:2, judge 0:3 1:4 2:2), kappa = 1 - 9/95 = 86/95. Leniency:
    +1 over 9 pairs."""
    judge = _changed(HUMAN, "q3", "h", 1)
    c = judge_check(HUMAN, judge, SMALL_RUNS, metric="P@1", resamples=200)
    a = c.labels
    assert (a.n, a.topics, a.confusion) == (9, 3, [[3, 1], [0, 5]])
    assert a.kappa == pytest.approx(10 / 13) and a.graded_kappa == pytest.approx(86 / 95)
    assert a.leniency == pytest.approx(1 / 9) and a.binary_leniency == pytest.approx(1 / 9)
    assert a.graded_confusion == [[3, 1, 0], [0, 3, 0], [0, 0, 2]]
    # the systems: x hits a relevant doc on every topic; y on 2 (b, i); z on none, and under the
    # judge on q3 (h)
    assert c.systems.human_means == pytest.approx({"x": 1.0, "y": 2 / 3, "z": 0.0})
    assert c.systems.judge_means == pytest.approx({"x": 1.0, "y": 2 / 3, "z": 1 / 3})
    assert c.systems.tau == 1.0 and c.systems.flips == 0
    assert a.kappa_ci[0] <= a.kappa <= a.kappa_ci[1] and a.leniency_ci[0] <= a.leniency <= a.leniency_ci[1]


def test_judge_biased_but_rank_preserving():
    """Every grade +1 and the judge's relevance threshold +1: the binarised labels are the human
    ones (kappa 1, relevant share +0), leniency exactly +1, every system scores the same, tau 1,
    nothing flips. Quadratic kappa: 9 disagreements of weight 1 over an expected 181/9 (human 0:4
    1:3 2:2, judge 1:4 2:3 3:2), 1 - 81/181."""
    judge = {q: {d: g + 1 for d, g in docs.items()} for q, docs in HUMAN.items()}
    c = judge_check(HUMAN, judge, SMALL_RUNS, metric="P@1", judge_level=2, resamples=200)
    assert c.labels.kappa == 1.0 and c.labels.binary_leniency == 0.0
    assert c.labels.leniency == 1.0 and c.labels.leniency_ci == (1.0, 1.0)
    assert c.labels.graded_kappa == pytest.approx(100 / 181)
    assert c.systems.human_means == c.systems.judge_means
    assert c.systems.tau == 1.0 and c.systems.top_k_tau == 1.0 and c.systems.flips == 0


def _reversing_collection():
    """40 topics, docs r (grade 1), n1, n2, n3 (grade 0). P@1 of four systems: A finds r unless i %
    10 == 0 (0.9), B when i % 10 < 6 (0.6), C when i % 10 < 3 (0.3), else n2; D never (n3). The
    judge calls n2 relevant on the topics i % 10 >= 6: C scores 0.3 + 0.4 = 0.7 under it, above B;
    nothing else moves."""
    human, judge, runs = {}, {}, {s: {} for s in "ABCD"}
    for i in range(40):
        q = f"t{i:02d}"
        human[q] = {"r": 1, "n1": 0, "n2": 0, "n3": 0}
        judge[q] = dict(human[q], n2=int(i % 10 >= 6))
        runs["A"][q] = ["r" if i % 10 else "n1"]
        runs["B"][q] = ["r" if i % 10 < 6 else "n1"]
        runs["C"][q] = ["r" if i % 10 < 3 else "n2"]
        runs["D"][q] = ["n3"]
    return human, judge, runs


def test_judge_reversing_two_systems():
    """One discordant pair (B, C) of six: tau = (5 - 1) / 6 = 2/3; over the human top 3 (A, B, C):
    (2 - 1) / 3. Labels: 160 pairs, 40 relevant; the judge adds 16: confusion [[104, 16], [0, 40]],
    po = 144/160, pe = 120/160*104/160 + 40/160*56/160, kappa = (0.9 - 0.575) / 0.425 = 13/17;
    leniency 16/160."""
    from scipy import stats

    human, judge, runs = _reversing_collection()
    c = judge_check(human, judge, runs, metric="P@1", test="t", correction="none", resamples=300)
    s = c.systems
    assert s.human_means == pytest.approx({"A": 0.9, "B": 0.6, "C": 0.3, "D": 0.0})
    assert s.judge_means == pytest.approx({"A": 0.9, "B": 0.6, "C": 0.7, "D": 0.0})
    names = list(runs)
    scipy_tau = stats.kendalltau([s.human_means[n] for n in names], [s.judge_means[n] for n in names]).statistic
    assert s.tau == pytest.approx(2 / 3) == pytest.approx(scipy_tau)
    assert s.top_systems == ["A", "B", "C"] and s.top_k_tau == pytest.approx(1 / 3)
    assert c.labels.confusion == [[104, 16], [0, 40]] and c.labels.kappa == pytest.approx(13 / 17)
    assert c.labels.leniency == pytest.approx(0.1)
    # pairwise decisions, recomputed with scipy's paired t-test on the per-topic P@1 under each
    # label set
    per = {side: {n: np.array([float(lab[q].get(runs[n][q][0], 0) >= 1) for q in sorted(human)]) for n in names}
           for side, lab in (("human", human), ("judge", judge))}

    def decision(side, a, b):
        x, y = per[side][a], per[side][b]
        p = 1.0 if np.all(x == y) else stats.ttest_rel(x, y).pvalue
        return "none" if not p < 0.05 else a if x.mean() > y.mean() else b

    expected = {(a, b): (decision("human", a, b), decision("judge", a, b)) for i, a in enumerate(names)
                for b in names[i + 1:]}
    assert {(p.a, p.b): (p.human, p.judge) for p in s.pairs} == expected
    assert s.flips == sum(h != j for h, j in expected.values()) >= 1
    assert expected[("B", "C")] == ("B", "none")  # B significantly better under the humans, not under the judge


def test_tau_matches_scipy_on_random_scores():
    from scipy import stats

    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(3, 9))
        x = rng.integers(0, 4, n).astype(float)  # ties on purpose: tau-b
        y = rng.integers(0, 4, n).astype(float)
        ours, theirs = kendall_tau_b(x, y), stats.kendalltau(x, y).statistic
        assert (ours is None) == math.isnan(theirs)
        if ours is not None:
            assert ours == pytest.approx(theirs)


def test_kappa_of_confusion_is_the_agreement_modules_kappa():
    """The same number: the bootstrap's kappa (from a confusion matrix) and relevance.agreement's
    (from pairs)."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        pairs = [(int(a), int(b)) for a, b in rng.integers(0, 4, size=(int(rng.integers(2, 30)), 2))]
        lo, hi = min(min(p) for p in pairs), max(max(p) for p in pairs)
        m = np.zeros((hi - lo + 1, hi - lo + 1))
        for a, b in pairs:
            m[a - lo, b - lo] += 1
        for weights, ref in ((None, cohen_kappa(pairs)), ("quadratic", weighted_kappa(pairs))):
            ours = kappa_of_confusion(m, weights)
            assert (ours is None) == (ref is None)
            if ours is not None:
                assert ours == pytest.approx(ref)


def test_swapping_the_label_sets_negates_leniency_and_keeps_kappa_and_tau():
    human, judge, runs = _reversing_collection()
    ab = judge_check(human, judge, runs, metric="P@1", resamples=50)
    ba = judge_check(judge, human, runs, metric="P@1", resamples=50)
    assert ba.labels.leniency == -ab.labels.leniency and ba.labels.kappa == pytest.approx(ab.labels.kappa)
    assert ba.systems.tau == pytest.approx(ab.systems.tau)


def test_identical_labels_agree_perfectly():
    human, _, runs = _reversing_collection()
    c = judge_check(human, human, runs, metric="P@1", resamples=50)
    assert (c.labels.kappa, c.labels.graded_kappa, c.labels.leniency, c.systems.tau, c.systems.flips) == \
        (1.0, 1.0, 0.0, 1.0, 0)
    assert c.labels.kappa_ci == (1.0, 1.0) and c.notes == [] and c.warnings == []


# -----------------------------------------------------------------------------------------
# undefined cases
def test_undefined_estimates_are_none_with_a_sentence():
    one_class = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    c = judge_check(one_class, one_class, {"x": {"q1": ["a"]}, "y": {"q1": ["z"]}}, metric="P@1", resamples=20)
    assert c.labels.kappa is None and c.labels.graded_kappa is None and c.systems.tau is None
    assert any("one class only" in n for n in c.notes) and any("with 2 systems" in n for n in c.notes)
    text = json.dumps(c.to_dict())
    assert "NaN" not in text and json.loads(text)["systems"]["tau"] is None
    tied = judge_check(HUMAN, HUMAN, {"x": {"q1": ["a"]}, "y": {"q1": ["a"]}, "z": {"q1": ["a"]}}, metric="P@1",
                       resamples=20)
    assert tied.systems.tau is None and any("same mean" in n for n in tied.notes)
    lenient = {q: {d: 1 for d in docs} for q, docs in HUMAN.items()}
    all_yes = judge_check(HUMAN, lenient, SMALL_RUNS, metric="P@1", resamples=20)
    assert all_yes.labels.kappa == 0.0 and any("every compared pair relevant" in n for n in all_yes.notes)


def test_bad_inputs_are_one_error():
    with pytest.raises(InputError, match="share no"):
        judge_check(HUMAN, {"q9": {"zz": 1}}, SMALL_RUNS)
    with pytest.raises(InputError, match="unknown test"):
        judge_check(HUMAN, HUMAN, SMALL_RUNS, test="z")
    with pytest.raises(InputError, match="names no run"):
        judge_check(HUMAN, HUMAN, SMALL_RUNS, judge_model="m", reranked_by={"nope": "m"})


def test_circularity_from_option_tag_or_name():
    c = judge_check(HUMAN, HUMAN, SMALL_RUNS, metric="P@1", resamples=20, judge_model="qwen2.5:7b",
                    reranked_by={"x": "llm:qwen2.5:7b", "y": "other"}, tags={"z": "bm25+llm:qwen2.5:7b"})
    assert [w.split()[0] for w in c.warnings] == ["x", "z"]
    assert c.to_dict()["warnings"] == c.warnings


# -----------------------------------------------------------------------------------------------
# the sample
def test_sample_is_seeded_stratified_and_pooled():
    human = {"q1": {f"d{i}": i % 3 for i in range(30)}, "q2": {"d0": 1, "e": 2}}
    runs = {"s": {"q1": [f"d{i}" for i in range(20)], "q2": ["d0", "x"]}}
    a = sample_pairs(human, runs, depth=20, per_grade=2, seed=1)
    assert a == sample_pairs(human, runs, depth=20, per_grade=2, seed=1)
    assert sorted(human["q1"][d] for d in a["q1"]) == [0, 0, 1, 1, 2, 2]  # two of each grade
    assert all(int(d[1:]) < 20 for d in a["q1"]) and a["q2"] == ["d0"]  # only pooled documents
    assert len(sample_pairs(human, runs, topics=1, per_grade=2)) == 1
    with pytest.raises(InputError, match="nothing to sample"):
        sample_pairs(human, {"s": {"q1": ["zz"]}})


# ------------------------------------------------------------------------------------------------------
# CLI
def _write_qrels(path, qrels):
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q in qrels for d, g in qrels[q].items()))
    return path


def _write_run(path, run, tag):
    path.write_text("".join(f"{q} Q0 {d} {i + 1} {10 - i} {tag}\n" for q, ds in run.items() for i, d in enumerate(ds)))
    return path


@pytest.fixture
def files(tmp_path):
    human, judge, runs = _reversing_collection()
    paths = [_write_run(tmp_path / f"{n}.trec", r, n) for n, r in runs.items()]
    return _write_qrels(tmp_path / "human.qrels", human), _write_qrels(tmp_path / "judge.qrels", judge), paths


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env={"RANKWISE_JUDGE_MODEL": ""})


def test_cli_json_is_the_librarys(files):
    human, judge, runs = files
    r = _cli("judge-check", human, *runs, "--labels", judge, "-m", "P@1", "--format", "json", "--resamples", 100,
             "--reranked-by", "C=gpt")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    lib = run_judge_check(human, runs, judge_labels=judge, metric="P@1", resamples=100, reranked_by={"C": "gpt"})
    assert out == json.loads(json.dumps(lib.to_dict()))
    assert out["systems"]["tau"] == pytest.approx(2 / 3) and out["labels"]["kappa"] == pytest.approx(13 / 17)
    assert out["warnings"] == []  # the labels were given: no judge model to be circular with
    for key in ("kappa_ci", "graded_kappa", "leniency", "confusion", "graded_confusion"):
        assert key in out["labels"]
    for key in ("tau_ci", "top_k_tau", "top_k_tau_ci", "flips", "pairs", "human_means", "judge_means"):
        assert key in out["systems"]


def test_cli_table(files):
    human, judge, runs = files
    r = _cli("judge-check", human, *runs, "--labels", judge, "-m", "P@1", "--resamples", 100)
    assert r.exit_code == 0, r.output
    assert re.search(r"kappa, binarised +0\.7647 +\[", r.output)
    assert re.search(r"Kendall tau-b \(95% interval\) +0\.6667", r.output)
    assert "top-3 tau (A, B, C)   0.3333" in r.output
    assert "B vs C: human says B is better" in r.output


@pytest.mark.parametrize("extra, message", [
    (["--reranked-by", "C"], "expected RUN=MODEL"),
    (["--reranked-by", "Q=m"], "names no run 'Q'"),
    (["--resamples", "0"], "must be >= 1"),
    ([], "no model given"),
])
def test_cli_bad_options_exit_2_in_one_line(files, extra, message):
    human, judge, runs = files
    labels = ["--labels", judge] if extra else []
    r = _cli("judge-check", human, *runs, *labels, *extra)
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1


def test_cli_bad_label_file_names_file_and_line(files, tmp_path):
    human, _, runs = files
    bad = tmp_path / "bad.qrels"
    bad.write_text("t00 0 r 1\nt01 0 r high\n")
    r = _cli("judge-check", human, *runs, "--labels", bad)
    assert r.exit_code == 2 and "bad.qrels:2" in r.output and "relevance" in r.output, r.output


def test_cli_loopback_judge_end_to_end(server, shared_data, tmp_path):
    """The loopback judge (relevant iff it shares a keyword with the query; graded: shared keywords,
    at most 3) on a Cranfield sample: every sampled pair labelled, the labels written are the ones
    compared, and a rerun is answered from the cache."""
    from _synthetic_runs import qrels_dict, system_run, write_trec

    cran = shared_data / "cranfield"
    qrels = qrels_dict(cran / "qrels" / "test.tsv")
    runs = []
    for name, strength in (("weak", 0.5), ("mid", 1.0), ("strong", 2.0)):
        runs.append(tmp_path / f"{name}.trec")
        write_trec(system_run(qrels, strength=strength, seed=len(runs)), runs[-1], name)
    args = ["judge-check", cran / "qrels" / "test.tsv", *runs, "--beir", cran, "--topics", 8, "--per-grade", 2,
            "--graded", "--model", "loopback", "--base-url", server.base_url, "--api-key", "x", "--cache",
            tmp_path / "c.sqlite", "--judge-qrels", tmp_path / "j.qrels", "--format", "json", "--quiet",
            "--reranked-by", "strong=loopback"]
    r = _cli(*args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    j = out["judge"]
    assert j["model"] == "loopback" and j["ok"] == j["pairs"] == out["labels"]["n"] and j["cached"] == 0
    assert out["labels"]["judge_level"] == 2 and out["labels"]["topics"] == 8
    assert [w.split()[0] for w in out["warnings"]] == ["strong"]
    lines = (tmp_path / "j.qrels").read_text().splitlines()
    assert len(lines) == j["pairs"] and {int(x.split()[3]) for x in lines} <= {0, 1, 2, 3}
    again = _cli(*args[:-7], "--format", "json", "--quiet")  # no --judge-qrels: the file is there already
    assert again.exit_code == 0, again.output
    rerun = json.loads(again.output)
    assert rerun["judge"]["cached"] == j["pairs"] and rerun["judge"]["requests"] == 0
    assert rerun["labels"] == out["labels"] and rerun["warnings"] == []


def test_cli_dry_run_prices_the_sample(srv, shared_data, tmp_path):
    cran = shared_data / "cranfield"
    run = tmp_path / "r.trec"
    from _synthetic_runs import qrels_dict, system_run, write_trec

    write_trec(system_run(qrels_dict(cran / "qrels" / "test.tsv"), strength=1.0, seed=1), run, "r")
    r = _cli("judge-check", cran / "qrels" / "test.tsv", run, "--beir", cran, "--topics", 3, "--per-grade", 1,
             "--model", "m", "--base-url", srv.base_url, "--cache", tmp_path / "c.sqlite", "--dry-run",
             "--price-in", 1, "--price-out", 1)
    assert r.exit_code == 0, r.output
    m = re.search(r"dry run: (\d+) pairs sampled from 3 topics .*\n  judge: (\d+) calls to m at (\S+) \(0 cached\)", r.output)
    assert m and m.group(1) == m.group(2) and m.group(3) == srv.base_url, r.output
    assert srv.stats()["requests"] == 0  # a dry run calls nothing
