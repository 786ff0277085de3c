"""evaluate_rag and `rankwise eval-rag`: every relevance mode on Ragas-format and rich test sets,
unscorable/incomplete cases counted, records written and read back, LLM verdicts from records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import rankwise
from rankwise.cli import main
from rankwise.data.records import Verdict, load_records, records_from_testset, write_records
from rankwise.errors import InputError
from rankwise.metrics.rag import default_rag_metrics, evaluate_rag

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RICH = EXAMPLES / "rich_testset.jsonl"
RAGAS = EXAMPLES / "ragas_testset.jsonl"

# Means at k=4 on the example test sets (6 cases, one without ground truth) with --unscorable zero:
# the case without ground truth scored 0 and kept in the means. Verified by hand for the first case
# below; the rest pin the behaviour. By default (skip) that case is left out: each mean is the same
# sum over 5 cases.
EXPECTED = {
    "containment": {"hit_rate@4": 0.8333, "precision@4": 0.2083, "recall@4": 0.6667, "acp@4": 0.7222,
                    "wcp@4": 0.2928, "mrr": 0.7222},
    "fuzzy": {"hit_rate@4": 0.8333, "precision@4": 0.25, "recall@4": 0.75, "acp@4": 0.7361, "wcp@4": 0.3208},
    "ids": {"hit_rate@4": 0.8333, "precision@4": 0.2917, "recall@4": 0.8333, "acp@4": 0.7361,
            "id_precision": 0.2917, "id_recall": 1.0},
    "span": {"hit_rate@4": 0.8333, "precision@4": 0.2917, "recall@4": 0.8333, "acp@4": 0.7361,
             "char_recall@4": 0.8333},
}


def rounded(mean: dict, names) -> dict:
    return {n: round(mean[n], 4) for n in names}


@pytest.mark.parametrize("relevance", ["containment", "fuzzy", "ids"])
@pytest.mark.parametrize("path", [RICH, RAGAS], ids=["rich", "ragas"])
def test_each_mode_on_both_formats(path, relevance):
    r = rankwise.evaluate_rag(path, relevance, k=4, unscorable="zero")
    assert rounded(r.mean, EXPECTED[relevance]) == EXPECTED[relevance]
    assert r.summary["cases"] == 6 and r.summary["evaluated"] == 6
    assert r.summary["unscorable_cases"] == {"colours": "no ground truth"}
    default = rankwise.evaluate_rag(path, relevance, k=4)  # the unanswerable case left out of the means
    assert default.summary["cases"] == 6 and default.summary["evaluated"] == 5
    assert "colours" not in default.per_query and default.records[-1].id == "colours"
    undefined = r.summary.get("undefined", {})  # id_recall: undefined without gold ids, left out either way
    assert {m: pytest.approx(v if m in undefined else v * 6 / 5) for m, v in r.mean.items()} == default.mean


def test_span_mode_on_the_rich_format_and_refused_on_ragas():
    r = evaluate_rag(RICH, "span", k=4, unscorable="zero")
    assert rounded(r.mean, EXPECTED["span"]) == EXPECTED["span"]
    with pytest.raises(InputError, match="no case can be scored with relevance 'span'"):
        evaluate_rag(RAGAS, "span", k=4)


def test_descale_case_by_hand():
    # descale: passage 1 ("Leave the mixture ...") sits whole in the rank-3 chunk; passage 0 ("fill
    # it with ... the 1 litre mark.") straddles a cut: all but its last word is in the rank-4 chunk,
    # "mark." in rank 3.
    r = evaluate_rag(RICH, "containment", k=4)
    rec = next(x for x in r.records if x.id == "descale")
    assert rec.verdicts("containment") == [0, 0, 1, 0]
    assert rec.passages_found["containment"] == [[], [], [1], []]
    assert r.per_query["descale"]["precision@4"] == 0.25
    assert r.per_query["descale"]["recall@4"] == 0.5
    assert r.per_query["descale"]["acp@4"] == pytest.approx(1 / 3)
    span = evaluate_rag(RICH, "span", k=4)
    rec = next(x for x in span.records if x.id == "descale")
    assert rec.verdicts("span") == [0, 0, 1, 1]  # the straddling passage is found by span
    assert span.per_query["descale"]["recall@4"] == 1.0
    assert span.per_query["descale"]["acp@4"] == pytest.approx((1 / 3 + 2 / 4) / 2)


def test_default_metrics():
    assert default_rag_metrics([10, 1, 5, 3], "containment") == [
        "hit_rate@1", "hit_rate@3", "hit_rate@5", "hit_rate@10", "precision@1", "precision@3", "precision@5",
        "precision@10", "recall@1", "recall@3", "recall@5", "recall@10", "f1@1", "f1@3", "f1@5", "f1@10",
        "mrr", "ndcg@10", "wcp@10", "acp@10", "context_recall@10"]
    assert default_rag_metrics([5], "ids")[-2:] == ["id_precision", "id_recall"]
    assert default_rag_metrics([1, 5], "span")[-2:] == ["char_recall@1", "char_recall@5"]


def test_ids_mode_set_metrics_spec_vectors_and_duplicates():
    ts = [{"id": "a", "retrieved_context_ids": ["d1", "d2", "d3", "d4"], "reference_context_ids": ["d1", "d4", "d5", "d6"]},
          {"id": "b", "retrieved_context_ids": ["d1", "d2", "d3"], "reference_context_ids": ["d1", "d4", "d5", "d6"]},
          {"id": "c", "retrieved_context_ids": ["d1", "d2", "d1", "d1"], "reference_context_ids": ["d1"]}]
    r = evaluate_rag(ts, "ids", k=4, metrics=["id_precision", "id_recall", "precision@4", "recall@4"])
    assert r.per_query["a"]["id_precision"] == 0.5
    assert r.per_query["b"]["id_recall"] == 0.25
    # duplicates collapsed for the set metrics; the ranked metrics count chunks, recall counts gold
    # once
    assert r.per_query["c"] == {"id_precision": 0.5, "id_recall": 1.0, "precision@4": 0.75, "recall@4": 1.0}


def test_ids_mode_graded_qrels_and_doc_id_field(tmp_path):
    ts = [{"id": "q", "retrieved_contexts": [{"id": "c1", "doc_id": "d2", "text": "x"},
                                              {"id": "c2", "doc_id": "d1", "text": "y"}],
           "reference_context_ids": ["d1"]}]
    qrels = {"q": {"d1": 1, "d2": 2}}
    r = evaluate_rag(ts, "ids", labels=qrels, id_field="doc_id", k=2, metrics=["ndcg@2", "precision@2", "recall@2"])
    assert r.mean == {"ndcg@2": 1.0, "precision@2": 1.0, "recall@2": 1.0}
    assert [c.verdicts["ids"].grade for c in r.records[0].chunks] == [2, 1]
    level2 = evaluate_rag(ts, "ids", labels=qrels, id_field="doc_id", k=2, relevance_level=2,
                          metrics=["precision@2", "recall@2"])
    assert level2.mean == {"precision@2": 0.5, "recall@2": 1.0}
    # chunk ids match nothing
    by_id = evaluate_rag(ts, "ids", k=2, metrics=["precision@2"])
    assert by_id.mean["precision@2"] == 0.0


def test_unscorable_cases_counted_listed_and_treated_as_asked():
    ts = [{"id": "ok", "retrieved_contexts": ["alpha beta"], "reference_contexts": ["alpha"]},
          {"id": "no-truth", "retrieved_contexts": ["alpha"]},
          {"id": "no-chunks", "retrieved_contexts": [], "reference_contexts": ["alpha"]}]
    zero = evaluate_rag(ts, k=1, metrics=["precision@1", "recall@1"], unscorable="zero")
    assert zero.summary["unscorable"] == 2
    assert zero.summary["unscorable_cases"] == {"no-chunks": "no retrieved chunks", "no-truth": "no ground truth"}
    assert zero.summary["evaluated"] == 3 and zero.mean == {"precision@1": 1 / 3, "recall@1": 1 / 3}
    assert "scored 0" in zero.summary["unscorable_treatment"]
    skip = evaluate_rag(ts, k=1, metrics=["precision@1", "recall@1"])  # the default
    # no ground truth: left out; no retrieved chunk (but ground truth): the retriever's miss, scored
    # 0
    assert skip.summary["evaluated"] == 2 and skip.mean == {"precision@1": 0.5, "recall@1": 0.5}
    assert skip.summary["unscorable"] == 2
    assert skip.summary["unscorable_treatment"] == (
        "no ground truth: left out of the retrieval means, as trec_eval leaves out unjudged queries "
        "(--unscorable zero scores them 0); no retrieved chunks: scored 0 on every metric and kept in the means "
        "(docs/context-metrics.md)")
    assert evaluate_rag(ts, k=1, metrics=["precision@1", "recall@1"], unscorable="skip").mean == skip.mean
    assert [r.id for r in skip.records] == ["ok", "no-truth", "no-chunks"]  # never dropped from the records
    assert skip.records[1].scores["containment"] == {"precision@1": None, "recall@1": None}
    assert skip.records[1].status["containment"] == "unscorable: no ground truth"


def llm_records(tmp_path) -> Path:
    """Records as `rankwise judge` writes them: llm verdicts (one failed) on the rich example's
    chunks."""
    recs = records_from_testset(RICH)
    for rec in recs:
        for c in rec.chunks:
            c.verdicts["llm"] = Verdict(1 if c.rank == 1 else 0, reason="judged",
                                        meta={"mode": "reference", "model": "test-model", "prompt_version": "1"})
    recs[0].chunks[1].verdicts["llm"] = Verdict(None, status="failed", error="unparseable reply after 3 tries",
                                                meta={"mode": "reference"})
    return write_records(recs, tmp_path / "judged.jsonl")


def test_llm_verdicts_read_from_records(tmp_path):
    path = llm_records(tmp_path)
    r = evaluate_rag(path, "llm", k=4, metrics=["precision@1", "precision@4", "acp@4"])
    assert r.mean == {"precision@1": 1.0, "precision@4": 0.25, "acp@4": 1.0}
    assert r.summary["incomplete_cases"] == {"descale": "1 failed verdict"}
    assert r.summary["verdicts"] == {"ok": 23, "failed": 1, "missing": 0}
    assert r.summary["evaluated"] == 6
    # the judge's verdicts and meta are kept; our scores are added beside them
    c = r.records[0].chunks[0].verdicts["llm"]
    assert c.meta["model"] == "test-model"
    out = r.write_records(tmp_path / "scored.jsonl")
    back = load_records(out)
    assert back[0].scores["llm"]["acp@4"] == 1.0
    assert back[0].chunks[1].verdicts["llm"].status == "failed"


def test_llm_without_verdicts_is_a_clear_error():
    with pytest.raises(InputError, match="rankwise judge"):
        evaluate_rag(RICH, "llm")
    with pytest.raises(InputError, match="unknown relevance"):
        evaluate_rag(RICH, "vibes")


def test_records_input_keeps_other_sources(tmp_path):
    first = evaluate_rag(RICH, "human", labels=EXAMPLES / "human_labels.csv", k=4)
    path = first.write_records(tmp_path / "h.jsonl")
    second = evaluate_rag(path, "span", k=4)
    rec = second.records[0]
    assert set(rec.sources()) == {"human", "span"}
    assert set(rec.scores) == {"human", "span"}


def test_inputs_are_not_mutated():
    recs = records_from_testset(RICH)
    evaluate_rag(recs, "containment", k=4)
    assert recs[0].sources() == []


# ---------------------------------------------------------------------------------------------- CLI


def run(*args) -> tuple[int, str, str]:
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_cli_worked_example(tmp_path):
    chunks = [f"filler {i}" for i in range(10)]
    chunks[0], chunks[4] = "the answer is 42.", "Also: the sky is blue!"
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "q", "user_input": "?", "retrieved_contexts": chunks,
                             "reference_contexts": ["The answer is 42", "the sky is blue", "grass is green"]}) + "\n")
    code, out, _ = run("eval-rag", str(p), "-k", "10", "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert set(d) == {"summary", "mean"}
    assert {m: round(d["mean"][m], 2) for m in ("hit_rate@10", "precision@10", "recall@10", "f1@10")} == {
        "hit_rate@10": 1.0, "precision@10": 0.2, "recall@10": 0.67, "f1@10": 0.31}
    code, out, _ = run("eval-rag", str(p), "-k", "10")
    assert code == 0
    assert "acp@10 †" in out and "divides by the relevant chunks retrieved" in out
    assert "0.2000" in out and "0.6667" in out and "0.3077" in out


def test_cli_json_shape_matches_eval_and_records(tmp_path):
    out_path = tmp_path / "records.jsonl"
    code, out, err = run("eval-rag", str(RAGAS), "-r", "fuzzy", "-k", "1,4", "--format", "json", "--per-query",
                         "--records", str(out_path))
    assert code == 0, err
    d = json.loads(out)
    assert set(d) == {"summary", "mean", "per_query"}
    assert set(d["per_query"]) == {"descale", "blinking-light", "limescale-warranty", "crumb-tray",
                                   "warranty-length"}  # colours has no ground truth: left out of the means
    assert d["summary"]["unscorable"] == 1
    recs = rankwise.load_records(out_path)
    assert len(recs) == 6 and recs[0].scores["fuzzy"]["precision@4"] == d["per_query"][recs[0].id]["precision@4"]


def test_cli_csv_metrics_and_labels():
    code, out, _ = run("eval-rag", str(RICH), "-r", "human", "--labels", str(EXAMPLES / "human_labels.csv"),
                       "-m", "acp(ragas_compat=true)@4,wcp(decay=linear)@4", "--format", "csv")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0] == "query_id,metric,value"
    assert [line.split(",")[1] for line in lines[1:]] == ["acp(ragas_compat=true)@4", "wcp(decay=linear)@4"]


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q", "retrieved_contexts": 5}\n')
    code, _, err = run("eval-rag", str(bad))
    assert code == 2
    assert err.strip() == f"rankwise: error: {bad}:1: field 'retrieved_contexts': expected a list, got int 5"
    code, _, err = run("eval-rag", str(RICH), "-r", "human")
    assert code == 2 and "needs labels" in err
    code, _, err = run("eval-rag", str(RICH), "-k", "a,b")
    assert code == 2 and "-k takes" in err


def test_records_are_copied_unless_copy_false():
    """``copy=True`` (default) leaves the caller's records without verdicts; ``copy=False`` (a
    sweep's own cells) judges them in place; both give the same numbers."""
    rows = [{"id": "q1", "retrieved_contexts": ["Paris is the capital of France.", "Rome is in Italy."],
             "reference_contexts": ["Paris is the capital of France."]}]
    mine = records_from_testset(rows)
    copied = evaluate_rag(mine, "containment", k=2)
    assert mine[0].sources() == [] and copied.records[0].verdicts("containment") == [1, 0]
    inplace = evaluate_rag(mine, "containment", k=2, copy=False)
    assert inplace.records[0] is mine[0] and mine[0].verdicts("containment") == [1, 0]
    assert inplace.mean == copied.mean and inplace.mean["precision@2"] == 0.5
