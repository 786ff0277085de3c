"""Conformance with trec_eval: every expected output of the NIST suite, for every measure we
implement.

The expected files (``tests/fixtures/trec_eval/out.*``) were printed by trec_eval 10.0; its README
gives the command behind each. We evaluate the same inputs with the same flags and compare our
``%6.4f`` (``%d`` for counts) text with trec_eval's, per query and ``all``.

Covered here, measure by measure: P_k, recall_k, success_k, map, map_cut_k, recip_rank, Rprec, ndcg,
ndcg_cut_k, bpref, num_q, num_ret, num_rel, num_rel_ret. Every other measure of these files
(iprec_at_recall, 11pt_avg, gm_*, infAP, Rprec_mult, utility, relative_P, set_*, ndcg_rel, Rndcg, G,
binG, rbp, unj, relstring, custom-gain ndcg ...) is compared text for text, whole files, in
``tests/conformance/test_trec_measures.py``; and every shared measure against a trec_eval binary
built from source in ``tests/conformance/test_trec_eval_binary.py``.

The other judgement formats and ``-Z`` are compared here too, whole files through ``rankwise eval
--format trec``, line for line and in order (runid's value aside: trec_eval prints the run's tag
column): ``out.test.prefs`` (``-R prefs``, from ``prefs.test`` and from ``prefs.comment.test``),
``out.test.qrels_prefs`` (``-R qrels_prefs``), ``out.test.qrels_jg`` (``-R qrels_jg``, from
``qrels.123`` and from ``qrels.comments.123``) and ``out.test.aqZ`` (``-Z zscores_file``);
tests/conformance/test_trec_prefs.py compares the same against the binary on random inputs. Every
expected output of the suite is reproduced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data import load_qrels, load_run
from rankwise.metrics import evaluate
from rankwise.report.text import to_trec

# trec_eval measure name -> rankwise canonical name (the cutoff, if any, is appended as @k)
_COVERED = [
    (re.compile(r"^P_(\d+)$"), "precision@{}"),
    (re.compile(r"^recall_(\d+)$"), "recall@{}"),
    (re.compile(r"^success_(\d+)$"), "hit_rate@{}"),
    (re.compile(r"^map$"), "map"),
    (re.compile(r"^map_cut_(\d+)$"), "map@{}"),
    (re.compile(r"^recip_rank$"), "mrr"),
    (re.compile(r"^Rprec$"), "r_precision"),
    (re.compile(r"^ndcg$"), "ndcg"),
    (re.compile(r"^ndcg_cut_(\d+)$"), "ndcg@{}"),
    (re.compile(r"^bpref$"), "bpref"),
    (re.compile(r"^(num_q|num_ret|num_rel|num_rel_ret)$"), "{}"),
]


def canonical(trec_name: str) -> str | None:
    """rankwise's name for a trec_eval measure we implement, else None."""
    for pattern, template in _COVERED:
        m = pattern.match(trec_name)
        if m:
            return template.format(*m.groups())
    return None


@dataclass
class Case:
    expected: str
    qrels: str
    run: str
    per_query: bool = False
    missing: str = "skip"  # trec_eval's default; -c is "zero"
    relevance_level: int = 1
    depth: int | None = None  # -M
    covers: set[str] = field(default_factory=set)  # trec_eval measure families checked (asserted below)


