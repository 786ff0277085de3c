"""Test vectors for the trec_eval measures in metrics/trec.py, judged@k and err@k.

One small case, worked by hand below; the expected doubles are what trec_eval 10.0 (built with
printf ``%.17g``) prints for it, so they are compared exactly.
tests/conformance/test_trec_eval_binary.py checks the same measures against the binary on thousands
of random queries.

    qrels q1: a=2 b=0 c=1 d=1 e=-1 f=3      R = 4 (a c d f), judged non-relevant: b
    run q1:   a 5.0, b 4.0, z 3.0, e 2.0, c 1.0
              ranking: a(2) b(0) z(not in qrels) e(negative grade: unjudged, in the pool) c(1)
    qrels q2: x=0 y=0                       R = 0
    run q2:   y 1, w 0.5
"""

from __future__ import annotations

import math
import shutil

import pytest

from _extras import need
from rankwise import evaluate
from rankwise.errors import InputError
from rankwise.metrics.registry import parse_measure, parse_measures
from rankwise.metrics.trec import TREC_NICKNAMES
from rankwise.report.text import to_trec

QRELS = {"q1": {"a": 2, "b": 0, "c": 1, "d": 1, "e": -1, "f": 3}, "q2": {"x": 0, "y": 0}}
RUN = {"q1": {"a": 5.0, "b": 4.0, "z": 3.0, "e": 2.0, "c": 1.0}, "q2": {"y": 1.0, "w": 0.5}}

