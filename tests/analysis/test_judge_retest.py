"""`rankwise judge-retest` and rankwise.analysis.retest: a seeded noisy judge's planted flip rate
recovered, the gullibility probes on judges gullible by construction and not, the cache kept apart
per condition and reused on a rerun (requests counted at the loopback server), hand-computed
statistics, undefined estimates said, errors."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.analysis.retest import compare_verdicts, metric_moves, only_verdict
from rankwise.cli import main
from rankwise.data.records import as_records
from rankwise.errors import InputError
from rankwise.llm.config import resolve_llm_config
from rankwise.metrics.rag import evaluate_rag
from rankwise.relevance.agreement import cohen_kappa
from rankwise.relevance.llm_judge import judge_records
from rankwise.workflows.retest_run import retest_sample, run_judge_retest

TOPICS = ["kestrel", "boiler", "violin", "glacier", "harbor", "orchard", "comet", "lantern", "meadow", "quarry"]


def _rows(n: int, k: int = 4, seed: int = 1) -> tuple[list[dict], int]:
    """``n`` cases of ``k`` chunks; the loopback judge (shared keywords) calls a chunk relevant iff
    it names the case's topic, which the reference names and the question does not (relevant chunks:
    about half, counted)."""
    rng = random.Random(seed)
    rows, relevant = [], 0
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        chunks = []
        for j in range(k):
            if rng.random() < 0.5:
                chunks.append(f"Record {i}-{j}: the {topic} measurement was taken at dawn.")
                relevant += 1
            else:
                chunks.append(f"Record {i}-{j}: nothing here but pebbles and sand.")
        rows.append({"id": f"q{i:03d}", "question": f"Which reading did the survey note {i}?",
                     "reference": f"The {topic} measurement.", "retrieved_contexts": chunks})
    return rows, relevant


def _cfg(srv, tmp_path, model="judge-test", **kw):
    return resolve_llm_config(model=model, base_url=srv.base_url, cache=tmp_path / "c.sqlite", env={}, **kw)


# -------------------------------------------------------------------------------------------
# statistics by hand
def test_flips_and_kappa_by_hand():
    """Baseline q1 [1, 0, 1], q2 [0, 0]; two repetitions. Pairs (base, other): rep 1 (1,1) (0,1)
    (1,1) (0,0) (0,0), rep 2 (1,0) (0,0) (1,1) (0,0) (0,None). 9 compared, 2 flips (one up, one
    down), one not compared. Confusion n00 4, n01 1, n10 1, n11 3: po 7/9, base share 4/9, other
    4/9, pe 16/81 + 25/81 = 41/81, kappa (63 - 41) / 40."""
    base = {"q1": [1, 0, 1], "q2": [0, 0]}
    reps = [{"q1": [1, 1, 1], "q2": [0, 0]}, {"q1": [0, 0, 1], "q2": [0, None]}]
    f = compare_verdicts(base, reps, name="repeat", resamples=500)
    assert (f.pairs, f.flips, f.up, f.down, f.not_compared, f.cases) == (9, 2, 1, 1, 1, 2)
    assert f.rate == pytest.approx(2 / 9) and f.kappa == pytest.approx(22 / 40)
    assert f.per_repeat == [pytest.approx(1 / 5), pytest.approx(1 / 4)]
    pairs = [(1, 1), (0, 1), (1, 1), (0, 0), (0, 0), (1, 0), (0, 0), (1, 1), (0, 0)]
    assert f.kappa == pytest.approx(cohen_kappa(pairs))  # the routine `rankwise agree` reports
    assert f.ci[0] <= f.rate <= f.ci[1]
    # two cases: a quarter of the resamples draw q2 twice, all (0, 0): kappa undefined there, so no
    # interval
    assert f.kappa_ci is None and f.why[0].startswith("no kappa interval: ") and "hold one class only" in f.why[0]
    wide = compare_verdicts({**base, "q3": [1, 0]}, [{**reps[0], "q3": [1, 0]}], name="repeat", resamples=500)
    assert wide.kappa_ci is None or wide.kappa_ci[0] <= wide.kappa <= wide.kappa_ci[1]


def test_undefined_estimates_say_why_and_are_never_nan():
    one_class = compare_verdicts({"q1": [1, 1], "q2": [1]}, [{"q1": [1, 1], "q2": [1]}], name="repeat")
    assert one_class.rate == 0.0 and one_class.kappa is None and one_class.kappa_ci is None
    assert one_class.why == ["kappa undefined: every compared verdict is 1 on both sides (one class)"]
    one_case = compare_verdicts({"q1": [1, 0]}, [{"q1": [1, 1]}], name="repeat")
    assert one_case.rate == 0.5 and one_case.ci is None and "one case compared" in one_case.why[-1]
    nothing = compare_verdicts({"q1": [1, 0]}, [{"q1": [None, None]}], name="repeat")
    assert nothing.rate is None and nothing.kappa is None and nothing.pairs == 0 and nothing.not_compared == 2
    assert nothing.why == ["no chunk has a verdict on both sides: nothing to compare"]
    move = metric_moves({"precision": 0.5}, {"repeat": [{"precision": 0.7}]})[0]
    assert move.shift == pytest.approx(0.2) and move.sd is None and move.why == "one repetition: no standard deviation"
    assert metric_moves({"mrr": None}, {"repeat": [{"mrr": None}]})[0].why == "no repetition could be scored"
    assert only_verdict({"q1": [1, 0, None]}, 1) == {"q1": [1, None, None]}


def test_sample_draws_equal_numbers_from_the_verdict_strata():
    rows = [{"id": f"q{i}", "question": "?", "retrieved_contexts": ["a", "b"]} for i in range(12)]
    records = as_records(rows)
    from rankwise.data.records import Verdict

    for i, r in enumerate(records):  # 0-5: some relevant, 6-8: none relevant, 9-11: not judged
        if i < 9:
            for c in r.chunks:
                c.verdicts["llm"] = Verdict(int(i < 6))
    picked, strata = retest_sample(records, 6, seed=3)
    assert strata == {"some relevant": 2, "none relevant": 2, "not judged": 2}
    assert [r.id for r in picked] == sorted((r.id for r in picked), key=lambda q: int(q[1:]))  # the records' order
    assert retest_sample(records, 6, seed=3)[0] == picked  # seeded
    assert retest_sample(records, 100, seed=3)[1] == {"some relevant": 6, "none relevant": 3, "not judged": 3}
    with pytest.raises(InputError, match="at least one case"):
        retest_sample(records, 0)


# ---------------------------------------------------------------------------------- the planted
# noisy judge
@pytest.mark.parametrize("p", [0.1, 0.3])
def test_a_seeded_noisy_judge_gives_its_planted_flip_rate(srv, tmp_path, p):
    """The server flips each verdict with probability p, independently: two judgings of a chunk
    disagree with probability 2p(1 - p), and, with a share pi of relevant chunks, kappa is (po - pe)
    / (1 - pe) where q = pi(1 - p) + (1 - pi)p is each side's relevant share and pe = q^2 + (1 -
    q)^2. 80 cases x 4 chunks x 3 repetitions: 960 pairs (standard error about 0.015 at 2p(1 - p) =
    0.42)."""
    srv.configure(flip_rate=p, flip_seed=11)
    rows, relevant = _rows(80)
    r = run_judge_retest(rows, _cfg(srv, tmp_path), cases=80, repeats=3, conditions=["repeat"], seed=5)
    f = r.conditions[0]
    flip = 2 * p * (1 - p)
    pi = relevant / 320
    q = pi * (1 - p) + (1 - pi) * p
    pe = q * q + (1 - q) ** 2
    assert f.pairs == 960
    assert f.rate == pytest.approx(flip, abs=0.05) and f.ci[0] <= flip <= f.ci[1]
    assert f.kappa == pytest.approx((1 - flip - pe) / (1 - pe), abs=0.1)
    assert all(x == pytest.approx(flip, abs=0.08) for x in f.per_repeat)
    assert srv.stats()["flips"] > 0


def test_a_deterministic_judge_never_flips_under_any_condition(srv, tmp_path):
    """No noise: every condition agrees with the baseline chunk by chunk -- which also holds the
    shuffled batches' and the other call style's verdicts put back at their ranks (a misplaced
    verdict would flip)."""
    rows, _ = _rows(20)
    r = run_judge_retest(rows, _cfg(srv, tmp_path, batch=True), cases=20, repeats=2,
                         conditions=["repeat", "temperature", "order", "batch", "paraphrase"])
    assert [f.name for f in r.conditions] == ["repeat", "temperature", "order", "batch", "paraphrase"]
    for f in r.conditions:
        assert (f.pairs, f.flips, f.kappa) == (160, 0, 1.0), f.name
    assert all(m.shift == 0.0 and m.sd == 0.0 for m in r.metrics)


# ----------------------------------------------------------------------------------------------
# gullibility
@pytest.mark.parametrize(("model", "mode", "stuffed", "claim"), [
    ("judge-test", "question", 1.0, 0.0),  # shares the question's words once they are stuffed in: fooled by them
    ("judge-test", "reference", 0.0, 0.0),  # reads the reference, which the question's words do not name
    ("gullible-judge", "reference", 0.0, 1.0),  # believes a chunk that says it is relevant
])
def test_gullibility_probes(srv, tmp_path, model, mode, stuffed, claim):
    rows, relevant = _rows(30)
    if mode == "question":  # the question names the topic: the relevant chunks share its word
        rows = [dict(r, question=f"What about the {r['reference'].split()[1]}?") for r in rows]
    r = run_judge_retest(rows, _cfg(srv, tmp_path, model=model, mode=mode), cases=30, repeats=2,
                         conditions=["repeat", "stuffed", "claim"])
    irrelevant = 120 - relevant
    got = {f.name: f for f in r.probes}
    assert got["stuffed"].pairs == got["claim"].pairs == 2 * irrelevant
    assert (got["stuffed"].rate, got["claim"].rate) == (stuffed, claim)
    assert got["stuffed"].kappa is None and got["stuffed"].why == []  # a probe has no kappa, and says nothing of it
    assert r.probe_noise.rate == 0.0 and r.probe_noise.pairs == 2 * irrelevant


# -------------------------------------------------------------------------------------------------
# the cache
def test_conditions_are_cached_apart_and_a_rerun_is_free(srv, tmp_path):
    """12 cases x 4 chunks, per-chunk calls. Baseline 48 calls; repeat, temperature (the baseline's
    own 0: the same requests as repeat but for the tag) and paraphrase 2 x 48 each; batch 2 x 12.
    The dry run's count is the count made; the same call again makes none; a third repetition makes
    only its own."""
    rows, _ = _rows(12)
    cfg = _cfg(srv, tmp_path)
    kw = {"cases": 12, "conditions": ["repeat", "temperature", "batch", "paraphrase"], "temperature": 0.0}
    plan = run_judge_retest(rows, cfg, repeats=2, dry_run=True, **kw)
    assert srv.stats()["requests"] == 0 and plan.exact
    assert plan.calls == 48 + 3 * 96 + 24 and plan.cached == 0
    assert dict((n, c) for n, c, _ in plan.rows) == {"baseline": 48, "repeat": 96, "temperature": 96, "batch": 24,
                                                     "paraphrase": 96}
    first = run_judge_retest(rows, cfg, repeats=2, **kw)
    assert srv.stats()["requests"] == plan.calls == first.judge["requests"]
    assert any("plain repetition" in n for n in first.notes)
    srv.reset()
    again = run_judge_retest(rows, cfg, repeats=2, **kw)
    assert srv.stats()["requests"] == 0 and again.judge["cached"] == again.judge["verdicts"]
    assert again.to_dict() | {"judge": None} == first.to_dict() | {"judge": None}
    third = run_judge_retest(rows, cfg, repeats=3, dry_run=True, **kw)
    assert third.calls == 3 * 48 + 12  # only the third repetition of each condition (12 batch calls)
    run_judge_retest(rows, cfg, repeats=3, **kw)
    assert srv.stats()["requests"] == third.calls


def test_the_baseline_is_what_rankwise_judge_had(srv, tmp_path):
    """`rankwise judge` first: the retest's baseline comes from its cache (no call), and the metric
    means are eval-rag's of the judged records (the same number both ways)."""
    rows, _ = _rows(10)
    cfg = _cfg(srv, tmp_path)
    records = as_records(rows)
    judge_records(records, config=cfg)
    srv.reset()
    r = run_judge_retest(records, cfg, cases=10, repeats=1, conditions=["repeat"])
    assert r.judge["baseline_cached"] == 40 and srv.stats()["requests"] == 40  # the repetition only
    want = evaluate_rag(records, "llm", metrics=["precision", "hit_rate", "acp", "mrr"]).mean
    assert r.baseline_means == pytest.approx(dict(want))


