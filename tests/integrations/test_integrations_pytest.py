"""The pytest plugin and ``rankwise.testing``, run by pytest's own ``pytester`` on a plain test
file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib

from rankwise.errors import InputError
from rankwise.testing import RegressionError, assert_no_regression, assert_retrieval

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "rankwise.integrations.pytest_plugin"


def _plugin_installed() -> bool:
    """Is the plugin registered by an installed rankwise's entry point? (Then ``-p`` would load it
    twice.)"""
    from importlib.metadata import entry_points

    return any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))


#: how the tests load the plugin: by the installed entry point, or by name from this checkout
LOAD = [] if _plugin_installed() else ["-p", PLUGIN]


def _write_inputs(folder: Path) -> None:
    """qrels for 30 queries (q00..q29, d1 relevant), a baseline run ranking d1 first everywhere, a
    candidate that drops d1 to rank 4 on q00..q11 (planted regression), and a candidate equal to the
    baseline."""
    qids = [f"q{i:02d}" for i in range(30)]
    (folder / "qrels.txt").write_text("".join(f"{q} 0 d1 1\n" for q in qids))

    def run(bad: set[str]) -> str:
        lines = []
        for q in qids:
            order = ["x1", "x2", "x3", "d1"] if q in bad else ["d1", "x1", "x2", "x3"]
            lines += [f"{q} Q0 {d} {r + 1} {10 - r} sys\n" for r, d in enumerate(order)]
        return "".join(lines)

    (folder / "base.trec").write_text(run(set()))
    (folder / "same.trec").write_text(run(set()))
    (folder / "worse.trec").write_text(run(set(qids[:12])))


TEST_FILE = """
from rankwise.testing import assert_no_regression

def test_retrieval_did_not_regress(rankwise_baseline):
    assert_no_regression(rankwise_baseline, "{candidate}", metrics=["ndcg@10", "P@1"], alpha=0.05,
                         qrels="qrels.txt", floors={{"recall@10": 0.5}})