# trec_eval name -> (q1, q2, all); None: not printed there
VECTORS = {
    # P@rel: 1/1 at a, 2/5 at c; / R = 4
    "map": (0.34999999999999998, 0.0, 0.17499999999999999),
    # exp(mean(log(max(AP, 1e-5)))) = sqrt(0.35 * 1e-5)
    "gm_map": (None, None, 0.0018708286933869713),
    # a: 1; c: 1 - min(1, R)/min(1, R) = 0 (b above it) -> 1/4
    "gm_bpref": (None, None, 0.0015811388300841893),
    # a: 1; c (j=4): 1/5 + 4/5 * (1+1+1)/4 * (1+e)/(1+1+2e) ~ 0.5 -> 1.5/4
    "infAP": (0.375, 0.0, 0.1875),
    # interpolated: max P@i at or past the rank where round(0.5 * 4) = 2 relevant are found: P@5 =
    # 0.4
    "iprec_at_recall_0.50": (0.40000000000000002, 0.0, 0.20000000000000001),
    "iprec_at_recall_0.25": (1.0, 0.0, 0.5),
    # mean of iprec at 0.2 (1), 0.5 (0.4), 0.8 (0: round(3.2) = 3 > 2 found)
    "11pt_avg_0.2,0.5,0.8": (0.46666666666666662, 0.0, 0.23333333333333331),
    # 11 points: 1,1,1,1 (0..0.3), 0.4 x3 (0.4..0.6), 0 x4 -> 5.2/11
    "11pt_avg": (0.47272727272727272, 0.0, 0.23636363636363636),
    # rank (long)(0.2*4 + 0.9) = 1: P@1 = 1; 1.2*4+0.9 -> 5: P@5 = 0.4; 2*4+0.9 -> 8 > 5 retrieved:
    # 2/8
    "Rprec_mult_0.20": (1.0, 0.0, 0.5),
    "Rprec_mult_1.20": (0.40000000000000002, 0.0, 0.20000000000000001),
    "Rprec_mult_2.00": (0.25, 0.0, 0.125),
    # relret^2 / (ret * R) = 4 / 20
    "set_map": (0.20000000000000001, 0.0, 0.10000000000000001),
    # relret / min(ret, R) = 2/4
    "set_relative_P": (0.5, 0.0, 0.25),
    # relevant in the top 2 / min(2, R) = 1/2
    "relative_P_2": (0.5, 0.0, 0.25),
    # 1*relret - 1*nonrelret: 2 - 3; q2: 0 - 2
    "utility": (-1.0, -2.0, -1.5),
    # 2*2 - 1*3 - 0.5*2 + 0.25*(0 + 2 - 5 - 4); q2: -1*2 + 0.25*(0 + 0 - 2 - 0)
    "utility_2,-1,-0.5,0.25": (-1.75, -2.5, -2.125),
    "num_nonrel_judged_ret": (1, 1, 2),
    # gains 2 (rank 1), 1 (rank 5): 2 + 1/log2(6); ideal 3 2 1 1
    "dcg": (2.3868528072345416, 0.0, 1.1934264036172708),
    "ideal_dcg": (5.1925360652163084, 0.0, 2.5962680326081542),
    "ndcg": (0.45966995265060545, 0.0, 0.22983497632530273),
    # gains 1->1, 2->3, 3->7: (3 + 1/log2 6) / (7 + 3/log2 3 + 1/2 + 1/log2 5)
    "ndcg_1=1,2=3,3=7": (0.34477167933511321, 0.0, 0.17238583966755661),
    "ndcg_rel": (0.51141913115462079, 0.0, 0.25570956557731039),
    "Rndcg": (0.50703787901548913, 0.0, 0.25351893950774457),
    "G": (0.23115238489299103, 0.0, 0.11557619244649552),
    "G_1=2": (0.21428068597884239, 0.0, 0.1071403429894212),
    # a at i=0: 1/log2(2 + 0); c at i=4, 1 relevant above: 1/log2(2 + 3) -> / R
    "binG": (0.35766913951834828, 0.0, 0.17883456975917414),
    # gains / 3 (top grade 3 > 1): 0.1 * (2/3 + 1/3 * 0.9^4)
    "rbp": (0.088536666666666639, 0.0, 0.044268333333333319),
    "rbp_p=0.5": (0.34375, 0.0, 0.171875),
    # 0.9^5 + 0.1 * (0.9^2 + 0.9^3) (z, e unjudged); q2: 0.9^2 + 0.1 * 0.9 (w)
    "rbp_resid": (0.74439000000000011, 0.90000000000000002, 0.82219500000000001),
    "unj_5": (0.40000000000000002, 0.20000000000000001, 0.30000000000000004),
    "unj_3": (0.33333333333333331, 0.33333333333333331, 0.33333333333333331),
    # log((1 + 1.4) / (1 + 4 - 1.4))
    "yaap": (-0.40546510810816444, 0.0, -0.20273255405408222),
    "set_F": (0.44444444444444448, 0.0, 0.22222222222222224),
}
SPECS = ["map", "gm_map", "gm_bpref", "infAP", "iprec_at_recall.0.5,0.25", "11pt_avg.0.2,0.5,0.8", "11pt_avg",
         "Rprec_mult.0.2,1.2,2.0", "set_map", "set_relative_P", "relative_P.2", "utility",
         "utility.2,-1,-0.5,0.25", "num_nonrel_judged_ret", "dcg", "ideal_dcg", "ndcg", "ndcg.1=1,2=3,3=7",
         "ndcg_rel", "Rndcg", "G", "G.1=2", "binG", "rbp", "rbp.p=0.5", "rbp_resid", "unj.5,3", "yaap", "set_F",
         "relstring", "relstring.3", "num_q"]


@pytest.fixture(scope="module")
def result():
    return evaluate(QRELS, RUN, SPECS, missing="skip")


def _by_trec_name(result):
    return {m.trec_name or m.name: m for m in result.measures}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vector(result, name):
    measure = _by_trec_name(result)[name]
    q1, q2, mean = VECTORS[name]
    if q1 is not None and measure.metric.aggregate != "gmean":
        assert result.per_query["q1"][measure.name] == q1
        assert result.per_query["q2"][measure.name] == q2
    assert result.mean[measure.name] == mean


def test_relstring_texts_and_trec_layout(result):
    text = to_trec(result, per_query=True)
    lines = text.splitlines()
    assert "relstring             \tq1\t'20-.1'" in lines
    assert "relstring_3           \tq1\t'20-'" in lines
    assert "relstring             \tq2\t'0-'" in lines
    # trec_eval prints relstring only per query, gm_* and num_q only on the all line
    assert not any(line.startswith("relstring") and "\tall\t" in line for line in lines)
    assert not any(line.startswith(("gm_map", "gm_bpref", "num_q")) and "\tall\t" not in line for line in lines)
    assert "gm_map                \tall\t0.0019" in lines
    assert "num_nonrel_judged_ret \tq1\t1" in lines
    assert "num_nonrel_judged_ret \tall\t2" in lines
    assert "utility_2,-1,-0.5,0.25\tq1\t-1.7500" in lines


