"""Unanswerable questions as a class (issue 32, item 6): cases without ground truth are counted,
listed and left out of the retrieval means by default (as trec_eval leaves out unjudged queries);
``--unscorable zero`` keeps the old numbers; one line says so; and a no-answer view tells how well
the top retrieval score separates answerable from unanswerable questions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.analysis.no_answer import auroc, no_answer_view
from rankwise.cli import main
from rankwise.metrics.rag import evaluate_rag

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _chunk(text: str, score: float) -> dict:
    return {"text": text, "score": score}


# a1..a3 answerable (a3's passage not retrieved), a4 answerable but the retriever returned nothing;
# u1, u2 unanswerable (no reference passage). Top scores: a 0.9, 0.7, 0.4, none; u 0.5, 0.3.
CASES = [
    {"id": "a1", "retrieved_contexts": [_chunk("the tower scores three points", 0.9), _chunk("filler", 0.2)],
     "reference_contexts": ["the tower scores three points"]},
    {"id": "a2", "retrieved_contexts": [_chunk("filler", 0.7), _chunk("one move per turn", 0.6)],
     "reference_contexts": ["one move per turn"]},
    {"id": "a3", "retrieved_contexts": [_chunk("filler", 0.4)], "reference_contexts": ["five tokens each"]},
    {"id": "a4", "retrieved_contexts": [], "reference_contexts": ["the board is square"]},
    {"id": "u1", "retrieved_contexts": [_chunk("filler", 0.5)]},
    {"id": "u2", "retrieved_contexts": [_chunk("other filler", 0.3)], "reference_contexts": []},
]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _invoke(*args: str):
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_left_out_by_default_counted_listed_and_zero_keeps_the_old_numbers():
    # hit_rate@2 per case: a1 1, a2 1, a3 0, a4 0 (nothing retrieved: the retriever's miss), u1, u2
    # no truth
    default = evaluate_rag(CASES, k=2, metrics=["hit_rate@2", "mrr"])
    assert default.mean == {"hit_rate@2": 2 / 4, "mrr": (1 + 1 / 2) / 4}
    assert default.summary["evaluated"] == 4 and default.summary["unscorable"] == 3
    assert default.summary["unscorable_cases"] == {"a4": "no retrieved chunks", "u1": "no ground truth",
                                                   "u2": "no ground truth"}
    assert sorted(default.per_query) == ["a1", "a2", "a3", "a4"]
    assert [r.id for r in default.records] == [c["id"] for c in CASES]  # every case kept in the records
    assert default.records[4].scores["containment"] == {"hit_rate@2": None, "mrr": None}
    zero = evaluate_rag(CASES, k=2, metrics=["hit_rate@2", "mrr"], unscorable="zero")  # the numbers before
    assert zero.mean == {"hit_rate@2": 2 / 6, "mrr": (1 + 1 / 2) / 6} and zero.summary["evaluated"] == 6


def test_the_no_answer_view_by_hand():
    view = no_answer_view({"a1": 0.9, "a2": 0.7, "a3": 0.4, "a4": -math.inf}, {"u1": 0.5, "u2": 0.3})
    # answerable above unanswerable in 2 + 2 + 1 + 0 of the 8 pairs
    assert view.auroc == 5 / 8
    assert view.thresholds == [
        {"share": 0.5, "threshold": 0.3, "unanswerable_silenced": 0.5, "answerable_lost": 0.25},
        {"share": 0.8, "threshold": 0.5, "unanswerable_silenced": 1.0, "answerable_lost": 0.5},
        {"share": 0.9, "threshold": 0.5, "unanswerable_silenced": 1.0, "answerable_lost": 0.5}]
    assert auroc([0.5], [0.5]) == 0.5 and auroc([0.1], [0.9]) == 0.0


def test_eval_rag_prints_it_once_and_the_json_carries_it(tmp_path):
    path = _write(tmp_path / "t.jsonl", CASES)
    code, out, err = _invoke("eval-rag", str(path), "-k", "2", "-m", "hit_rate@2,mrr")
    assert code == 0, err
    assert "0.5000" in out and "0.3750" in out
    assert err == ""  # no warning on stderr: the one line is under the table
    assert len([line for line in out.splitlines() if "no ground truth" in line]) == 1
    assert ("3 unscorable cases: a4 (no retrieved chunks), u1 (no ground truth), u2 (no ground truth) -> no ground "
            "truth: left out of the retrieval means, as trec_eval leaves out unjudged queries (--unscorable zero "
            "scores them 0); no retrieved chunks: scored 0 on every metric and kept in the means "
            "(docs/context-metrics.md)") in out
    assert "no-answer view: 2 unanswerable cases, 4 answerable; the top retrieval score as the signal" in out
    assert "  AUROC 0.6250 (answerable scored above unanswerable; 0.5 is chance)" in out
    assert ("  to silence 50% of unanswerables: return nothing when the top score <= 0.3000 -> 50% silenced, 25% "
            "of answerables lost") in out
    assert ("  to silence 80%, 90% of unanswerables: return nothing when the top score <= 0.5000 -> 100% silenced, "
            "50% of answerables lost") in out
    code, out, _ = _invoke("eval-rag", str(path), "-k", "2", "-m", "hit_rate@2", "--format", "json")
    view = json.loads(out)["summary"]["no_answer"]
    assert view["auroc"] == 0.625 and view["unanswerable_cases"] == ["u1", "u2"] and view["answerable"] == 4
    assert view["thresholds"][1] == {"share": 0.8, "threshold": 0.5, "unanswerable_silenced": 1.0,
                                     "answerable_lost": 0.5}
    code, out, _ = _invoke("eval-rag", str(path), "-k", "2", "-m", "hit_rate@2", "--unscorable", "zero",
                           "--format", "json")
    assert json.loads(out)["mean"] == {"hit_rate@2": pytest.approx(2 / 6)}


def test_undefined_auroc_is_said_not_nan(tmp_path):
    rows = [{**c, "retrieved_contexts": [{"text": x["text"]} for x in c["retrieved_contexts"]]} for c in CASES]
    code, out, err = _invoke("eval-rag", str(_write(tmp_path / "t.jsonl", rows)), "-k", "2", "--format", "json")
    assert code == 0, err
    view = json.loads(out)["summary"]["no_answer"]
    assert view["auroc"] is None and view["thresholds"] == []
    assert view["auroc_undefined"] == "no retrieved chunk carries a score (the retriever's similarity)"
    assert "NaN" not in out
    code, out, _ = _invoke("eval-rag", str(_write(tmp_path / "t.jsonl", rows)), "-k", "2")
    assert "  AUROC undefined: no retrieved chunk carries a score (the retriever's similarity)" in out
    one_class = no_answer_view({}, {"u1": 0.4})
    assert one_class.auroc is None and one_class.to_json()["auroc_undefined"] == (
        "no answerable case: the score has only one class to rank")
    # a test set with no unanswerable case has no view at all
    code, out, _ = _invoke("eval-rag", str(_write(tmp_path / "a.jsonl", CASES[:3])), "-k", "2", "--format", "json")
    assert "no_answer" not in json.loads(out)["summary"]


def test_compare_rag_says_it_in_one_line(tmp_path):
    a = _write(tmp_path / "a.jsonl", CASES)
    b = _write(tmp_path / "b.jsonl", [{**c, "retrieved_contexts": c["retrieved_contexts"][::-1]} for c in CASES])
    code, _, err = _invoke("compare-rag", str(a), str(b), "-m", "mrr")
    assert code == 0, err
    lines = [line for line in err.splitlines() if "no ground truth" in line]
    assert len(lines) == 1 and lines[0].startswith("rankwise: warning: systems 'a' and 'b': 3 unscorable cases")


def test_the_bundled_example_set_now_averages_over_its_answerable_cases():
    r = evaluate_rag(EXAMPLES / "rich_testset.jsonl", "span", k=4, metrics=["recall@4"])
    assert r.mean["recall@4"] == 1.0 and r.summary["evaluated"] == 5  # was 0.8333: colours scored 0
    assert evaluate_rag(EXAMPLES / "rich_testset.jsonl", "span", k=4, metrics=["recall@4"],
                        unscorable="zero").mean["recall@4"] == pytest.approx(5 / 6)


def test_probe_gives_eval_rags_means(tmp_path):
    records = tmp_path / "records.jsonl"
    cases = [c for c in CASES if c["id"] != "a4"]  # (a case with no chunk: probe has nothing to re-order)
    code, out, err = _invoke("eval-rag", str(_write(tmp_path / "t.jsonl", cases)), "-k", "2", "-m", "mrr,recall@2",
                             "--records", str(records), "--format", "json")
    assert code == 0, err
    mean = json.loads(out)["mean"]
    assert mean == {"mrr": 0.5, "recall@2": pytest.approx(2 / 3)}
    code, out, err = _invoke("probe", "--records", str(records), "--sources", "containment", "-m", "mrr,recall@2",
                             "-k", "2", "--format", "json")
    assert code == 0, err
    probe = json.loads(out)
    assert {n: probe["mean"][n]["containment"] for n in mean} == mean
    assert probe["incomplete"] == {"u1": "no ground truth: left out of the means",
                                   "u2": "no ground truth: left out of the means"}