"""


def _run(pytester: pytest.Pytester, candidate: str, *args: str) -> pytest.RunResult:
    _write_inputs(pytester.path)
    pytester.makepyfile(test_gate_here=TEST_FILE.format(candidate=candidate))
    return pytester.runpytest(*LOAD, "-p", "no:cacheprovider", *args)


def test_plain_test_file_fails_with_a_readable_message_on_a_planted_regression(pytester):
    result = _run(pytester, "worse.trec", "--rankwise-baseline", "base.trec")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    # the metric, baseline -> candidate, difference with CI and p, the budget and the floor
    assert re.search(r"FAIL ndcg@10: 1\.0000 -> 0\.7723, difference -0\.2277 \(95% CI -0\.\d{4} \.\. -0\.\d{4}\), "
                     r"p = 0\.0005; budget 0\.01, no floor", out), out
    assert "FAIL precision@1: 1.0000 -> 0.6000, difference -0.4000" in out
    assert "pass recall@10: 1.0000 -> 1.0000, difference +0.0000" in out and "floor 0.5 (met)" in out
    assert "rankwise: regression in ndcg@10, precision@1 (baseline " in out
    assert "30 paired queries, two-sided randomization test, alpha 0.05" in out
    # the five queries that lost most, with their ids
    assert ("ndcg@10, the 5 queries that lost most: q00 1.0000 -> 0.4307 (-0.5693), q01 1.0000 -> 0.4307 "
            "(-0.5693), q02") in out
    assert "q05 1.0000" not in out.split("ndcg@10, the 5 queries")[1].split("\n")[0]
    # the failure shows the test's own line, not rankwise's source (__tracebackhide__)
    assert "integrations/testing.py" not in out and "raise RegressionError" not in out


def test_plain_test_file_passes_without_a_regression(pytester):
    result = _run(pytester, "same.trec", "--rankwise-baseline", "base.trec")
    result.assert_outcomes(passed=1)


def test_update_baseline_writes_the_candidate_and_passes_saying_so(pytester):
    _write_inputs(pytester.path)
    pytester.makepyfile(test_gate_here=TEST_FILE.format(candidate="worse.trec"))
    baseline = pytester.path / "baseline.json"
    missing = pytester.runpytest(*LOAD, "-p", "no:cacheprovider", "--rankwise-baseline", "baseline.json")
    missing.assert_outcomes(failed=1)
    assert "the baseline does not exist; write it from the candidate on purpose with pytest " \
           "--rankwise-update-baseline" in missing.stdout.str()

    updated = pytester.runpytest(*LOAD, "-p", "no:cacheprovider", "--rankwise-baseline", "baseline.json",
                                 "--rankwise-update-baseline")
    updated.assert_outcomes(passed=1)
    assert "rankwise: accepted a new baseline on purpose: wrote baseline.json from worse.trec" in updated.stdout.str()
    saved = json.loads(baseline.read_text())
    assert saved["mean"]["ndcg@10"] == pytest.approx(0.7723, abs=1e-4) and saved["mean"]["precision@1"] == pytest.approx(0.6)
    assert set(saved["per_query"]) == {f"q{i:02d}" for i in range(30)}
    # the candidate now passes against the accepted baseline; the old good run would be a gain
    again = pytester.runpytest(*LOAD, "-p", "no:cacheprovider", "--rankwise-baseline", "baseline.json")
    again.assert_outcomes(passed=1)


def test_fixtures_give_the_options(pytester):
    pytester.makepyfile(test_fixtures="""
        from pathlib import Path
        def test_options(rankwise_baseline, rankwise_update_baseline):
            assert rankwise_baseline == Path("b.json").resolve() and rankwise_update_baseline is False
        """)
    pytester.runpytest(*LOAD, "--rankwise-baseline", "b.json").assert_outcomes(passed=1)


def test_entry_point_is_declared_and_resolves_to_the_plugin():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["pytest11"]["rankwise"]
    import importlib

    module = importlib.import_module(target)
    assert target == PLUGIN and module.pytest_addoption and module.rankwise_baseline


def test_assert_no_regression_in_python(tmp_path):
    _write_inputs(tmp_path)
    with pytest.raises(RegressionError) as info:
        assert_no_regression(tmp_path / "base.trec", tmp_path / "worse.trec", ["P@1"], qrels=tmp_path / "qrels.txt",
                             update=False)
    check = info.value.result.checks[0]
    assert (check.metric, check.baseline_mean, round(check.candidate_mean, 12)) == ("precision@1", 1.0, 0.6)
    assert check.ci_low <= -0.4 + 1e-12 <= check.ci_high < 0  # the interval holds the difference, below 0
    with pytest.raises(InputError, match="--rankwise-update-baseline"):
        assert_no_regression(tmp_path / "nope.json", tmp_path / "worse.trec", ["P@1"], qrels=tmp_path / "qrels.txt",
                             update=False)
    # a floor alone fails, significant or not
    with pytest.raises(RegressionError, match=r"floor 0\.7 \(below it\)"):
        assert_no_regression(tmp_path / "base.trec", tmp_path / "worse.trec", floors={"P@1": 0.7},
                             qrels=tmp_path / "qrels.txt", update=False, max_drop=1.0)


CASES = [{"id": f"c{i}", "question": q, "reference_context_ids": [d]} for i, (q, d) in enumerate([
    ("capital of France", "d1"), ("rome italy", "d2"), ("berlin germany", "d3"), ("madrid spain", "d4"),
    ("lisbon", "d5")])]
CORPUS = {"d1": "Paris is the capital of France.", "d2": "Rome is in Italy.", "d3": "Berlin is in Germany.",
          "d4": "Madrid is in Spain.", "d5": "Lisbon is in Portugal.", "d6": "Capital cities of Europe."}


def test_assert_retrieval_with_a_pipeline_spec_and_a_callable():
    result = assert_retrieval(CASES, "bm25", {"ndcg@10": 0.99}, corpus=CORPUS, relevance="ids")
    assert result.mean["ndcg@10"] == 1.0

    def wrong_first(question):  # the relevant document at rank 2 for every question
        hit = next(c["reference_context_ids"][0] for c in CASES if c["question"] == question)
        return [{"id": "d6", "text": CORPUS["d6"]}, {"id": hit, "text": CORPUS[hit]}]

    with pytest.raises(RegressionError) as info:
        assert_retrieval(CASES, wrong_first, {"ndcg@10": 0.9, "recall@10": 0.9}, relevance="ids")
    message = str(info.value)
    assert "FAIL ndcg@10: mean 0.6309, minimum 0.9" in message
    assert "pass recall@10: mean 1.0000, minimum 0.9" in message
    assert "ndcg@10, the 5 lowest questions: c0 0.6309, c1 0.6309" in message
    with pytest.raises(InputError, match="needs the corpus"):
        assert_retrieval(CASES, "bm25", {"ndcg@10": 0.5})


def test_the_gates_interval_and_p_are_compares(tmp_path):
    """The same number everywhere: the interval and p-value in the assertion's message are
    compare's."""
    from rankwise.analysis.compare import compare
    from rankwise.analysis.gate import gate

    _write_inputs(tmp_path)
    runs = [str(tmp_path / "base.trec"), str(tmp_path / "worse.trec")]
    checked = gate(*runs, ["ndcg@10", "P@1"], qrels=tmp_path / "qrels.txt")
    compared = compare(tmp_path / "qrels.txt", runs, ["ndcg@10", "P@1"], names=["base", "worse"], correction="none")
    for check in checked.checks:
        c = compared.comparison("worse", check.metric)
        assert (check.ci_low, check.ci_high, check.p_value, check.delta) == (c.ci_low, c.ci_high, c.p_value, c.delta)
