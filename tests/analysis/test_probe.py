"""Probe (docs/metrics.md §5): rank effect vs verdict effect, for one verdict list and for two
sources."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rankwise.analysis.probe import parse_verdicts, probe_records, probe_verdicts
from rankwise.cli import main
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, write_records
from rankwise.errors import InputError


def test_probe_1_0_1_spec_vectors():
    p = probe_verdicts([1, 0, 1])
    assert [m.name for m in p.metrics] == ["precision@3", "wcp@3", "wcp(decay=linear)@3", "acp@3", "ndcg@3", "mrr"]
    acp = p["acp@3"]
    assert acp.score == pytest.approx(5 / 6)
    assert acp.best == 1.0 and acp.best_order == [1, 1, 0]
    assert acp.worst == pytest.approx(7 / 12) and acp.worst_order == [0, 1, 1]   # rank effect: -0.25
    assert acp.score - acp.worst == pytest.approx(0.25)
    # verdict effect: [1,0,1] -> [1,1,1] rises 0.1667; dropping rank 1 -> [0,0,1] = 1/3
    assert acp.flip_deltas == pytest.approx([1 / 3 - 5 / 6, 1 / 6, 1 / 6])
    wcp = p["wcp@3"]
    assert round(wcp.score, 4) == 0.7039 and round(wcp.worst, 4) == 0.5307
    lin = p["wcp(decay=linear)@3"]
    assert round(lin.score, 4) == 0.7273 and round(lin.worst, 4) == 0.4545
    prec = p["precision@3"]
    assert prec.rank_range == 0.0  # plain precision cannot see the order
    assert prec.flip_deltas == pytest.approx([-1 / 3, 1 / 3, -1 / 3])
    assert p["mrr"].flip_deltas == pytest.approx([-2 / 3, 0.0, 0.0])


def test_probe_with_fixed_r_and_custom_metrics():
    p = probe_verdicts([0, 1], ["recall@2", "ndcg@2"], n_relevant=3)
    assert p["recall@2"].score == pytest.approx(1 / 3)
    assert p["recall@2"].flip_deltas == pytest.approx([1 / 3, -1 / 3])
    # ideal: 3 relevant items, so even the best order of one hit is below 1
    assert p["ndcg@2"].best == pytest.approx(1 / (1 + 1 / 1.5849625007211563))


def test_long_lists_use_sorted_extremes():
    v = [0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1]
    p = probe_verdicts(v, ["acp@12"])
    assert p["acp@12"].best == 1.0
    assert p["acp@12"].worst_order == sorted(v)


def test_parse_verdicts():
    assert parse_verdicts("1,0, 2") == [1, 0, 2]
    with pytest.raises(InputError, match="verdict 2"):
        parse_verdicts("1,x")


def two_source_records():
    def rec(cid, human, llm):
        return CaseRecord(cid, chunks=[ChunkRecord(rank=i + 1, id=f"{cid}-{i}", verdicts={"human": Verdict(h),
                                                                                    "llm": Verdict(m)})
                                       for i, (h, m) in enumerate(zip(human, llm, strict=True))])
    return [rec("q1", [1, 0, 1], [1, 1, 1]), rec("q2", [0, 1, 1], [0, 1, 1])]


def test_two_sources_verdict_attributable_difference():
    c = probe_records(two_source_records(), ["human", "llm"], ["acp@3", "precision@3"])
    q1 = c.cases[0]
    assert q1["differing_ranks"] == [2]
    assert q1["metrics"]["acp@3"]["verdict_effect"] == pytest.approx(1 / 6)
    assert c.cases[1]["metrics"]["acp@3"]["verdict_effect"] == 0.0
    assert c.mean["acp@3"]["verdict_effect"] == pytest.approx(1 / 12)
    assert c.mean["precision@3"]["verdict_effect"] == pytest.approx(1 / 6)
    assert c.mean["acp@3"]["human_rank_range"] == pytest.approx(5 / 12)  # both cases: 1.0 - 7/12
    assert c.mean["acp@3"]["llm_rank_range"] == pytest.approx((0 + 5 / 12) / 2)


def test_failed_verdicts_counted_as_incomplete():
    recs = two_source_records()
    recs[0].chunks[0].verdicts["llm"] = Verdict(None, status="failed", error="timeout")
    c = probe_records(recs, ["human", "llm"], ["precision@3"])
    assert c.incomplete == {"q1": "1 failed/missing llm verdicts"}
    assert len(c.cases) == 2


def test_unknown_source():
    with pytest.raises(InputError, match="no 'span' verdicts"):
        probe_records(two_source_records(), ["human", "span"])


def test_cli_probe_table_and_json():
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["probe", "--verdicts", "1,0,1"])
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "rank effect:" in out and "verdict effect:" in out
    assert "flip @2 0→1" in out
    acp_line = next(line for line in out.splitlines() if line.startswith("│ acp@3"))
    assert [c.strip() for c in acp_line.strip("│").split("│")] == [
        "acp@3", "0.8333", "1.0000", "0.5833", "0.4167", "-0.5000", "+0.1667", "+0.1667"]
    res = CliRunner().invoke(main, ["probe", "--verdicts", "1,0,1", "-m", "acp@3", "--format", "json"])
    d = json.loads(res.stdout)
    assert d["metrics"]["acp@3"]["worst_order"] == [0, 1, 1]


def test_cli_probe_records(tmp_path):
    path = write_records(two_source_records(), tmp_path / "r.jsonl")
    res = CliRunner().invoke(main, ["probe", "--records", str(path), "--sources", "human,llm", "-m", "acp@3",
                                    "--format", "json", "--per-query"])
    assert res.exit_code == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["mean"]["acp@3"]["verdict_effect"] == pytest.approx(1 / 12)
    assert [c["id"] for c in d["cases"]] == ["q1", "q2"]
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["probe", "--records", str(path), "-m", "acp@3",
                                                      "--per-query"])
    assert res.exit_code == 0 and "llm − human" in res.stdout and "+0.1667" in res.stdout
    res = CliRunner().invoke(main, ["probe"])
    assert res.exit_code == 2 and "either --verdicts" in res.stderr
