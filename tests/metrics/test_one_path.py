"""One path from verdicts to numbers: the registry parses names once, every metric is registered
(char_recall included), trec_eval names mean trec_eval's measures, one significance routine, the
gate's query-set check and floors."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

import rankwise
from rankwise.analysis.significance import randomization_test
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics.registry import METRICS, parse_measure, parse_measures, split_metric_list
from rankwise.relevance.text import spans_char_recall as plain_char_recall


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# -------------------------------------------------------------------------------------------
# registry
def test_every_metric_declares_its_parameters():
    for metric in METRICS.values():
        for p in metric.params:
            assert p.description and p.kind in (str, bool, int, float)
            assert not p.choices or p.default in p.choices
    wcp = METRICS["wcp"]
    assert [p.name for p in wcp.params] == ["decay", "ideal", "p", "a", "curve"]
    with pytest.raises(InputError, match="decay must be one of log, linear, rbp, power, flat, curve, not 'cubic'"):
        parse_measure("wcp(decay=cubic)@5")
    with pytest.raises(InputError, match="has no parameter 'decay'"):
        parse_measure("ndcg(decay=log)@5")
    assert parse_measure("acp(ragas_compat=yes)@3").name == "acp(ragas_compat=true)@3"
    assert parse_measure("wcp(decay=log)@3").name == "wcp@3"  # defaults are not spelled out


def test_trec_eval_list_syntax_and_splitting():
    assert [m.name for m in parse_measures("P.5,10")] == ["precision@5", "precision@10"]
    assert [m.name for m in parse_measures(["ndcg_cut.5,10", "map_cut.100", "success.1,5"])] == [
        "ndcg@5", "ndcg@10", "map@100", "hit_rate@1", "hit_rate@5"]
    assert split_metric_list("P.5,10,recall.5,wcp(decay=linear,ideal=k)@3,map") == [
        "P.5,10", "recall.5", "wcp(decay=linear,ideal=k)@3", "map"]
    with pytest.raises(InputError, match="takes no cutoff"):
        parse_measures("bpref.5")


def test_cli_accepts_trec_eval_syntax(tmp_path):
    qrels = _write(tmp_path / "q.txt", "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq2 0 d 1\n")
    run = _write(tmp_path / "r.trec", "q1 Q0 a 1 3.0 x\nq1 Q0 z 2 2.0 x\nq1 Q0 c 3 1.0 x\nq2 Q0 d 1 1.0 x\n")
    res = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "P.1,3", "-m", "ndcg_cut.3",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    mean = json.loads(res.output)["mean"]
    ref = rankwise.evaluate(str(qrels), str(run), ["P_1", "P_3", "ndcg_cut_3"]).mean
    assert mean == ref
    assert list(mean) == ["precision@1", "precision@3", "ndcg@3"]


def test_char_recall_is_a_registered_metric(tmp_path):
    res = CliRunner().invoke(main, ["metrics"], terminal_width=250)
    assert res.exit_code == 0
    assert "char_recall" in res.output and "decay=log" in res.output
    # on qrels alone it says what it needs
    qrels = _write(tmp_path / "q.txt", "q1 0 a 1\n")
    run = _write(tmp_path / "r.trec", "q1 Q0 a 1 1.0 x\n")
    res = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "char_recall@5"])
    assert res.exit_code == 2
    assert "char_recall@5 needs character spans" in res.output
    with pytest.raises(InputError, match="needs character spans"):
        rankwise.evaluate_rag([{"id": "q", "retrieved_contexts": ["a"], "reference_contexts": ["a"]}],
                              "containment", metrics=["char_recall@1"])


def test_char_recall_through_the_registry_equals_the_plain_function():
    from rankwise.data.testset import Chunk, ReferencePassage

    chunks = [{"text": "x", "doc_id": "d", "start": s, "end": e} for s, e in ((0, 50), (150, 200), (40, 70))]
    refs = [{"text": "y", "doc_id": "d", "start": s, "end": e} for s, e in ((40, 60), (140, 160))]
    r = rankwise.evaluate_rag([{"id": "q", "retrieved_contexts": chunks, "reference_contexts": refs}], "span",
                              metrics=["char_recall@1", "char_recall@2", "char_recall@3", "char_recall"])
    c = [Chunk(doc_id="d", start=x["start"], end=x["end"]) for x in chunks]
    p = [ReferencePassage(doc_id="d", start=x["start"], end=x["end"]) for x in refs]
    assert r.per_query["q"] == {"char_recall@1": plain_char_recall(c, p, 1), "char_recall@2": plain_char_recall(c, p, 2),
                                "char_recall@3": plain_char_recall(c, p, 3), "char_recall": plain_char_recall(c, p)}
    assert r.per_query["q"]["char_recall@2"] == 0.5 and r.per_query["q"]["char_recall@3"] == 0.75


# --------------------------------------------------------------------------- trec_eval names,
# trec_eval
def test_set_recall_follows_trec_eval():
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 0}}
    run = {"q1": {"a": 2.0, "x": 1.0}, "q2": {"c": 1.0}}
    r = rankwise.evaluate(qrels, run, ["set_recall", "set_P", "set_F", "id_recall"])
    assert r.per_query["q2"]["set_recall"] == 0.0  # no relevant document: 0, counted in the mean
    assert r.mean["set_recall"] == 0.25
    assert r.mean["set_P"] == 0.25
    assert r.per_query["q1"]["set_F"] == pytest.approx(0.5)
    assert r.per_query["q2"]["id_recall"] is None and r.mean["id_recall"] == 0.5  # the RAG id metric: undefined


def test_num_rel_all_line_as_trec_eval_prints_it(tmp_path):
    qrels = _write(tmp_path / "q.txt", "q1 0 a 1\nq1 0 b 2\nq2 0 c 2\nq3 0 d 1\n")
    run = _write(tmp_path / "r.trec", "q1 Q0 a 1 1.0 x\nq2 Q0 c 1 1.0 x\n")
    res = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "num_rel", "-l", "2", "--format", "trec"])
    assert res.exit_code == 0, res.output
    assert "num_rel               \tall\t4" in res.output  # trec_eval -c: every grade > 0, whatever -l
    res = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "num_rel", "-l", "2", "--format", "json"])
    assert json.loads(res.output)["mean"]["num_rel"] == 2  # the per-query sum at -l 2
    res = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "num_rel", "-l", "2", "--missing", "skip",
                                    "--format", "trec"])
    assert "num_rel               \tall\t2" in res.output  # without -c trec_eval sums the queries


# ------------------------------------------------------------------------------------ one p-value
def _exact_p(d):
    d = [x for x in d if x != 0]
    obs = abs(sum(d))
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(d))
               if abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= obs - 1e-9)
    return hits / 2 ** len(d)


def test_randomization_is_exact_up_to_twenty_nonzero_differences():
    rng = random.Random(4)
    d = [round(rng.uniform(-0.2, 0.5), 3) for _ in range(14)] + [0.0] * 40
    exact = _exact_p(d)
    assert randomization_test(d, permutations=100) == exact
    shuffled = list(d)
    rng.shuffle(shuffled)
    assert randomization_test(shuffled, permutations=10_000, seed=1) == exact
    many = [rng.uniform(-0.2, 0.5) for _ in range(60)]
    p1 = randomization_test(many, seed=3)
    assert p1 == randomization_test(list(reversed(many)), seed=3)  # order does not matter when sampling


# ------------------------------------------------------------------------------------------- gate
@pytest.fixture
def gate_files(tmp_path):
    rng = random.Random(2)
    qrels = {f"q{i}": {f"d{j}": rng.choice([0, 1]) for j in range(6)} for i in range(30)}
    _write(tmp_path / "qrels.txt", "".join(f"{q} 0 {d} {g}\n" for q, ds in qrels.items() for d, g in ds.items()))
    good = "".join(f"q{i} Q0 d{j} {j} {10 - j} g\n" for i in range(30) for j in range(6))
    _write(tmp_path / "base.trec", good)
    _write(tmp_path / "same.trec", good)
    _write(tmp_path / "missing.trec", "".join(line + "\n" for line in good.splitlines() if not line.startswith("q7 ")))
    return tmp_path


def test_gate_refuses_a_candidate_missing_a_query(gate_files):
    t = gate_files
    args = ["gate", "--qrels", str(t / "qrels.txt"), "--baseline", str(t / "base.trec"), "-m", "map"]
    res = CliRunner().invoke(main, [*args, "--candidate", str(t / "missing.trec")])
    assert res.exit_code == 2
    assert "different queries" in res.output and "'q7'" in res.output
    res = CliRunner().invoke(main, [*args, "--candidate", str(t / "missing.trec"), "--allow-query-mismatch",
                                    "--max-drop", "1"])
    assert res.exit_code == 0, res.output


def test_gate_floor_fails_whatever_the_test_says(gate_files):
    t = gate_files
    base = ["gate", "--qrels", str(t / "qrels.txt"), "--baseline", str(t / "base.trec"), "--candidate",
            str(t / "same.trec"), "--format", "json"]
    mean = rankwise.evaluate(str(t / "qrels.txt"), str(t / "same.trec"), ["ndcg@5"]).mean["ndcg@5"]
    res = CliRunner().invoke(main, [*base, "--min", f"ndcg@5={mean + 0.01:.4f}"])
    assert res.exit_code == 1
    check = json.loads(res.stdout)["checks"][0]
    assert check["below_floor"] and check["delta"] == 0.0 and check["metric"] == "ndcg@5"
    res = CliRunner().invoke(main, [*base, "--min", f"ndcg_cut_5={mean - 0.01:.4f}"])
    assert res.exit_code == 0
    res = CliRunner().invoke(main, [*base, "--min", "ndcg@5"])
    assert res.exit_code == 2 and "METRIC=VALUE" in res.output


def test_compare_rag_takes_test_sets_and_any_metric(tmp_path):
    cases = [{"id": f"c{i}", "retrieved_contexts": ["noise", f"fact {i}"] if i % 2 else [f"fact {i}", "noise"],
              "reference_contexts": [f"fact {i}"]} for i in range(8)]
    a = _write(tmp_path / "a.jsonl", "".join(json.dumps(c) + "\n" for c in cases))
    for c in cases:
        c["retrieved_contexts"] = [f"fact {c['id'][1:]}", "noise"]
    b = _write(tmp_path / "b.jsonl", "".join(json.dumps(c) + "\n" for c in cases))
    res = CliRunner().invoke(main, ["compare-rag", str(a), str(b), "-m", "mrr,ndcg@2", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["means"]["a"]["mrr"] == 0.75 and data["means"]["b"]["mrr"] == 1.0
    cmp = next(c for c in data["comparisons"] if c["metric"] == "mrr")
    assert cmp["p_value"] == _exact_p([0.5] * 4 + [0.0] * 4)  # 4 non-zero differences: exact, 2/16
    assert np.isclose(cmp["p_value"], 0.125)


def test_count_measures_sum_in_compare_and_gate_as_in_eval():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    runs = [{"q1": ["a", "x"], "q2": ["b"]}, {"q1": ["a"], "q2": ["b", "y", "z"]}]
    r = rankwise.compare(qrels, runs, ["num_ret", "P@1"], test="t")
    assert r.means["run1"]["num_ret"] == rankwise.evaluate(qrels, runs[0], ["num_ret"]).mean["num_ret"] == 3.0
    assert r.means["run2"]["num_ret"] == 4.0
    from rankwise.analysis.gate import gate

    g = gate(runs[0], runs[1], ["num_ret"], qrels=qrels, max_drop=10)
    assert (g.checks[0].baseline_mean, g.checks[0].candidate_mean) == (3.0, 4.0)


def test_wcp_decays_rbp_power_flat_curve(tmp_path):
    from rankwise.metrics import weighted_context_precision as wcp

    v = [0, 1, 1, 0]
    assert wcp(v, 4, "rbp", p=0.5) == pytest.approx((0.5 + 0.25) / (1 + 0.5 + 0.25 + 0.125))
    assert wcp(v, 4, "power", a=2.0) == pytest.approx((1 / 4 + 1 / 9) / (1 + 1 / 4 + 1 / 9 + 1 / 16))
    assert wcp(v, 4, "flat") == 0.5
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"accuracy": [0.9, 0.5, 0.6]}))
    case = [{"id": "q", "retrieved_contexts": ["x", "a b", "a b c", "y"], "reference_contexts": ["a b"]}]
    r = rankwise.evaluate_rag(case, "containment", metrics=[f"wcp(decay=curve,curve={curve})@4",
                                                              "wcp(decay=rbp,p=0.5)@4", "wcp(decay=rbp)@4"])
    names = list(r.mean)
    assert names[1:] == ["wcp(decay=rbp,p=0.5)@4", "wcp(decay=rbp,p=0.8)@4"]
    assert r.mean[names[0]] == pytest.approx((0.5 + 0.6) / (0.9 + 0.5 + 0.6 + 0.6))  # the last weight repeats
    assert r.mean[names[1]] == pytest.approx(wcp(v, 4, "rbp", p=0.5))
    with pytest.raises(InputError, match="p applies only with decay=rbp"):
        parse_measure("wcp(p=0.5)@4")
    with pytest.raises(InputError, match="between 0 and 1"):
        parse_measure("wcp(decay=rbp,p=1)@4")
    with pytest.raises(InputError, match="position curve"):
        rankwise.evaluate_rag(case, "containment", metrics=[f"wcp(decay=curve,curve={tmp_path / 'none.json'})@4"])
