"""Cases retrieved several times (agents, multi-hop pipelines): the data model, its readers and
writers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import (
    CallRecord,
    ChunkRecord,
    dump_record,
    load_records,
    records_from_testset,
    write_records,
)
from rankwise.data.testset import (
    Chunk,
    RetrievalCall,
    TestCase,
    case_to_dict,
    load_testset,
    merge_calls,
    write_testset,
)
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.relevance.verdicts import assign_verdicts

CASE = {"id": "q1", "user_input": "Who founded the company that makes the X1?",
        "calls": [{"position": 0, "query": "who makes the X1", "span_id": "s0", "trace_id": "t",
                   "chunks": [{"id": "a", "text": "The X1 is made by Acme.", "score": 0.9},
                              {"id": "b", "text": "The X1 ships in blue.", "score": 0.4}]},
                  {"position": 1, "query": "who founded Acme", "span_id": "s1", "trace_id": "t",
                   "chunks": [{"id": "c", "text": "Acme was founded by Ada Lee.", "score": 0.8},
                              {"id": "a", "text": "The X1 is made by Acme.", "score": 0.7}]}],
        "reference_contexts": [{"text": "The X1 is made by Acme", "hop": 0},
                               {"text": "Acme was founded by Ada Lee", "hop": 1}]}


def _ids(chunks):
    return [c.id for c in chunks]


def test_calls_are_read_and_merged_by_default():
    case = load_testset([CASE])["q1"]
    assert [c.position for c in case.calls] == [0, 1]
    assert [c.query for c in case.calls] == ["who makes the X1", "who founded Acme"]
    assert case.calls[1].span_id == "s1" and case.calls[0].trace_id == "t"
    assert _ids(case.chunks) == ["a", "c", "b"]  # rank 1 of each call, then rank 2; "a" again dropped
    assert [p.hop for p in case.reference_contexts] == [0, 1]


def test_merge_orders_and_dedup_rules():
    calls = load_testset([CASE])["q1"].calls
    assert _ids(merge_calls(calls, "score")) == ["a", "c", "b"]
    assert _ids(merge_calls(calls, "concat")) == ["a", "b", "c"]
    assert _ids(merge_calls(calls, "interleave", "none")) == ["a", "c", "b", "a"]
    spans = [RetrievalCall([Chunk("x", id="1", doc_id="d", start=0, end=10)]),
             RetrievalCall([Chunk("y", id="2", doc_id="d", start=5, end=15), Chunk("z", id="3", doc_id="d",
                                                                                    start=10, end=20)])]
    assert _ids(merge_calls(spans, dedup="id")) == ["1", "2", "3"]
    assert _ids(merge_calls(spans, dedup="span")) == ["1", "3"]  # 2 overlaps 1; 3 touches 1 at 10 only
    with pytest.raises(InputError, match="needs a score on every chunk; 1 of 2"):
        merge_calls([[Chunk("a", score=1.0)], [Chunk("b")]], "score")
    with pytest.raises(InputError, match="merge order must be one of interleave, score, concat"):
        merge_calls(calls, "random")


def test_calls_sorted_by_position_and_positions_default_to_order():
    rows = [{"id": "q", "calls": [{"position": 3, "chunks": ["late"]}, {"position": 1, "chunks": ["early"]}]},
            {"id": "r", "calls": [{"chunks": ["one"]}, {"chunks": ["two"]}]}]
    ts = load_testset(rows)
    assert [c.chunks[0].text for c in ts["q"].calls] == ["early", "late"]
    assert [c.position for c in ts["r"].calls] == [0, 1]


def test_single_list_files_do_not_change(tmp_path):
    """A case without calls writes no calls and no hop: its files stay as they were."""
    recs = records_from_testset([{"id": "q", "retrieved_contexts": ["a b c"], "reference_contexts": ["a b"]}])
    d = recs[0].to_dict()
    assert "calls" not in d and "hop" not in d["reference_contexts"][0]
    assert "calls" not in case_to_dict(load_testset([{"id": "q", "retrieved_contexts": ["x"]}])["q"])


def test_testset_round_trip_is_identical(tmp_path):
    first = write_testset([CASE, {"id": "q2", "retrieved_contexts": ["plain"]}], tmp_path / "a.jsonl")
    second = write_testset(first, tmp_path / "b.jsonl")
    assert first.read_bytes() == second.read_bytes()
    row = json.loads(first.read_text().splitlines()[0])
    assert "retrieved_contexts" not in row and len(row["calls"]) == 2  # the merge is rebuilt on reading
    explicit = dict(CASE, retrieved_contexts=[{"id": "c", "text": "Acme was founded by Ada Lee."}])
    again = load_testset(write_testset([explicit], tmp_path / "c.jsonl"))["q1"]
    assert _ids(again.chunks) == ["c"] and len(again.calls) == 2  # an explicit final context is kept


def test_records_share_verdicts_and_round_trip(tmp_path):
    recs = records_from_testset([CASE])
    assign_verdicts(recs, "containment")
    r = recs[0]
    assert r.verdicts("containment") == [1, 1, 0]  # merged a, c, b
    assert r.call_index() == [[0, 2], [1, 0]]
    shared = [[c.verdicts["containment"].verdict for c in call] for call in r.call_chunks()]
    assert shared == [[1, 0], [1, 1]]  # "a" judged once, seen in both calls
    first = write_records(recs, tmp_path / "r1.jsonl")
    loaded = load_records(first)
    assert loaded[0].calls[1].query == "who founded Acme" and loaded[0].reference_contexts[1].hop == 1
    second = write_records(loaded, tmp_path / "r2.jsonl")
    assert first.read_bytes() == second.read_bytes()
    assert loaded[0].to_case().calls[1].chunks[0].id == "c"


def test_call_record_verdicts_stay_when_the_merged_list_lacks_the_chunk():
    from rankwise.data.records import CaseRecord, Verdict

    r = CaseRecord("q", chunks=[ChunkRecord(rank=1, id="a")],
                   calls=[CallRecord([ChunkRecord(rank=1, id="z", verdicts={"human": Verdict(1)})])])
    assert r.call_index() == [[None]]
    assert r.call_chunks()[0][0].verdicts["human"].verdict == 1
    assert dump_record(r).count('"human"') == 1


BAD_TESTSET = [
    ('"calls": 3', "calls", "expected a list"),
    ('"calls": [3]', "calls[0]", "expected an object"),
    ('"calls": [{"chunks": ["a"], "hops": 1}]', "calls[0]", "unknown key(s) ['hops']"),
    ('"calls": [{"query": "x"}]', "calls[0].chunks", "a call needs chunks"),
    ('"calls": [{"chunks": ["a"], "position": -1}]', "calls[0].position", "integer >= 0"),
    ('"calls": [{"chunks": ["a"], "position": "first"}]', "calls[0].position", "integer >= 0"),
    ('"calls": [{"chunks": ["a"]}, {"chunks": ["b"], "position": 0}]', "calls[1].position", "also calls[0]"),
    ('"calls": [{"chunks": [{"idx": 1}]}]', "calls[0].chunks[0]", "unknown key(s) ['idx']"),
    ('"calls": [{"chunks": ["a"], "query": [1]}]', "calls[0].query", "expected a string"),
    ('"calls": [{"chunks": ["a"], "meta": 2}]', "calls[0].meta", "expected an object"),
    ('"calls": [{"chunks": ["a"]}], "reference_contexts": [{"text": "a", "hop": "one"}]',
     "reference_contexts[0].hop", "hop number"),
]


@pytest.mark.parametrize("fragment, field, problem", BAD_TESTSET)
def test_malformed_calls_name_file_line_and_field(tmp_path, fragment, field, problem):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "ok", "retrieved_contexts": ["x"]}\n{"id": "q", ' + fragment + "}\n")
    with pytest.raises(InputError) as err:
        load_testset(path)
    assert err.value.line == 2 and err.value.field == field and problem in str(err.value), str(err.value)
    result = CliRunner().invoke(main, ["eval-rag", str(path), "-k", "1", "--quiet"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}:2" in result.stderr and field in result.stderr, result.stderr


BAD_RECORDS = [
    ('"calls": {"a": 1}', "calls", "expected a list of calls"),
    ('"calls": [{"chunks": [{"rank": 2, "id": "a"}]}]', "calls[0].chunks[0].rank", "rank order"),
    ('"calls": [{"chunks": []}, {"chunks": [], "position": 0}]', "calls[1].position", "trajectory order"),
    ('"calls": [{"chunks": [], "span": 1}]', "calls[0]", "unknown key(s) ['span']"),
    ('"calls": [{"position": 0}]', "calls[0].chunks", "a call needs chunks"),
    ('"calls": [{"chunks": [{"rank": 1, "verdicts": {"llm": {"verdict": 2}}}]}]',
     "calls[0].chunks[0].verdicts.llm.verdict", "0, 1 or null"),
    ('"reference_contexts": [{"text": "a", "hop": -1}]', "reference_contexts[0].hop", "hop must be >= 0"),
]


@pytest.mark.parametrize("fragment, field, problem", BAD_RECORDS)
def test_malformed_record_calls_name_file_line_and_field(tmp_path, fragment, field, problem):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "ok", "chunks": []}\n{"id": "q", "chunks": [{"rank": 1, "id": "a"}], ' + fragment
                    + "}\n")
    with pytest.raises(InputError) as err:
        load_records(path)
    assert err.value.line == 2 and err.value.field == field and problem in str(err.value), str(err.value)


def test_testcase_defaults_keep_the_single_list_case():
    case = TestCase("q", chunks=[Chunk("a")])
    assert case.calls == [] and case.to_dict()["retrieved_contexts"][0]["text"] == "a"


# ------------------------------------------------------------------------------------ metrics over
# calls

SINGLE = [
    {"id": "s1", "retrieved_contexts": [{"id": "x1", "text": "Boilers need a yearly pressure check by a fitter."},
                                        {"id": "x2", "text": "Garden fences are painted every five years."},
                                        {"id": "x3", "text": "Pressure relief valves open at three bar."}],
     "retrieved_context_ids": ["x1", "x2", "x3"],
     "reference_contexts": ["Boilers need a yearly pressure check by a fitter",
                            "Pressure relief valves open at three bar", "Radiators are bled in autumn each year"],
     "reference_context_ids": ["x1", "x3", "x9"]},
    {"id": "s2", "retrieved_contexts": [{"id": "y1", "text": "Nothing relevant is said in this chunk at all."},
                                        {"id": "y2", "text": "Radiators are bled in autumn each year."}],
     "retrieved_context_ids": ["y1", "y2"],
     "reference_contexts": ["Radiators are bled in autumn each year"], "reference_context_ids": ["y2"]},
]
INNER = ["hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "wcp", "acp", "context_recall",
         "f1_acp"]


@pytest.mark.parametrize("relevance", ["containment", "ids"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_single_list_cases_score_as_their_single_list_counterparts(relevance, k):
    names = [f"{m}@{k}" for m in INNER]
    names += [f"{w}@{k}" for m in INNER for w in (f"per_call(metric={m},call=0)", f"call_mean(metric={m})",
                                                  f"merged(metric={m})")]
    names += [f"evidence_coverage@{k}", f"call_redundancy@{k}", f"calls_to_evidence@{k}"]
    result = evaluate_rag(SINGLE, relevance, metrics=names)
    for case in ("s1", "s2"):
        row = result.per_query[case]
        for m in INNER:
            for wrapped in (f"per_call(metric={m},call=0)", f"call_mean(metric={m})", f"merged(metric={m})"):
                assert row[f"{wrapped}@{k}"] == row[f"{m}@{k}"], (case, wrapped)
        assert row[f"evidence_coverage@{k}"] == row[f"context_recall@{k}"]
        assert row[f"call_redundancy@{k}"] == 0.0
    # s2 finds its one passage at rank 2: complete after one call at k >= 2, never at k = 1
    assert result.per_query["s2"][f"calls_to_evidence@{k}"] == (None if k == 1 else 1.0)


def test_merged_default_is_the_cases_chunks_and_calls_share_verdicts():
    """The default merge is the list every existing metric scores: the same number both ways."""
    result = evaluate_rag([CASE], "containment", metrics=["recall@2", "ndcg@3", "merged(metric=recall)@2",
                                                           "merged(metric=ndcg)@3", "per_call(metric=recall,call=1)@1",
                                                           "per_call(metric=precision,call=2)@1"])
    row = result.per_query["q1"]
    assert row["merged(metric=recall)@2"] == row["recall@2"] == 1.0
    assert row["merged(metric=ndcg)@3"] == row["ndcg@3"]
    assert row["per_call(metric=recall,call=1)@1"] == 0.5  # "c", judged once in the merged list
    assert row["per_call(metric=precision,call=2)@1"] is None  # no third call
    assert result.summary["undefined"] == {"per_call(metric=precision,call=2)@1": 1}
    assert result.mean["per_call(metric=precision,call=2)@1"] is None  # undefined everywhere: no mean, not 0
    assert result.records[0].scores["containment"]["per_call(metric=recall,call=1)@1"] == 0.5


def test_all_hops_covered_is_undefined_without_hops_and_for_ids():
    plain = dict(CASE, reference_contexts=[{"text": p["text"]} for p in CASE["reference_contexts"]])
    only_first = dict(CASE, id="q3", calls=CASE["calls"][:1])
    result = evaluate_rag([CASE, dict(plain, id="q2"), only_first], "containment", metrics=["all_hops_covered@1"])
    assert result.per_query["q1"]["all_hops_covered@1"] == 1.0  # call tops: a (hop 0), c (hop 1)
    assert result.per_query["q3"]["all_hops_covered@1"] == 0.0  # the first call alone never reaches hop 1
    assert result.per_query["q2"]["all_hops_covered@1"] is None
    assert result.mean["all_hops_covered@1"] == 0.5
    assert "carry no hop" in result.summary["undefined_why"]["all_hops_covered@1"]
    ids = evaluate_rag([dict(CASE, reference_context_ids=["a", "c"])], "ids", metrics=["all_hops_covered@1",
                                                                                       "evidence_coverage@1"])
    assert ids.per_query["q1"] == {"all_hops_covered@1": None, "evidence_coverage@1": 1.0}


def test_wrong_metric_names_are_one_line_errors(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(CASE) + "\n")
    for metric, problem in (("per_call@2", "per_call needs metric=..., e.g. per_call(metric=recall,call=0)@5"),
                            ("per_call(metric=recall)@2", "needs call=..."),
                            ("merged(metric=nope)@2", "metric must be one of hit_rate"),
                            ("merged(metric=recall,order=rank)@2", "order must be one of interleave, score, concat"),
                            ("call_mean(metric=recall,call=1)@2", "has no parameter 'call'")):
        result = CliRunner().invoke(main, ["eval-rag", str(path), "-m", metric, "--quiet"])
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert problem in result.stderr, result.stderr
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("q 0 a 1\n")
    run.write_text("q Q0 a 1 1.0 s\n")
    result = CliRunner().invoke(main, ["eval", str(qrels), str(run), "-m", "evidence_coverage@2"])
    assert result.exit_code == 2 and "needs per-case records" in result.stderr


def test_merge_by_score_without_scores_is_one_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "q", "calls": [{"chunks": ["a chunk of text"]}],
                                "reference_contexts": ["a chunk of text"]}) + "\n")
    result = CliRunner().invoke(main, ["eval-rag", str(path), "-m", "merged(metric=recall,order=score)@1", "--quiet"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "merged(metric=recall,order=score)@1: case 'q': merge by score needs a score on every chunk" in result.stderr


def test_metrics_card_shows_the_wrapper(tmp_path):
    result = CliRunner().invoke(main, ["metrics", "per_call"])
    assert result.exit_code == 0
    assert "call=0" in result.stdout and "undefined when" in result.stdout and "kibana" in result.stdout


def test_default_metrics_add_the_call_metrics_only_when_cases_have_calls():
    with_calls = evaluate_rag([CASE], "containment", k=[1, 2])
    names = [m.name for m in with_calls.measures]
    assert names[-5:] == ["call_mean(metric=recall)@2", "evidence_coverage@2", "all_hops_covered@2",
                          "calls_to_evidence@2", "call_redundancy@2"]
    plain = evaluate_rag(SINGLE, "containment", k=[1, 2])
    assert [m.name for m in plain.measures] == [m.name for m in with_calls.measures][:-5]


def test_the_llm_judge_judges_a_chunk_seen_in_two_calls_once(srv, tmp_path):
    """Against the loopback judge: one request per distinct chunk; both calls show the shared
    verdict."""
    from rankwise.relevance.llm_judge import judge_records

    recs = records_from_testset([dict(CASE, reference="Ada Lee founded Acme.")])
    summary = judge_records(recs, model="judge-test", base_url=srv.base_url, api_key="unused",
                            cache=tmp_path / "c.sqlite", mode="reference")
    assert srv.stats()["requests"] == 3  # a, c, b: "a" is in both calls, judged once
    assert summary is not None
    merged = {c.id: c.verdicts["llm"].verdict for c in recs[0].chunks}
    calls = [[(c.id, c.verdicts["llm"].verdict) for c in call] for call in recs[0].call_chunks()]
    assert calls == [[("a", merged["a"]), ("b", merged["b"])], [("c", merged["c"]), ("a", merged["a"])]]
    assert merged["c"] == 1  # "Acme was founded by Ada Lee." shares the reference's keywords
    result = evaluate_rag(recs, "llm", metrics=["per_call(metric=hit_rate,call=1)@1", "call_redundancy@2"])
    assert result.per_query["q1"] == {"per_call(metric=hit_rate,call=1)@1": 1.0, "call_redundancy@2": 0.25}
    path = write_records(result.records, tmp_path / "judged.jsonl")
    again = evaluate_rag(str(path), "llm", metrics=["per_call(metric=hit_rate,call=1)@1", "call_redundancy@2"])
    assert again.per_query["q1"] == result.per_query["q1"]  # the same number from the records file


def test_call_chunks_outside_an_explicit_list_are_judged_too():
    """retrieved_contexts beside calls: the calls' other chunks still get text and id verdicts of
    their own."""
    final = dict(CASE, retrieved_contexts=[{"id": "a", "text": "The X1 is made by Acme."}],
                 reference_context_ids=["a", "c"])
    for relevance in ("containment", "ids"):
        result = evaluate_rag([final], relevance, metrics=["recall@1", "per_call(metric=recall,call=1)@1",
                                                           "evidence_coverage@2"])
        assert result.per_query["q1"] == {"recall@1": 0.5, "per_call(metric=recall,call=1)@1": 0.5,
                                          "evidence_coverage@2": 1.0}, relevance
    recs = records_from_testset([final])
    assign_verdicts(recs, "containment")
    c = recs[0].call_chunks()[1][0]
    assert c.id == "c" and c.verdicts["containment"].verdict == 1 and c.verdicts["containment"].meta["passages"] == [1]


def test_call_chunks_without_a_verdict_are_warned_about(tmp_path):
    from rankwise.data.records import CaseRecord, Verdict

    recs = [CaseRecord("q", chunks=[ChunkRecord(rank=1, id="a", verdicts={"llm": Verdict(1)})],
                       calls=[CallRecord([ChunkRecord(rank=1, id="a")]), CallRecord([ChunkRecord(rank=1, id="z")])])]
    with pytest.warns(Warning, match="1 chunk of the cases' calls \\(in 1 case\\) has no 'llm' verdict"):
        result = evaluate_rag(recs, "llm", metrics=["call_mean(metric=hit_rate)@1"])
    assert result.per_query["q"]["call_mean(metric=hit_rate)@1"] == 0.5


def test_calls_in_a_csv_test_set(tmp_path):
    import csv

    path = tmp_path / "t.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "user_input", "calls", "reference_contexts"])
        w.writerow(["q1", CASE["user_input"], json.dumps(CASE["calls"]), json.dumps(CASE["reference_contexts"])])
        w.writerow(["q2", "bad", "[{\"chunks\": 5}]", "[]"])
    with pytest.raises(InputError) as err:
        load_testset(path)
    assert err.value.line == 3 and err.value.field == "calls[0].chunks"
    path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    case = load_testset(path)["q1"]
    assert _ids(case.chunks) == ["a", "c", "b"] and case.reference_contexts[1].hop == 1


def test_compare_and_its_html_report_show_the_same_call_metrics(tmp_path):
    """compare-rag (API, and its HTML report) scores two agents' records with the numbers eval-rag
    gives."""
    from rankwise.analysis.compare import compare_records
    from rankwise.report.html import write_html_report

    a = dict(CASE, calls=[CASE["calls"][0]])  # an agent that stops after its first call: hop 1 missing
    names = ["evidence_coverage@2", "all_hops_covered@2", "calls_to_evidence@2", "call_redundancy@2"]
    records = {}
    for name, case in (("one-call", a), ("two-calls", CASE)):
        records[name] = evaluate_rag([case], "containment", metrics=names).records
    result = compare_records(records, "containment", names, permutations=200, resamples=200)
    one = result.means["one-call"]
    assert (one["evidence_coverage@2"], one["all_hops_covered@2"], one["call_redundancy@2"]) == (0.5, 0.0, 0.0)
    assert one["calls_to_evidence@2"] != one["calls_to_evidence@2"]  # NaN in the API, null in its JSON: no mean
    assert result.means["two-calls"] == evaluate_rag([CASE], "containment", metrics=names).mean
    html = write_html_report(tmp_path / "r.html", result).read_text(encoding="utf-8")
    assert "all_hops_covered@2" in html and "calls_to_evidence@2" in html


def test_compare_says_why_multi_call_values_are_undefined():
    """compare-rag leaves undefined values (calls_to_evidence when the evidence is never complete)
    out of the paired comparison; its summary and caption now say why, as eval-rag does (before: a
    bare count)."""
    from rankwise.analysis.compare import compare_records
    from rankwise.report.labels import comparison_caption

    a = dict(CASE, calls=[CASE["calls"][0]])
    names = ["evidence_coverage@2", "calls_to_evidence@2"]
    records = {name: evaluate_rag([case], "containment", metrics=names).records
               for name, case in (("one-call", a), ("two-calls", CASE))}
    result = compare_records(records, "containment", names, permutations=200, resamples=200)
    why = evaluate_rag([a], "containment", metrics=names).summary["undefined_why"]["calls_to_evidence@2"]
    assert why == "the evidence was never complete (or the case has no ground truth)"
    assert result.summary["undefined"] == {"one-call": {"calls_to_evidence@2": 1}}
    assert result.summary["undefined_why"] == {"calls_to_evidence@2": why}
    assert f"one-call: undefined values left out of calls_to_evidence@2 (1: {why})" in comparison_caption(result)


@pytest.mark.parametrize("inner", ["wcp(decay=linear)", "wcp(decay=rbp,p=0.5)", "acp(ragas_compat=true)",
                                   "wcp(decay=linear,ideal=attainable)"])
def test_wrapped_metrics_take_the_inner_metrics_own_parameters(inner, tmp_path):
    """merged/per_call/call_mean wrap a metric with its own parameters (before: refused as an
    unknown metric); on single-list cases each equals the inner metric itself, through the API and
    eval-rag alike."""
    from click.testing import CliRunner

    from rankwise.cli import main

    names = [f"merged(metric={inner})@3", f"per_call(metric={inner},call=0)@3", f"call_mean(metric={inner})@3"]
    result = evaluate_rag(SINGLE, "containment", metrics=[*names, f"{inner}@3"])
    for case in ("s1", "s2"):
        row = result.per_query[case]
        assert all(row[n] == row[f"{inner}@3"] for n in names), (case, row)
    path = tmp_path / "single.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in SINGLE))
    out = CliRunner().invoke(main, ["eval-rag", str(path), "-m", ",".join(names), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["mean"] == {n: result.mean[n] for n in names}


def test_a_wrapped_metrics_bad_parameter_is_refused_when_named():
    with pytest.raises(InputError, match="decay must be one of"):
        evaluate_rag(SINGLE, "containment", metrics=["merged(metric=wcp(decay=nope))@3"])


@pytest.mark.parametrize("name", ["merged(metric=wcp(decay=linear)@3", "merged(metric=wcp(decay=linear)))@3",
                                  "wcp(decay=linear@3"])
def test_unbalanced_parentheses_are_refused_not_read_as_defaults(name):
    """A missing ")" in a nested name read as the inner metric with its defaults (wcp, log decay)
    and scored it silently; it is one line naming the name now."""
    with pytest.raises(InputError, match="unbalanced parentheses"):
        evaluate_rag(SINGLE, "containment", metrics=[name])
