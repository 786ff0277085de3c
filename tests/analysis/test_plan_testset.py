"""`rankwise plan-testset` / rankwise.analysis.plan: a planned sample size achieves its power when
sets of that size are simulated independently and tested with analysis/significance.py's own tests
(within ±3 points over 2,000 sets), agrees with the normal formula where it should, and the MDE is
the effect it plans for."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.analysis.plan import formula_n, minimum_detectable_effect, plan_sample_size, simulated_power
from rankwise.analysis.significance import paired_t_test, randomization_test
from rankwise.cli import main
from rankwise.errors import InputError


def _achieved(n: int, draw, test, sets: int = 2000, seed: int = 12345) -> float:
    """Independent sets of n differences (a seed the plan never used), each tested by
    significance.py."""
    rng = np.random.default_rng(seed)
    return float(np.mean([test(draw(rng, n)) < 0.05 for _ in range(sets)]))


def test_planned_n_achieves_its_power_t_test_on_normal_differences():
    """σ 0.2, d 0.05, α 0.05, power 0.8: the formula says 126; the simulated plan is within a few
    questions, and 2,000 independent sets of that size reject at 0.8 ± 0.03 with scipy's paired
    t-test."""
    plan = plan_sample_size(0.05, sd=0.2, test="t", sims=2000)
    assert plan.formula == 126 and abs(plan.n - 126) <= 5, plan
    rate = _achieved(plan.n, lambda rng, n: rng.normal(0.05, 0.2, n), paired_t_test)
    assert abs(rate - 0.8) <= 0.03, (plan.n, rate)


def test_planned_n_achieves_its_power_randomization_test_on_a_lumpy_pilot():
    """A pilot like a binary metric's differences (most 0, some ±1): the plan for the sign-flip
    test, checked with randomization_test itself (1,000 permutations) on 2,000 independent resamples
    of the pilot shifted to the effect."""
    rng = np.random.default_rng(3)
    pilot = rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0], size=60)
    effect = 0.1
    plan = plan_sample_size(effect, diffs=pilot, test="randomization", sims=2000, permutations=1000)
    centred = pilot - pilot.mean()
    rate = _achieved(plan.n, lambda r, n: r.choice(centred, n) + effect,
                     lambda d: randomization_test(d, permutations=1000, seed=None), sets=2000)
    assert abs(rate - 0.8) <= 0.03, (plan.n, rate)



def test_the_simulations_vectorised_t_test_is_significance_pys():
    """The same number two ways: the simulation's row-wise t-test p-values equal paired_t_test's,
    set by set (a constant set included: p 1 when it is 0, else 0)."""
    from rankwise.analysis.plan import _p_values

    rng = np.random.default_rng(8)
    x = np.vstack([rng.normal(0.03, 0.2, size=(50, 12)), np.zeros((1, 12)), np.full((1, 12), 0.1)])
    ours = _p_values(x, "t", 100, 0)
    assert ours.tolist() == pytest.approx([paired_t_test(row) for row in x], rel=1e-12, abs=1e-15)

def test_power_grows_with_n_and_effect_and_the_mde_is_the_planned_effect():
    powers = [simulated_power(n, 0.05, sd=0.2, test="t") for n in (20, 60, 120, 240)]
    assert powers == sorted(powers) and powers[0] < 0.4 < 0.95 < powers[-1]
    mde = minimum_detectable_effect(126, sd=0.2, test="t", sims=2000)
    assert abs(mde - 0.05) < 0.004, mde
    assert minimum_detectable_effect(500, sd=0.2, test="t") < mde  # more questions, smaller effects seen


def test_formula_by_hand():
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    assert formula_n(0.2, 0.05) == math.ceil(((z_a + z_b) * 0.2 / 0.05) ** 2) == 126
    assert formula_n(0.2, 0.05, power=0.9) > 126


def test_undefined_and_unreachable_plans_say_why():
    flat = plan_sample_size(0.05, diffs=[0.1] * 10)
    assert flat.n is None and flat.formula is None and "no variance" in flat.note
    one = plan_sample_size(0.05, diffs=[0.1])
    assert one.n is None and "at least 2 questions" in one.note
    far = plan_sample_size(0.001, sd=0.5, test="t", max_n=2000, sims=200)
    assert far.n is None and "not reachable" in far.note
    with pytest.raises(InputError, match="effect must be > 0"):
        plan_sample_size(0.0, sd=0.2)
    with pytest.raises(InputError, match="randomization or t"):
        plan_sample_size(0.05, sd=0.2, test="wilcoxon")


def _runs(tmp_path):
    """Two systems on 40 queries: B finds the relevant document at rank 1 on 4 more queries than A.
    """
    qrels = "".join(f"q{i} 0 d{i} 1\n" for i in range(40))
    a = "".join(f"q{i} Q0 {'d' + str(i) if i % 2 else 'x'} 1 2.0 a\nq{i} Q0 y 2 1.0 a\n" for i in range(40))
    b = "".join(f"q{i} Q0 {'d' + str(i) if i % 2 or i < 8 else 'x'} 1 2.0 b\nq{i} Q0 y 2 1.0 b\n"
                for i in range(40))
    for name, text in (("qrels.txt", qrels), ("a.trec", a), ("b.trec", b)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_cli_from_a_pilot_is_the_librarys(tmp_path):
    f = _runs(tmp_path)
    args = ["plan-testset", "--baseline", str(f / "a.trec"), "--candidate", str(f / "b.trec"), "--qrels",
            str(f / "qrels.txt"), "-m", "P@1", "--effect", "0.1", "--sims", "400", "--permutations", "400",
            "--quiet"]
    r = CliRunner().invoke(main, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    diffs = [1.0 if i < 8 and i % 2 == 0 else 0.0 for i in range(40)]
    lib = plan_sample_size(0.1, diffs=diffs, sims=400, permutations=400)
    assert out["n"] == lib.n and out["mde"] == lib.mde and out["pilot"] == 40
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0 and f"{lib.n} questions" in table.output and "formula" in table.output


def test_cli_with_an_sd_guess_and_errors(tmp_path):
    r = CliRunner().invoke(main, ["plan-testset", "--sd", "0.2", "--effect", "0.05", "--test", "t", "--n", "60",
                                  "--quiet"])
    assert r.exit_code == 0, r.output
    assert "126" in r.output  # the formula's n beside the simulated one
    r = CliRunner().invoke(main, ["plan-testset", "--effect", "0.05"])
    assert r.exit_code == 2 and "give a pilot" in r.output and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(main, ["plan-testset", "--sd", "0.2", "--effect", "-1"])
    assert r.exit_code == 2 and "effect must be > 0" in r.output


def test_a_pilot_with_unshared_questions_says_how_many_pairs_it_used(tmp_path):
    from rankwise.analysis.plan import paired_pilot
    from rankwise.errors import RankwiseWarning

    a = {"per_query": {"q1": {"map": 0.5}, "q2": {"map": 1.0}, "q3": {"map": 0.0}}}
    b = {"per_query": {"q1": {"map": 0.75}, "q2": {"map": 1.0}}}
    with pytest.warns(RankwiseWarning, match="share 2 question ids .3 in the baseline, 2 in the candidate."):
        assert paired_pilot(a, b, "map").tolist() == [0.25, 0.0]
    with pytest.raises(InputError, match="share no question id"):
        paired_pilot(a, {"per_query": {"x": {"map": 1.0}}}, "map")


# ------------------------------------------------------------------ the gate's MDE beside each
# verdict


def test_the_gates_mde_is_plan_testsets_for_the_same_pair(tmp_path):
    """The same number everywhere: the MDE the gate prints for a metric is the one `rankwise
    plan-testset` gives the same two runs as the MDE of the set you have (same test, alpha, power,
    simulation)."""
    from rankwise.analysis.gate import gate

    f = _runs(tmp_path)
    result = gate(str(f / "a.trec"), str(f / "b.trec"), ["P@1"], qrels=str(f / "qrels.txt"), max_drop=0.5)
    check = result.checks[0]
    r = CliRunner().invoke(main, ["plan-testset", "--baseline", str(f / "a.trec"), "--candidate", str(f / "b.trec"),
                                  "--qrels", str(f / "qrels.txt"), "-m", "P@1", "--effect", "0.1", "--quiet",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    assert check.mde is not None and check.mde == json.loads(r.stdout)["mde"]
    assert check.to_dict()["mde"] == check.mde and "80% power at alpha 0.05" in check.mde_note
    table = CliRunner().invoke(main, ["gate", "--baseline", str(f / "a.trec"), "--candidate", str(f / "b.trec"),
                                      "--qrels", str(f / "qrels.txt"),
                                      "-m", "P@1", "--max-drop", "0.5"])
    assert f"MDE {check.mde:.4f}" in table.output and "MDE: the smallest mean difference 40 questions" in table.output


@pytest.mark.parametrize("sd, n", [(0.1, 60), (0.25, 200)])
def test_planted_normal_differences_give_the_formulas_mde(sd, n):
    """Per-query differences drawn normal with a known sd: the gate's (t test) MDE is the textbook
    (z[1-α/2] + z[0.8]) σ / √n within 8% (the sample's own sd, the t distribution and the
    simulation)."""
    from rankwise.analysis.gate import gate

    rng = np.random.default_rng(7)
    base = {f"q{i}": {"d": 0.5} for i in range(n)}
    diffs = rng.normal(0.0, sd, n)
    cand = {q: {"d": 0.5 + float(x)} for q, x in zip(base, diffs, strict=True)}
    # saved per-query values of a made-up metric: the gate pairs them as it pairs any metric's
    saved = lambda values: {"per_query": {q: {"precision@1": v["d"]} for q, v in values.items()},  # noqa: E731
                            "mean": {"precision@1": float(np.mean([v["d"] for v in values.values()]))},
                            "summary": {}}
    check = gate(saved(base), saved(cand), ["P@1"], test="t", max_drop=1.0).checks[0]
    expected = (1.959964 + 0.841621) * float(np.std(diffs, ddof=1)) / math.sqrt(n)
    assert check.mde == pytest.approx(expected, rel=0.08)


def test_an_undefined_mde_gives_no_number_and_says_why(tmp_path):
    from rankwise.analysis.gate import gate
    from rankwise.report.gate_report import gate_markdown

    qrels = {f"q{i}": {"a": 1} for i in range(6)}
    same = gate({q: ["a"] for q in qrels}, {q: ["a"] for q in qrels}, ["P@1"], qrels=qrels).checks[0]
    assert same.mde is None and "no variance" in same.mde_note
    saved = {"mean": {"precision@1": 0.5}, "summary": {}}
    means_only = gate(saved, {"mean": {"precision@1": 0.4}, "summary": {}}, ["P@1"], max_drop=0.5).checks[0]
    assert means_only.mde is None and means_only.mde_note == "no per-query values to simulate from"
    md = gate_markdown(gate({q: ["a"] for q in qrels}, {q: ["a"] for q in qrels}, ["P@1"], qrels=qrels))
    assert "| 1.0000 | - | - | ✅ pass |" in md and "No MDE for precision@1: every question" in md
    assert "nan" not in md.lower()