def test_ndcg_p_by_hand():
    # ndcg_p (m_ndcg_p.c; trec_eval 10.0 does not register it): discount 1 at rank 1, 1/log2(i) at
    # rank i > 1
    r = evaluate(QRELS, RUN, ["ndcg_p"], missing="skip")
    dcg = 2 + 1 / math.log2(5)
    ideal = 3 + 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert r.per_query["q1"]["ndcg_p"] == pytest.approx(dcg / ideal, abs=1e-15)
    assert r.per_query["q2"]["ndcg_p"] == 0.0


def test_judged_at_k():
    r = evaluate(QRELS, RUN, ["judged@3", "Judged@5", "judged"], missing="skip")
    # q1 top 3: a b z -> 2 listed in the qrels; top 5: a b e c (e's grade is negative, but it is
    # listed)
    assert r.per_query["q1"] == {"judged@3": 2 / 3, "judged@5": 4 / 5, "judged": 4 / 5}
    # q2: y listed, w not; 2 retrieved, so the share is over 2
    assert r.per_query["q2"] == {"judged@3": 0.5, "judged@5": 0.5, "judged": 0.5}


def test_err_at_k():
    r = evaluate(QRELS, RUN, ["err@5", "err(max_grade=2)@1"], missing="skip")
    # R = (2^g - 1) / 16: a 3/16 at rank 1, c 1/16 at rank 5 after a, b, z, e
    assert r.per_query["q1"]["err@5"] == pytest.approx(3 / 16 + (1 / 5) * (1 / 16) * (1 - 3 / 16), abs=1e-15)
    assert r.per_query["q1"]["err(max_grade=2)@1"] == pytest.approx(3 / 4, abs=1e-15)
    assert r.per_query["q2"]["err@5"] == 0.0


def test_missing_queries_score_as_trec_eval_c():
    # q3 is in the qrels only: with missing="zero" (trec_eval -c) it counts, with an empty ranking
    qrels = {**QRELS, "q3": {"m": 1, "n": 2}}
    r = evaluate(qrels, RUN, ["gm_map", "utility", "utility.2,-1,-0.5,0.25", "rbp_resid", "rbp_resid.p=0.5",
                              "yaap", "num_rel"])
    assert r.per_query["q3"]["utility"] == 0.0  # trec_eval zeroes the bare name
    assert r.per_query["q3"]["utility(coefficients=2,-1,-0.5,0.25)"] == -1 + -0.5 * 2 + 0.25 * (0 - 1 - 2)
    assert r.per_query["q3"]["rbp_resid"] == 0.0
    assert r.per_query["q3"]["rbp_resid(gains=p=0.5)"] == 1.0  # its placeholder item is unjudged
    assert r.per_query["q3"]["yaap"] == pytest.approx(math.log(1 / 3), abs=1e-15)
    assert r.mean["gm_map"] == pytest.approx((0.35 * 1e-5 * 1e-5) ** (1 / 3), rel=1e-14)


def test_names_parameters_and_trec_names():
    cases = {
        "iprec_at_recall.0.1": ("iprec_at_recall(recall=0.1)", "iprec_at_recall_0.10"),
        "Rprec_mult.0.2": ("Rprec_mult(mult=0.2)", "Rprec_mult_0.20"),
        "ndcg.1=1,2=3,3=7": ("ndcg_gains(gains=1=1,2=3,3=7)", "ndcg_1=1,2=3,3=7"),
        "rbp.p=0.8": ("rbp(gains=p=0.8)", "rbp_p=0.8"),
        "rbp(p=0.8)": ("rbp(p=0.8)", "rbp_p=0.8"),
        "relative_P.5": ("relative_P@5", "relative_P_5"),
        "unj.10": ("unj@10", "unj_10"),
        "11pt_avg": ("11pt_avg", "11pt_avg"),
        "infAP": ("inf_ap", "infAP"),
        "relstring.20": ("relstring(length=20)", "relstring_20"),
        "judged@10": ("judged@10", None),
    }
    for text, (name, trec_name) in cases.items():
        m = parse_measure(text)
        assert (m.name, m.trec_name) == (name, trec_name), text
    assert [m.trec_name for m in parse_measures("iprec_at_recall.0,0.5,1")] == [
        "iprec_at_recall_0.00", "iprec_at_recall_0.50", "iprec_at_recall_1.00"]
    # a list continues across commas, negative coefficients included
    assert [m.trec_name for m in parse_measures("utility.1,-1,0,0.5,map")] == ["utility_1,-1,0,0.5", "map"]