CASES = [
    Case("out.test", "qrels.test", "results.test",
         covers={"num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "P"}),
    Case("out.test", "qrels.test.with-comments", "results.test",
         covers={"num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "P"}),
    Case("out.comment.test", "qrels.comment.test", "results.comment.test",
         covers={"num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "P"}),
    *[
        Case(name, qrels, run, per_query=pq, missing=missing, relevance_level=level, depth=depth,
             covers={"num_q", "num_ret", "num_rel", "num_rel_ret", "map", "map_cut", "Rprec", "bpref",
                     "recip_rank", "P", "recall", "success", "ndcg", "ndcg_cut"})
        for name, qrels, run, pq, missing, level, depth in [
            ("out.test.a", "qrels.test", "results.test", False, "skip", 1, None),
            ("out.test.aq", "qrels.test", "results.test", True, "skip", 1, None),
            ("out.test.aqc", "qrels.test", "results.trunc", True, "zero", 1, None),
            ("out.test.aqcM", "qrels.test", "results.trunc", True, "zero", 1, 100),
            ("out.test.aql", "qrels.rel_level", "results.test", True, "skip", 2, None),
        ]
    ],
    Case("out.test.meas_params", "qrels.test", "results.test", per_query=True,
         covers={"P", "recall", "success", "ndcg_cut"}),
]


def _family(trec_name: str) -> str:
    return re.sub(r"_\d+$", "", trec_name)


def parse_expected(path: Path) -> dict[tuple[str, str], str]:
    """``(measure, qid) -> printed value`` for the measures we implement."""
    out = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split("\t")
        measure = measure.rstrip()
        if canonical(measure) is not None:
            out[(measure, qid)] = value
    return out


def _ours(case: Case, data: Path, names: list[str]) -> dict[tuple[str, str], str]:
    qrels = load_qrels(data / case.qrels)
    run = load_run(data / case.run)
    if case.depth is not None:
        run = run.truncate(case.depth)
    result = evaluate(qrels, run, names, relevance_level=case.relevance_level, missing=case.missing)
    text = to_trec(result, per_query=case.per_query)
    out = {}
    for line in text.splitlines():
        measure, qid, value = line.split("\t")
        out[(measure.rstrip(), qid)] = value
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.expected}<-{c.qrels}")
def test_matches_trec_eval(case: Case, shared_data: Path):
    data = shared_data / "trec_eval"
    expected = parse_expected(data / case.expected)
    assert {_family(m) for m, _ in expected} == case.covers, "coverage list out of date"
    names = list(dict.fromkeys(canonical(m) for m, _ in expected))
    ours = _ours(case, data, names)
    mismatches = [(key, value, ours.get(key)) for key, value in expected.items() if ours.get(key) != value]
    assert not mismatches, f"{len(mismatches)} of {len(expected)} differ, first: {mismatches[:5]}"
    # and we print nothing trec_eval does not (same queries, same measures)
    ours_covered = {k for k in ours if k[0] != "runid"}
    assert ours_covered == set(expected)


def test_expected_counts_are_substantial(shared_data: Path):
    """Guard against a parsing slip that would make the comparison above vacuous."""
    data = shared_data / "trec_eval"
    sizes = {c.expected: len(parse_expected(data / c.expected)) for c in CASES}
    assert sizes["out.test"] == 4 + 4 + 9  # counts, map/Rprec/bpref/recip_rank, P_5..P_1000
    # per query: 3 counts, map/Rprec/bpref/recip_rank, 9 cutoffs of P/recall/map_cut/ndcg_cut, ndcg,
    # success_1/5/10; 3 queries + `all` (which adds num_q)
    assert sizes["out.test.aq"] == 4 * (3 + 4 + 9 * 4 + 1 + 3) + 1
    assert sizes["out.test.aqc"] == sizes["out.test.aq"]  # topic 302 printed with zeros under -c
    assert sizes["out.test.meas_params"] == 4 * (3 + 2 + 3 + 3)


def test_topic_missing_from_run_scores_zero_with_c(shared_data: Path):
    data = shared_data / "trec_eval"
    expected = parse_expected(data / "out.test.aqc")
    assert expected[("map", "302")] == "0.0000" and expected[("num_rel", "302")] == "77"
    ours = _ours(CASES[6], data, ["map", "num_rel", "num_q"])
    assert ours[("map", "302")] == "0.0000"
    assert ours[("num_rel", "302")] == "77"
    assert ours[("num_q", "all")] == "3"


def test_results_trunc_has_extra_fields_and_no_topic_302(shared_data: Path):
    run = load_run(shared_data / "trec_eval" / "results.trunc")
    assert run.queries == ["301", "303"]
    assert len(run) == 584
    assert run.name == "results"


def test_cli_trec_format_line_for_line(shared_data: Path):
    """``rankwise eval --format trec -q`` prints trec_eval's lines for the measures asked."""
    data = shared_data / "trec_eval"
    expected_lines = [
        line for line in (data / "out.test.aq").read_text().splitlines()
        if line.split("\t")[0].rstrip() in ("P_5", "P_10", "map", "ndcg_cut_10", "recip_rank", "bpref",
                                             "Rprec", "num_ret", "num_rel_ret")
    ]
    # trec_eval prints the per-query blocks in query order, then the `all` block; our order follows
    # -m
    args = ["eval", str(data / "qrels.test"), str(data / "results.test"), "--format", "trec", "-q",
            "--missing", "skip", "-m", "num_ret,num_rel_ret,map,Rprec,bpref,recip_rank,P_5,P_10,ndcg_cut_10"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not any(line.startswith("runid") for line in lines)  # not asked: trec_eval prints none either
    assert sorted(lines) == sorted(expected_lines)
    # per query: same order of measures inside a block, blocks in query order, `all` last
    assert [line.split("\t")[1] for line in lines] == ["301"] * 9 + ["302"] * 9 + ["303"] * 9 + ["all"] * 9


def test_cli_trec_format_with_depth_and_c(shared_data: Path, tmp_path: Path):
    """-c and -M100 through the library, trec_eval's `all` block through the CLI with a written run.
    """
    from rankwise.data import write_trec_run

    data = shared_data / "trec_eval"
    cut = tmp_path / "trunc100.trec"
    write_trec_run(load_run(data / "results.trunc").truncate(100), cut)
    expected = parse_expected(data / "out.test.aqcM")
    result = CliRunner().invoke(main, ["eval", str(data / "qrels.test"), str(cut), "--format", "trec",
                                       "-m", "map,P_5,P_100,ndcg,bpref,num_ret,recall_100"])
    assert result.exit_code == 0, result.output
    got = {}
    for line in result.output.splitlines():
        m, q, v = line.split("\t")
        got[(m.rstrip(), q)] = v
    for name in ("map", "P_5", "P_100", "ndcg", "bpref", "num_ret", "recall_100"):
        assert got[(name, "all")] == expected[(name, "all")], name


@pytest.mark.parametrize("stream", [False, True])
def test_cli_max_docs_prints_out_test_aqcM(shared_data: Path, stream: bool):
    """``rankwise eval -q -M 100 -m all_trec --format trec`` on results.trunc is trec_eval's
    out.test.aqcM (``trec_eval -m all_trec -q -c -M100``), line for line, in memory and streamed."""
    data = shared_data / "trec_eval"
    expected = (data / "out.test.aqcM").read_text().splitlines()
    args = ["eval", str(data / "qrels.test"), str(data / "results.trunc"), "-q", "-M", "100", "-m", "all_trec",
            "--format", "trec", *(["--stream", "--block-rows", "50"] if stream else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert len(expected) == 387 and result.stdout.splitlines() == expected
    bad = CliRunner().invoke(main, [*args[:5], "-M", "0"])
    assert bad.exit_code == 2 and "-M" in bad.output


# trec_eval's other judgement formats (-R) and z-scores (-Z): expected file, its line count,
# rankwise eval's arguments
OTHER_FORMATS = [
    ("out.test.prefs", 352, ["-R", "prefs", "prefs.test", "prefs.results.test", "-m", "all_prefs"]),
    ("out.test.prefs", 352, ["-R", "prefs", "prefs.comment.test", "prefs.results.test", "-m", "all_prefs"]),
    ("out.test.qrels_prefs", 58, ["-R", "qrels_prefs", "qrels.test", "results.test", "-m", "all_prefs"]),
    ("out.test.qrels_jg", 82, ["-R", "qrels_jg", "qrels.123", "results.test", "-m", "qrels_jg"]),
    ("out.test.qrels_jg", 82, ["-R", "qrels_jg", "qrels.comments.123", "results.test"]),  # qrels_jg: the default
    # trec_eval without -c: num_rel's `all` is the sum of its z-scores (with -c, the count of
    # judgements)
    ("out.test.aqZ", 387, ["-Z", "zscores_file", "qrels.test", "results.test", "-m", "all_trec", "--missing", "skip"]),
]


@pytest.mark.parametrize("expected,n_lines,args", OTHER_FORMATS, ids=lambda v: v if isinstance(v, str) else None)
def test_other_formats_and_zscores_line_for_line(shared_data: Path, expected: str, n_lines: int, args: list[str]):
    data = shared_data / "trec_eval"
    files = {"prefs.test", "prefs.comment.test", "prefs.results.test", "qrels.test", "results.test", "qrels.123",
             "qrels.comments.123", "zscores_file"}
    argv = ["eval", *(str(data / a) if a in files else a for a in args), "-q", "--format", "trec"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output

    def lines(text: str) -> list[str]:
        return [line.rsplit("\t", 1)[0] if line.startswith("runid") else line for line in text.splitlines()]

    want, got = lines((data / expected).read_text()), lines(result.output)
    assert len(want) == n_lines  # the comparison below is not vacuous
    diffs = [(i + 1, a, b) for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b]
    assert not diffs and len(got) == len(want), f"{len(diffs)} lines differ, first: {diffs[:5]}"
