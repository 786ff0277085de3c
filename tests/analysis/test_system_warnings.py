"""compare-rag and gate name the system each RAG warning concerns, and print each distinct one once.
"""

from __future__ import annotations

import json
import warnings

from click.testing import CliRunner

from rankwise.analysis.compare import compare_records
from rankwise.analysis.gate import gate
from rankwise.analysis.system_warnings import name_warnings
from rankwise.cli import main
from rankwise.metrics.rag import evaluate_rag

DUP1 = ("1 case lists a chunk id more than once (case 'q1': 'd1' 2 times); each copy is judged at its own "
        "rank, and a repeat earns no new relevant item")
DUP2 = ("2 cases list a chunk id more than once (case 'q1': 'd1' 2 times); each copy is judged at its own "
        "rank, and a repeat earns no new relevant item")
K5 = ("K = 5 is larger than every retrieved list (the longest holds 3 chunks): at K = 5 the ranks past 3 count "
      "as not relevant")
UNSCORABLE = ("1 unscorable case: q2 (no retrieved chunks) -> scored 0 on every metric and kept in the means "
              "(docs/context-metrics.md)")


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _sets(tmp_path):
    a = _write(tmp_path / "bm25.jsonl", [
        {"id": "q1", "retrieved_context_ids": ["d1", "d1", "d2"], "reference_context_ids": ["d2"]},
        {"id": "q2", "retrieved_context_ids": ["d3", "d4"], "reference_context_ids": ["d3"]}])
    b = _write(tmp_path / "dense.jsonl", [
        {"id": "q1", "retrieved_context_ids": ["d2", "d1", "d1"], "reference_context_ids": ["d2"]},
        {"id": "q2", "retrieved_context_ids": ["d4", "d4"], "reference_context_ids": ["d3"]}])
    c = _write(tmp_path / "hybrid.jsonl", [
        {"id": "q1", "retrieved_context_ids": ["d2", "d1", "d1"], "reference_context_ids": ["d2"]},
        {"id": "q2", "retrieved_context_ids": [], "reference_context_ids": ["d3"]}])
    return a, b, c


def _warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rankwise: warning: ")]


def test_compare_rag_names_each_system_once(tmp_path):
    a, b, c = _sets(tmp_path)
    res = CliRunner().invoke(main, ["compare-rag", str(a), str(b), str(c), "--source", "ids",
                                    "-m", "precision@5,mrr"])
    assert res.exit_code == 0, res.output
    assert _warning_lines(res.stderr) == [
        f"rankwise: warning: systems 'bm25' and 'hybrid': {DUP1}",
        f"rankwise: warning: systems 'bm25', 'dense' and 'hybrid': {K5}",
        f"rankwise: warning: system 'dense': {DUP2}",
        f"rankwise: warning: system 'hybrid': {UNSCORABLE}",
    ]