@pytest.mark.parametrize("text,message", [
    ("ndcg.1=x", "gain map is level=gain pairs"),
    ("Rprec_mult.abc", "mult must be a number"),
    ("G.-1=2", "levels >= 0"),
    ("utility.1,2", "utility takes 4 coefficients"),
    ("rbp.p=x", "p must be a number"),
    ("nerr8(max_rel=0)@5", "max_rel (0) must exceed min_rel (0)"),
])
def test_bad_parameters_are_one_line_errors(text, message):
    with pytest.raises(InputError) as info:
        evaluate(QRELS, RUN, [text])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_parameter_on_the_command_line(tmp_path):
    from _inprocess import run_cli

    (tmp_path / "q").write_text("q1 0 a 1\n")
    (tmp_path / "r").write_text("q1 Q0 a 1 1.0 t\n")
    done = run_cli(["eval", str(tmp_path / "q"), str(tmp_path / "r"),
                    "-m", "ndcg.x=1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "gain map" in done.stderr and "Traceback" not in done.stderr


def _peer_data(seed: int):
    import random

    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(1, 31):
        docs = [f"d{j}" for j in rng.sample(range(400), 120)]
        qrels[str(q)] = {d: rng.choice([0, 0, 0, 1, 1, 2, 3, 4]) for d in docs[: rng.randint(1, 60)]}
        scores = rng.sample(range(1, 100_000), rng.randint(1, 100))  # distinct: the peers break ties otherwise
        run[str(q)] = {d: s / 7.0 for d, s in zip(docs[rng.randint(0, 30):], scores, strict=False)}
    return qrels, run


def test_judged_matches_ir_measures():
    ir_measures = need("ir_measures")
    qrels, run = _peer_data(7)
    ours = evaluate(qrels, run, ["judged@5", "judged@20", "judged@100"], missing="skip")
    for k in (5, 20, 100):
        for row in ir_measures.iter_calc([ir_measures.Judged @ k], qrels, run):
            assert ours.per_query[row.query_id][f"judged@{k}"] == pytest.approx(row.value, abs=1e-15)


def test_err_matches_gdeval():
    # ir_measures runs the TREC Web track's gdeval.pl (perl) for ERR@k; it prints 5 decimals
    ir_measures = need("ir_measures")
    if shutil.which("perl") is None:
        pytest.skip("perl not installed: gdeval.pl cannot run")
    qrels, run = _peer_data(11)
    ours = evaluate(qrels, run, ["err@5", "err@20"], missing="skip")
    compared = 0
    for k in (5, 20):
        for row in ir_measures.iter_calc([ir_measures.ERR @ k], qrels, run):
            assert ours.per_query[row.query_id][f"err@{k}"] == pytest.approx(row.value, abs=6e-6)
            compared += 1
    assert compared == 60


def test_nerr_matches_cwl_eval():
    # ir_measures' NERR8/NERR9 run cwl_eval (Azzopardi, Mackenzie & Moffat's C/W/L implementation)
    ir_measures = need("ir_measures")
    need("cwl")
    qrels, run = _peer_data(3)
    names = {"nerr8(max_rel=4)@10": ir_measures.NERR8(cutoff=10, min_rel=0, max_rel=4),
             "nerr9(max_rel=4)@10": ir_measures.NERR9(cutoff=10, min_rel=0, max_rel=4),
             "nerr8(max_rel=2)@1000": ir_measures.NERR8(cutoff=1000, min_rel=0, max_rel=2)}
    ours = evaluate(qrels, run, list(names), missing="skip")
    compared = 0
    for name, measure in names.items():
        for row in ir_measures.iter_calc([measure], qrels, run):
            assert ours.per_query[row.query_id][parse_measure(name).name] == pytest.approx(row.value, abs=1e-15)
            compared += 1
    assert compared == 90


def test_relstring_texts_in_json():
    r = evaluate(QRELS, RUN, ["relstring", "map"], missing="skip")
    out = r.to_json(per_query=True)
    assert out["texts"] == {"relstring": {"q1": "20-.1", "q2": "0-"}}
    assert out["per_query"]["q1"]["relstring"] == 5.0  # its number: the string's length


def test_printed_names_parse_back():
    # every name trec_eval prints for all_trec (and a few with parameters) names the same measure
    # again
    names = [m.trec_name for m in parse_measures(["all_trec", "ndcg.1=1,2=3", "rbp.p=0.8", "relstring.5"])]
    assert len(names) == 102 and None not in names
    for name in names:
        if name.startswith(("ndcg_1=", "rbp_p=")):  # gain maps and pairs parse in their dotted spelling
            continue
        assert parse_measure(name).trec_name == name, name


def test_judged_counts_verdicts_of_records():
    # a pooled LLM judge: chunks whose verdict failed or is missing have no judgement
    from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
    from rankwise.metrics.engine import evaluate_matrix
    from rankwise.metrics.matrix import RelevanceMatrix

    chunks = [ChunkRecord(rank=1, verdicts={"llm": Verdict(1)}), ChunkRecord(rank=2, verdicts={"llm": Verdict(None, status="failed")}),
              ChunkRecord(rank=3, verdicts={}), ChunkRecord(rank=4, verdicts={"llm": Verdict(0)})]
    m = RelevanceMatrix.from_records([CaseRecord("q1", chunks=chunks)], "llm")
    r = evaluate_matrix(m, ["judged@2", "judged@4", "judged@10"])
    assert r.per_query["q1"] == {"judged@2": 0.5, "judged@4": 0.5, "judged@10": 0.5}


# `-m all_trec -m relstring.20`: relstring takes the parameter
_AQL = [("relstring.20" if s == "relstring" else s) for s in TREC_NICKNAMES["all_trec"]]
NIST_CASES = [  # expected file, qrels, run, rankwise measures, relevance level, missing ("zero" is -c), -q
    ("out.test", "qrels.test", "results.test", ["official"], 1, "skip", False),
    ("out.test.a", "qrels.test", "results.test", ["all_trec"], 1, "skip", False),
    ("out.test.aq", "qrels.test", "results.test", ["all_trec"], 1, "skip", True),
    ("out.test.aqc", "qrels.test", "results.trunc", ["all_trec"], 1, "zero", True),
    ("out.test.aql", "qrels.rel_level", "results.test", _AQL, 2, "skip", True),
    ("out.test.meas_params", "qrels.test", "results.test",
     ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000", "Rprec_mult.5.0,0.2,0.35",
      "utility.2,-1,0,0", "11pt_avg..25,.5,.75", "ndcg.1=3,2=9,4=4.5", "ndcg_cut.10,20,23", "success.2,5,20"],
     1, "skip", True),
]


@pytest.mark.parametrize("case", NIST_CASES, ids=[c[0] for c in NIST_CASES])
def test_nist_expected_outputs(shared_data, case):
    """The NIST suite's expected outputs (printed by trec_eval 10.0; its README gives each command),
    text for text and in order, runid too: the run file's tag (STANDARD), printed only where the
    measure set asks for it (official, all_trec; not meas_params). meas_params asks
    ``ndcg_cut.23.4``, which trec_eval truncates to 23 and rankwise refuses: it asks ``ndcg_cut.23``
    here."""
    expected_file, qrels, run, measures, level, missing, per_query = case
    folder = shared_data / "trec_eval"
    result = evaluate(folder / qrels, folder / run, measures, relevance_level=level, missing=missing)
    ours = to_trec(result, per_query=per_query).splitlines()
    expected = (folder / expected_file).read_text().splitlines()
    assert len(expected) > 20
    assert ours == expected
    assert ("runid                 \tall\tSTANDARD" in ours) == (expected_file != "out.test.meas_params")