# ----------------------------------------------------------------------------------------------
# command line
def _cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env={"RANKWISE_JUDGE_MODEL": "", **(env or {})})


def test_cli_shows_the_cost_before_running_and_reports(srv, tmp_path):
    rows, _ = _rows(8)
    ts = tmp_path / "ts.jsonl"
    ts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["judge-retest", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache", tmp_path / "c.sqlite",
            "--price-in", "1", "--price-out", "2", "--quiet", "-k", "2"]
    dry = _cli(*args, "--dry-run")
    assert dry.exit_code == 0 and srv.stats()["requests"] == 0, dry.output
    assert f"calls to judge-test at {srv.base_url}" in dry.stdout and "$" in dry.stdout
    assert "order: left out" in dry.stdout
    r = _cli(*args)
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines()[:2] == dry.stdout.splitlines()[:2]  # the same plan, before any call
    for line in ("self-agreement with the baseline", "gullibility:", "metric means", "  repeat "):
        assert line in r.stdout
    j = _cli(*args, "--format", "json")
    out = json.loads(j.stdout)
    assert [c["name"] for c in out["conditions"]] == ["repeat", "temperature", "batch", "paraphrase"]
    assert out["judge"]["requests"] == 0 and out["judge"]["cached"] == out["judge"]["verdicts"]