def test_compare_rag_json_summary_holds_the_named_warnings(tmp_path):
    a, b, _ = _sets(tmp_path)
    res = CliRunner().invoke(main, ["compare-rag", str(a), str(b), "--source", "ids", "-m", "precision@5",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["warnings"] == [
        f"system 'bm25': {DUP1}", f"systems 'bm25' and 'dense': {K5}", f"system 'dense': {DUP2}"]


def test_compare_rag_sweep_repeats_no_warning(tmp_path):
    """The K sweep (--plot) scores the records again: what it finds anew is named, nothing is said
    twice."""
    a, b, _ = _sets(tmp_path)
    res = CliRunner().invoke(main, ["compare-rag", str(a), str(b), "--source", "ids", "-m", "precision@5",
                                    "--plot", str(tmp_path / "k.svg"), "--max-k", "6"])
    assert res.exit_code == 0, res.output
    k6 = ("K = 4, 5, 6 are larger than every retrieved list (the longest holds 3 chunks): at K = 4, 5, 6 the "
          "ranks past 3 count as not relevant")
    assert _warning_lines(res.stderr) == [
        f"rankwise: warning: system 'bm25': {DUP1}",
        f"rankwise: warning: systems 'bm25' and 'dense': {K5}",
        f"rankwise: warning: system 'dense': {DUP2}",
        f"rankwise: warning: systems 'bm25' and 'dense': {k6}",
    ]


def test_compare_rag_names_the_test_set_loader_warning(tmp_path):
    row = [{"id": "q1", "retrieved_contexts": ["paris is big", "rome"], "reference_contexts": ["paris is big"]},
           {"id": "q2", "retrieved_contexts": ["x"], "ground": ["x"]}]
    a, b = _write(tmp_path / "t1.jsonl", row), _write(tmp_path / "t2.jsonl", row)
    res = CliRunner().invoke(main, ["compare-rag", str(a), str(b), "-m", "precision@1"])
    assert res.exit_code == 0, res.output
    lines = _warning_lines(res.stderr)
    assert len(lines) == 3
    assert lines[0].startswith(f"rankwise: warning: system 't1': {a}: 1 case has no ground truth and fields "
                               "not recognised were not read as ground truth (kept as the case's own): 'ground' (1 case).")
    assert lines[1].startswith(f"rankwise: warning: system 't2': {b}: 1 case has no ground truth")
    assert lines[2] == ("rankwise: warning: systems 't1' and 't2': 1 unscorable case: q2 (no ground truth) -> "
                        "left out of the retrieval means, as trec_eval leaves out unjudged queries "
                        "(--unscorable zero scores them 0)")


def test_gate_names_baseline_and_candidate(tmp_path):
    a, _, c = _sets(tmp_path)
    res = CliRunner().invoke(main, ["gate", "--baseline", str(a), "--candidate", str(c), "--relevance", "ids",
                                    "-m", "precision@5"])
    assert res.exit_code == 0, res.output
    assert _warning_lines(res.stderr) == [
        f"rankwise: warning: systems 'bm25' and 'hybrid': {DUP1}",
        f"rankwise: warning: systems 'bm25' and 'hybrid': {K5}",
        f"rankwise: warning: system 'hybrid': {UNSCORABLE}",
    ]
    res = CliRunner().invoke(main, ["gate", "--baseline", str(a), "--candidate", str(c), "--relevance", "ids",
                                    "-m", "precision@5", "--format", "json"])
    assert json.loads(res.stdout)["summary"]["warnings"] == [
        f"systems 'bm25' and 'hybrid': {DUP1}", f"systems 'bm25' and 'hybrid': {K5}",
        f"system 'hybrid': {UNSCORABLE}"]


def test_gate_same_stem_names_the_role(tmp_path):
    a, _, _ = _sets(tmp_path)
    (tmp_path / "new").mkdir()
    b = _write(tmp_path / "new" / "bm25.jsonl", [
        {"id": "q1", "retrieved_context_ids": ["d1", "d2", "d3"], "reference_context_ids": ["d2"]},
        {"id": "q2", "retrieved_context_ids": ["d3", "d4"], "reference_context_ids": ["d3"]}])
    res = CliRunner().invoke(main, ["gate", "--baseline", str(a), "--candidate", str(b), "--relevance", "ids",
                                    "-m", "mrr"])
    assert res.exit_code == 0, res.output
    assert _warning_lines(res.stderr) == [f"rankwise: warning: system 'bm25 (baseline)': {DUP1}"]


def test_library_warns_once_per_line_with_names():
    recs = {"x": [{"id": "c1", "retrieved_context_ids": ["d1", "d1"], "reference_context_ids": ["d1"]}],
            "y": [{"id": "c1", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d1"]}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compare_records(recs, "ids", "mrr", permutations=100, resamples=100)
    dup = ("1 case lists a chunk id more than once (case 'c1': 'd1' 2 times); each copy is judged at its own "
           "rank, and a repeat earns no new relevant item")
    assert [str(w.message) for w in caught] == [f"system 'x': {dup}"]
    assert result.summary["warnings"] == [f"system 'x': {dup}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checked = gate(recs["x"], recs["y"], ["mrr"], relevance="ids", permutations=100)
    assert [str(w.message) for w in caught] == [f"system 'baseline': {dup}"]
    assert checked.summary["warnings"] == [f"system 'baseline': {dup}"]


def test_name_warnings_merges_identical_messages_only():
    assert name_warnings({"a": ["m", "n"], "b": ["n", "o"], "c": ["m", "n"]}) == [
        "systems 'a' and 'c': m", "systems 'a', 'b' and 'c': n", "system 'b': o"]
    assert name_warnings({"a": [], "b": []}) == []


K_DEFAULT = ("K = 5, 10 are larger than every retrieved list (the longest holds 3 chunks): at K = 5, 10 the ranks "
             "past 3 count as not relevant")


def test_default_cutoffs_past_every_list_are_warned_about(tmp_path):
    """The default cutoffs (1, 3, 5, 10) warn as typed ones do: from Python, eval-rag and
    compare-rag."""
    rows = [{"id": "q1", "retrieved_context_ids": ["d1", "d2", "d3"], "reference_context_ids": ["d2"]},
            {"id": "q2", "retrieved_context_ids": ["d3", "d4"], "reference_context_ids": ["d3"]}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_rag(rows, "ids")
    assert [str(w.message) for w in caught] == [K_DEFAULT]
    assert result.summary["warnings"] == [K_DEFAULT]
    path = _write(tmp_path / "bm25.jsonl", rows)
    res = CliRunner().invoke(main, ["eval-rag", str(path), "-r", "ids", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert _warning_lines(res.stderr) == [f"rankwise: warning: {K_DEFAULT}"]
    other = _write(tmp_path / "dense.jsonl", rows)
    res = CliRunner().invoke(main, ["compare-rag", str(path), str(other), "--source", "ids", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert _warning_lines(res.stderr) == [f"rankwise: warning: systems 'bm25' and 'dense': {K_DEFAULT}"]
    # cutoffs within the lists: nothing to say
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate_rag(rows, "ids", k=[1, 3])
    assert not caught
