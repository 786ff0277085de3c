"""Agreement between two verdict sources: kappa checked against scikit-learn, breakdowns, the CLI.
"""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from _extras import need
from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, load_records, write_records
from rankwise.errors import InputError
from rankwise.relevance.agreement import agreement, cohen_kappa, weighted_kappa


def _pairs(seed: int, n: int, labels: int, agree: float) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = rng.randrange(labels)
        out.append((x, x if rng.random() < agree else rng.randrange(labels)))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_kappa_matches_sklearn(seed):
    sklearn = need("sklearn.metrics")
    pairs = _pairs(seed, 40 + seed * 17, 2, 0.3 + 0.08 * seed)
    a, b = zip(*pairs, strict=True)
    assert cohen_kappa(pairs) == pytest.approx(sklearn.cohen_kappa_score(a, b), abs=1e-12)
    graded = _pairs(seed, 60, 4, 0.5)
    a, b = zip(*graded, strict=True)
    labels = list(range(min(a + b), max(a + b) + 1))
    for w in ("linear", "quadratic"):
        assert weighted_kappa(graded, w) == pytest.approx(
            sklearn.cohen_kappa_score(a, b, weights=w, labels=labels), abs=1e-12)


def test_kappa_hand_values():
    # 2x2 table [[20, 5], [10, 15]]: po = 0.7, pe = 0.5 -> 0.4
    pairs = [(0, 0)] * 20 + [(0, 1)] * 5 + [(1, 0)] * 10 + [(1, 1)] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([(1, 1), (0, 0)]) == 1.0
    assert cohen_kappa([(1, 0), (0, 1)]) == -1.0
    assert cohen_kappa([(1, 1), (1, 1)]) is None  # one class only: undefined, not NaN, not 1
    assert cohen_kappa([]) is None


def _record(cid, rows, *, a="human", b="llm"):
    """rows: (human verdict, human type, human reason, llm verdict, llm reason); None verdict =
    failed llm."""
    chunks = []
    for i, (hv, ht, hr, lv, lr) in enumerate(rows):
        llm = Verdict(lv, reason=lr) if lv is not None else Verdict(None, status="failed", error="refused: no")
        chunks.append(ChunkRecord(rank=i + 1, id=f"{cid}c{i + 1}", text=f"chunk {i + 1} of {cid}",
                                  verdicts={a: Verdict(hv, type=ht, reason=hr), b: llm}))
    return CaseRecord(cid, question=f"question {cid}?", chunks=chunks)


RECORDS = [
    _record("q1", [(1, "answer", "states it", 1, "mentions 1889"),
                   (0, "topic_only", "same topic", 1, "mentions the tower"),
                   (1, "partial", "half of it", 1, "mentions construction"),
                   (0, "irrelevant", None, 0, "unrelated")]),
    _record("q2", [(1, "answer", "states it", 1, "has it"),
                   (1, "partial", "part", 0, "does not say when"),
                   (0, "supports_wrong_answer", "says 1887", 1, "mentions a year"),
                   (0, "irrelevant", None, None, None)]),
]


def test_agreement_report():
    a = agreement(RECORDS, "human", "llm")
    # compared: 7 chunks (the failed llm verdict is counted, not compared)
    assert (a.n, a.cases) == (7, 2)
    assert a.skipped == {"llm failed": 1}
    assert a.confusion == [[1, 2], [1, 3]]
    assert a.accuracy == pytest.approx(4 / 7)
    po, pa1, pb1 = 4 / 7, 4 / 7, 5 / 7
    pe = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    assert a.kappa == pytest.approx((po - pe) / (1 - pe))
    assert a.kappa_ci[0] < a.kappa < a.kappa_ci[1]
    assert a.b_precision == pytest.approx(3 / 5) and a.b_recall == pytest.approx(3 / 4)
    assert [(t.type, t.n, t.agree, t.b_relevant) for t in a.by_type] == [
        ("answer", 2, 2, 2), ("partial", 2, 1, 1), ("topic_only", 1, 0, 1), ("supports_wrong_answer", 1, 0, 1),
        ("irrelevant", 1, 1, 0)]
    assert [(d.case_id, d.rank, d.a, d.b, d.a_reason, d.b_reason, d.type) for d in a.disagreements] == [
        ("q1", 2, 0, 1, "same topic", "mentions the tower", "topic_only"),
        ("q2", 2, 1, 0, "part", "does not say when", "partial"),
        ("q2", 3, 0, 1, "says 1887", "mentions a year", "supports_wrong_answer")]
    d = a.to_dict()
    assert d["confusion"] == {"a0_b0": 1, "a0_b1": 2, "a1_b0": 1, "a1_b1": 3}
    json.dumps(d)