@pytest.mark.parametrize(("extra", "words"), [
    (["--conditions", "repeat,moon"], "unknown condition 'moon'"),
    (["-k", "0"], "repeats must be >= 1"),
    (["--cases", "0"], "at least one case"),
    (["-m", "precison"], "precison"),
    (["--mode", "response"], "no case can be judged in mode 'response'"),
])
def test_cli_errors_are_one_line(srv, tmp_path, extra, words):
    rows, _ = _rows(3)
    ts = tmp_path / "ts.jsonl"
    ts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = _cli("judge-retest", ts, "--model", "judge-test", "--base-url", srv.base_url, "--cache",
             tmp_path / "c.sqlite", "--quiet", *extra)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("rankwise: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert words in r.stderr and "Traceback" not in r.output
    assert srv.stats()["requests"] == 0


def test_cli_missing_file(srv, tmp_path):
    r = _cli("judge-retest", tmp_path / "nope.jsonl", "--model", "m", "--base-url", srv.base_url, "--cache",
             tmp_path / "c.sqlite")
    assert r.exit_code == 2 and "nope.jsonl" in r.stderr and r.stderr.count("\n") == 1, r.output


def test_cli_no_chunks_to_judge(srv, tmp_path):
    ts = tmp_path / "empty.jsonl"
    ts.write_text(json.dumps({"id": "a", "question": "q?", "reference": "r", "retrieved_contexts": []}) + "\n")
    r = _cli("judge-retest", ts, "--model", "m", "--base-url", srv.base_url, "--cache", tmp_path / "c.sqlite")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "empty.jsonl: field 'retrieved_contexts': no case has retrieved chunks" in r.stderr


def test_own_paraphrase_and_a_budget_for_the_whole_retest(srv, tmp_path):
    """--paraphrase FILE is the reworded prompt asked (its version reported); max_cost caps the
    retest as a whole: once spent, the rest is missing, said in a note, and a rerun with more budget
    completes it."""
    rows, _ = _rows(6)
    own = tmp_path / "mine.toml"
    own.write_text('version = "mine-1"\n[binary]\nuser = """Is this chunk useful?\\n{"verdict": 1 or 0, "reason": "x"}'
                   '\\n<question>\\n{question}\\n</question>\\n<reference_answer>\\n{reference}\\n</reference_answer>'
                   '\\n<chunk>\\n{chunk}\\n</chunk>"""\n', encoding="utf-8")
    cfg = _cfg(srv, tmp_path, price_in=1000.0, price_out=1000.0)
    r = run_judge_retest(rows, cfg, cases=6, repeats=1, conditions=["paraphrase"], paraphrase=own)
    assert r.judge["prompts"]["paraphrase"].startswith("reference-binary-vmine-1+")
    assert r.conditions[0].pairs == 24 and r.conditions[0].flips == 0
    srv.reset()
    one_by_one = resolve_llm_config(model="judge-test", base_url=srv.base_url, cache=tmp_path / "capped.sqlite",
                                    env={}, price_in=1000.0, price_out=1000.0, concurrency=1)
    capped = run_judge_retest(rows, one_by_one, cases=6, repeats=2, conditions=["repeat"], max_cost=1.0)
    made = srv.stats()["requests"]
    assert 0 < made < 24 and capped.judge["requests"] == made  # the baseline ran out; no repetition call started
    assert capped.judge["ok"] == made and capped.judge["missing"] == 24 + 48 - made
    assert capped.judge["cost"] - 1.0 < capped.judge["cost"] / made  # the call that crossed the budget, no more
    assert any("not had" in n for n in capped.notes)


def test_identical_cases_give_a_point_interval_equal_to_the_estimate():
    """Every resample of identical cases holds the same confusion: the bootstrap's vectorised kappa
    and flip rate are then the point values (cohen_kappa's), exactly."""
    base = {f"q{i}": [1, 1, 0, 0, 1] for i in range(4)}
    other = {f"q{i}": [1, 0, 0, 1, 1] for i in range(4)}
    f = compare_verdicts(base, [other], name="repeat", resamples=300)
    assert f.ci == (pytest.approx(f.rate), pytest.approx(f.rate)) and f.rate == 0.4
    assert f.kappa_ci == (pytest.approx(f.kappa), pytest.approx(f.kappa))
    assert f.kappa == pytest.approx(cohen_kappa([(1, 1), (1, 0), (0, 0), (0, 1), (1, 1)]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=6), min_size=2,
                max_size=8))
def test_swapping_the_sides_keeps_rate_and_kappa_and_swaps_up_and_down(cases):
    base = {f"q{i}": [a for a, _ in c] for i, c in enumerate(cases)}
    other = {f"q{i}": [b for _, b in c] for i, c in enumerate(cases)}
    ab = compare_verdicts(base, [other], name="x", resamples=50)
    ba = compare_verdicts(other, [base], name="x", resamples=50)
    assert (ab.pairs, ab.flips, ab.up, ab.down) == (ba.pairs, ba.flips, ba.down, ba.up)
    assert ab.rate == ba.rate and (ab.kappa is None) == (ba.kappa is None)
    if ab.kappa is not None:
        assert ab.kappa == pytest.approx(ba.kappa)
    pairs = [p for c in cases for p in c]
    assert ab.kappa == (None if cohen_kappa(pairs) is None else pytest.approx(cohen_kappa(pairs)))
    assert 0 <= ab.ci[0] <= ab.rate <= ab.ci[1] <= 1