def test_graded_kappa_when_both_sources_grade():
    rec = CaseRecord("q", chunks=[ChunkRecord(rank=i + 1, verdicts={"human": Verdict(int(h >= 2), grade=h),
                                                                 "llm": Verdict(int(g >= 2), grade=g)})
                                  for i, (h, g) in enumerate([(3, 3), (2, 3), (0, 1), (1, 0), (2, 2)])])
    a = agreement([rec])
    assert a.graded_n == 5 and a.graded_kappa == pytest.approx(0.7540983606557378)


def test_agreement_errors():
    with pytest.raises(InputError, match=r"no 'gpt' verdicts in the records \(sources present: human, llm\)"):
        agreement(RECORDS, "human", "gpt")
    with pytest.raises(InputError, match="two different sources"):
        agreement(RECORDS, "llm", "llm")
    rec = CaseRecord("q", chunks=[ChunkRecord(rank=1, verdicts={"human": Verdict(1),
                                                           "llm": Verdict(None, status="failed")})])
    with pytest.raises(InputError, match="no chunk has an ok verdict from both 'human' and 'llm'"):
        agreement([rec])


def test_agree_cli_json_and_table(tmp_path):
    path = write_records(RECORDS, tmp_path / "records.jsonl")
    r = CliRunner().invoke(main, ["agree", str(path), "--a", "human", "--b", "llm", "-m", "acp@4,precision@4",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["n"] == 7 and out["accuracy"] == pytest.approx(4 / 7)
    assert len(out["disagreements"]) == 3
    # q1: human [1,0,1,0] llm [1,1,1,0]; q2: human [1,1,0,0] llm [1,0,1,failed->0]
    # acp@4: q1 0.8333 -> 1.0 (+0.1667); q2 1.0 -> 0.8333 (-0.1667): mean effect 0
    eff = out["verdict_effect"]
    assert eff["acp@4"]["human"] == pytest.approx((5 / 6 + 1.0) / 2)
    assert eff["acp@4"]["llm"] == pytest.approx((1.0 + 5 / 6) / 2)
    assert eff["acp@4"]["verdict_effect"] == pytest.approx(0.0, abs=1e-12)
    assert eff["precision@4"]["verdict_effect"] == pytest.approx(((3 - 2) + (2 - 2)) / 4 / 2)
    assert out["incomplete_cases"] == {"q2": "1 failed/missing llm verdicts"}
    r = CliRunner().invoke(main, ["agree", str(path)], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "agreement of llm with human: 7 chunks in 2 cases" in text
    assert f"accuracy {4 / 7:.3f}, Cohen's kappa" in text
    assert "not compared: llm failed 1" in text
    assert "topic_only" in text and "supports_wrong_answer" in text and "mentions the tower" in text
    assert "note: 1 case has failed/missing verdicts" in text


def test_human_labels_then_llm_then_agree_end_to_end(tmp_path):
    """Human labels go in through eval-rag, an LLM judge adds its verdicts, agree compares the two.
    """
    from llm_server import running_server

    ts = tmp_path / "ts.jsonl"
    ts.write_text(json.dumps({"id": "q1", "user_input": "When was the Eiffel Tower completed?",
                              "reference": "It was completed in 1889.",
                              "retrieved_contexts": [{"id": "c1", "text": "The tower was completed in 1889."},
                                                     {"id": "c2", "text": "Paris is in France."},
                                                     {"id": "c3", "text": "Work was completed on time."}]}) + "\n")
    labels = tmp_path / "labels.csv"
    labels.write_text("query_id,chunk_id,verdict,type,reason\nq1,c1,1,answer,gives the year\n"
                      "q1,c2,0,irrelevant,\nq1,c3,0,topic_only,no year\n")
    human = tmp_path / "human.jsonl"
    runner = CliRunner()
    r = runner.invoke(main, ["eval-rag", str(ts), "--relevance", "human", "--labels", str(labels), "--records",
                             str(human), "--format", "json"])
    assert r.exit_code == 0, r.output
    both = tmp_path / "both.jsonl"
    with running_server() as srv:
        r = runner.invoke(main, ["judge", str(human), "--model", "judge-test", "--base-url", srv.base_url,
                                 "--cache", str(tmp_path / "c.sqlite"), "--records", str(both), "--quiet"])
    assert r.exit_code == 0, r.output
    rec = load_records(both)[0]
    assert rec.verdicts("human") == [1, 0, 0] and rec.verdicts("llm") == [1, 0, 1]
    r = runner.invoke(main, ["agree", str(both), "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["confusion"] == {"a0_b0": 1, "a0_b1": 1, "a1_b0": 0, "a1_b1": 1}
    assert out["disagreements"][0]["type"] == "topic_only"
    assert out["disagreements"][0]["b_reason"] == "the chunk mentions completed"
