"""The test set's own fields survive into records and exports, and eval-rag / compare-rag slice by
them (--by)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from _extras import need
from rankwise.analysis.compare import compare_records
from rankwise.analysis.significance import bootstrap_ci
from rankwise.analysis.slices import NO_VALUE, case_labels, slice_comparison, slice_result
from rankwise.cli import main
from rankwise.data.questions import records_queries
from rankwise.data.records import load_records, records_from_testset, testset_from_records, write_records
from rankwise.data.testset import case_to_dict, load_testset, write_testset
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.report.html import render_html_report

# The user's own fields, of every JSON kind: text, number, boolean, list, object, null.
OWN = [
    {"style": "plain", "difficulty": 1, "subqueries": ["a"], "reviewed": True,
     "provenance": {"model": "m", "style": "plain"}, "note": None},
    {"style": "paraphrased", "difficulty": 3, "subqueries": ["a", "b"], "reviewed": False,
     "provenance": {"model": "m", "style": "paraphrased"}, "note": "hard"},
    {"style": "paraphrased", "difficulty": 2, "subqueries": [], "reviewed": True,
     "provenance": {"model": "m", "style": "paraphrased"}, "note": "x"},
]


def _case(i: int, hit: bool, **own) -> dict:
    """Case ``q{i}``: its reference document ``d{i}`` at rank 1 when ``hit``, else nowhere in the
    list."""
    return {"id": f"q{i}", "user_input": f"question {i}?",
            "retrieved_context_ids": [f"d{i}", "x"] if hit else ["x", "y"], "reference_context_ids": [f"d{i}"],
            **own}


def _planted(n: int = 12) -> list[dict]:
    """Plain questions all found at rank 1, paraphrased ones all missed; two cases carry no style.
    """
    cases = []
    for i in range(n):
        style = "paraphrased" if i % 3 == 1 else "plain"
        cases.append(_case(i, hit=style == "plain", style=style))
    cases += [_case(n, hit=True), _case(n + 1, hit=False)]
    return cases


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _run(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


# ------------------------------------------------------------------------------------- fields kept
def test_own_fields_survive_testset_records_and_back(tmp_path):
    rows = [_case(i, hit=i != 1, **own) for i, own in enumerate(OWN)]
    ts = load_testset(_jsonl(tmp_path / "ts.jsonl", rows))
    assert [c.fields for c in ts] == OWN
    # into records, through the records file, and back to a test set
    records = records_from_testset(ts)
    assert [r.fields for r in records] == OWN
    path = write_records(records, tmp_path / "records.jsonl")
    line = json.loads(path.read_text().splitlines()[1])
    assert line["fields"] == OWN[1] and "style" not in line  # under their own key: no clash with the record's
    assert [r.fields for r in load_records(path)] == OWN
    back = testset_from_records(load_records(path))
    assert [c.fields for c in back] == OWN
    assert {k: case_to_dict(back[1])[k] for k in OWN[1]} == OWN[1]  # written back as the user wrote them
    # a test set written and read again
    again = load_testset(write_testset(back, tmp_path / "again.jsonl"))
    assert [c.fields for c in again] == OWN


def test_own_fields_from_csv_and_parquet_equal_the_jsonl_ones(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [_case(i, hit=True, style=own["style"], subqueries=own["subqueries"], difficulty=own["difficulty"])
            for i, own in enumerate(OWN)]
    want = [{"style": o["style"], "subqueries": o["subqueries"], "difficulty": o["difficulty"]} for o in OWN]
    with open(tmp_path / "ts.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()})
    csv_fields = [c.fields for c in load_testset(tmp_path / "ts.csv")]
    # a CSV cell is text: a list comes back as the list, a number as its text
    assert csv_fields == [{**w_, "difficulty": str(w_["difficulty"])} for w_ in want]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ts.parquet")
    assert [c.fields for c in load_testset(tmp_path / "ts.parquet")] == want
    # and the records eval-rag writes from the Parquet set hold them
    out = _run(["eval-rag", str(tmp_path / "ts.parquet"), "-r", "ids", "-m", "mrr", "--records",
                str(tmp_path / "rec.jsonl"), "--quiet"])
    assert out.exit_code == 0, out.output
    assert [r.fields for r in load_records(tmp_path / "rec.jsonl")] == want


def test_dataframe_values_become_json_values():
    pd = need("pandas")
    frame = pd.DataFrame([_case(0, True, style="plain", rank=3), _case(1, True, style=None, rank=None)])
    fields = [c.fields for c in load_testset(frame)]
    assert fields == [{"style": "plain", "rank": 3.0}, {"style": None, "rank": None}]
    assert type(fields[0]["rank"]) is float  # not a numpy float: the records are JSON


def test_question_files_keep_their_fields_into_retrieval_records(tmp_path):
    path = _jsonl(tmp_path / "questions.jsonl", [{"id": "q1", "question": "What?", "kind": "keyword"},
                                                  {"id": "q2", "question": "Why?", "kind": "paraphrase"}])
    assert [r.fields for r in records_queries(path)] == [{"kind": "keyword"}, {"kind": "paraphrase"}]


def test_deepeval_export_carries_every_own_field(tmp_path):
    from rankwise.testsets.importers import export_testset

    rows = [{"id": "q1", "question": "What?", "reference_contexts": [{"text": "t", "doc_id": "d", "start": 0,
                                                                     "end": 1}], "style": "plain",
             "subqueries": ["a", "b"], "tags": {"team": "x"}}]
    export_testset(_jsonl(tmp_path / "ts.jsonl", rows), to="deepeval", out=tmp_path / "goldens.json")
    meta = json.loads((tmp_path / "goldens.json").read_text())[0]["additional_metadata"]
    assert {k: meta[k] for k in ("style", "subqueries", "tags")} == {"style": "plain", "subqueries": ["a", "b"],
                                                                     "tags": {"team": "x"}}


# ------------------------------------------------------------------------------------- eval-rag
# --by
def test_planted_effect_eval_rag_slices(tmp_path):
    """Paraphrased questions all miss, plain ones all hit: the slices show exactly that, with
    intervals."""
    path = _jsonl(tmp_path / "ts.jsonl", _planted())
    out = _run(["eval-rag", path, "-r", "ids", "-m", "hit_rate@1,mrr", "--by", "style", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    sl = data["summary"]["slices"]
    assert sl["by"] == "style" and sl["kind"] == "value"
    assert [s["name"] for s in sl["slices"]] == ["paraphrased", "plain", NO_VALUE]
    by = {s["name"]: s for s in sl["slices"]}
    assert by["paraphrased"]["cases"] == 4 and by["plain"]["cases"] == 8 and by[NO_VALUE]["cases"] == 2
    for metric in ("hit_rate@1", "mrr"):
        assert by["paraphrased"]["means"][metric] == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": 4}
        assert by["plain"]["means"][metric] == {"mean": 1.0, "ci_low": 1.0, "ci_high": 1.0, "n": 8}
        # the case with no style that hit and the one that missed: the slice's interval is the
        # bootstrap's
        lo, hi = bootstrap_ci([1.0, 0.0], seed=42)
        assert by[NO_VALUE]["means"][metric] == {"mean": 0.5, "ci_low": lo, "ci_high": hi, "n": 2}
    # the slices hold the cases of the means: weighted, they give the overall mean
    assert sum(s["cases"] * s["means"]["mrr"]["mean"] for s in sl["slices"]) / 14 == pytest.approx(data["mean"]["mrr"])


def test_eval_rag_slice_table_and_csv(tmp_path):
    path = _jsonl(tmp_path / "ts.jsonl", _planted())
    out = _run(["eval-rag", path, "-r", "ids", "-m", "hit_rate@1", "--by", "style"])
    assert out.exit_code == 0, out.output
    table = out.output[out.output.index("by style"):]
    rows = {line.split()[-5]: line.split()[-4:] for line in table.splitlines()
            if line.split()[-5:][:1] in (["paraphrased"], ["plain"], [NO_VALUE])}
    assert rows == {"paraphrased": ["4", "0.0000", "[0.0000,", "0.0000]"],
                    "plain": ["8", "1.0000", "[1.0000,", "1.0000]"], NO_VALUE: ["2", "0.5000", "[0.0000,", "1.0000]"]}
    assert "14 cases in 3 slices by style" in out.output
    out = _run(["eval-rag", path, "-r", "ids", "-m", "hit_rate@1", "--by", "style", "--format", "csv"])
    block = out.output.split("\n\n")[1].splitlines()
    assert block[0].startswith("by,slice,cases,metric,system,n,mean,ci_low,ci_high")
    assert block[1] == "style,paraphrased,4,hit_rate@1,run,4,0.0,0.0,0.0,,,"


def test_mixed_slice_interval_is_the_projects_bootstrap():
    cases = [_case(i, hit=i % 4 != 0, style="plain") for i in range(10)] + [_case(10, hit=False, style="other")]
    result = evaluate_rag(cases, "ids", metrics=["hit_rate@1"])
    s = slice_result(result, "style", resamples=2_000, seed=7)
    values = [result.per_query[f"q{i}"]["hit_rate@1"] for i in range(10)]
    stat = s.means["run"]["plain"]["hit_rate@1"]
    assert (stat.mean, stat.n) == (0.7, 10)
    assert (stat.ci_low, stat.ci_high) == bootstrap_ci(values, resamples=2_000, seed=7)
    assert result.summary["slices"]["slices"][0]["name"] == "other"


def test_left_out_cases_are_not_in_any_slice():
    cases = _planted(6) + [{"id": "nogt", "user_input": "?", "retrieved_context_ids": ["x"], "style": "plain"}]
    result = evaluate_rag(cases, "ids", metrics=["mrr"], unscorable="skip")
    s = slice_result(result, "style")
    assert "nogt" not in s.cases["plain"] and sum(len(c) for c in s.cases.values()) == len(result.per_query)


# ------------------------------------------------------------------------------------- kinds of
# field
def test_list_fields_slice_by_length_and_dotted_keys_reach_into_objects():
    rows = [_case(i, hit=i != 1, **own) for i, own in enumerate(OWN)] + [_case(3, hit=True)]
    records = evaluate_rag(rows, "ids", metrics=["mrr"]).records
    assert case_labels(records, "subqueries") == ({"q0": "1", "q1": "2", "q2": "0", "q3": NO_VALUE}, "length")
    assert case_labels(records, "provenance.style")[0] == {"q0": "plain", "q1": "paraphrased",
                                                          "q2": "paraphrased", "q3": NO_VALUE}
    assert case_labels(records, "reviewed")[0] == {"q0": "true", "q1": "false", "q2": "true", "q3": NO_VALUE}
    assert case_labels(records, "note")[0]["q0"] == NO_VALUE  # null is no value
    s = slice_result(evaluate_rag(rows, "ids", metrics=["mrr"]), "difficulty")
    assert s.names == ["1", "2", "3", NO_VALUE]  # numbers in numeric order
    s = slice_result(evaluate_rag(rows, "ids", metrics=["mrr"]), "subqueries")
    assert s.title == "subqueries (length)" and s.to_json()["kind"] == "length"
    assert s.means["run"]["2"]["mrr"].mean == 0.0 and s.means["run"]["1"]["mrr"].mean == 1.0


@pytest.mark.parametrize("rows, by, words", [
    ([_case(0, True, style="a")], "stlye", ["no case has a field 'stlye'", "style"]),
    ([_case(0, True, tags={"team": "x"})], "tags", ["field 'tags' holds an object in case 'q0'", "tags.team"]),
    ([_case(0, True, sub=["a"]), _case(1, True, sub="a")], "sub",
     ["field 'sub' is a list in case 'q0' but a str in case 'q1'"]),
])
def test_fields_that_cannot_slice_are_one_line_exit_2(tmp_path, rows, by, words):
    out = _run(["eval-rag", _jsonl(tmp_path / "ts.jsonl", rows), "-r", "ids", "-m", "mrr", "--by", by])
    assert out.exit_code == 2
    lines = [x for x in out.output.strip().splitlines() if not x.startswith("rankwise: warning:")]
    assert len(lines) == 1 and lines[0].startswith("rankwise: error: --by:") and "Traceback" not in out.output
    assert all(w in lines[0] for w in words), lines[0]


def test_by_is_refused_with_ppi(tmp_path):
    out = _run(["eval-rag", _jsonl(tmp_path / "ts.jsonl", _planted()), "-r", "ids", "--by", "style", "--ppi"])
    assert out.exit_code == 2 and "--by is not available with --ppi" in out.output


# ------------------------------------------------------------------------------------- compare-rag
# --by
def _systems(tmp_path) -> tuple[str, str]:
    """Baseline misses every paraphrased question; the candidate finds them all and is the same
    elsewhere."""
    base = _planted()
    cand = [dict(c) for c in base]
    for c in cand:
        if c.get("style") == "paraphrased":
            c["retrieved_context_ids"] = [c["reference_context_ids"][0], "x"]
    return _jsonl(tmp_path / "base.jsonl", base), _jsonl(tmp_path / "cand.jsonl", cand)


def test_planted_effect_compare_rag_slices(tmp_path):
    base, cand = _systems(tmp_path)
    out = _run(["compare-rag", base, cand, "--source", "ids", "-m", "hit_rate@1", "--by", "style",
                "--format", "json", "--permutations", "200"])
    assert out.exit_code == 0, out.output
    sl = json.loads(out.output)["summary"]["slices"]
    assert sl["systems"] == ["base", "cand"] and sl["baseline"] == "base"
    by = {s["name"]: s for s in sl["slices"]}
    assert by["paraphrased"]["means"]["base"]["hit_rate@1"]["mean"] == 0.0
    assert by["paraphrased"]["means"]["cand"]["hit_rate@1"]["mean"] == 1.0
    assert by["paraphrased"]["deltas"]["cand"]["hit_rate@1"] == {"mean": 1.0, "ci_low": 1.0, "ci_high": 1.0, "n": 4}
    assert by["plain"]["deltas"]["cand"]["hit_rate@1"] == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": 8}
    assert by[NO_VALUE]["deltas"]["cand"]["hit_rate@1"]["mean"] == 0.0
    assert "base" not in by["plain"]["deltas"]


def test_compare_rag_slices_in_table_markdown_csv_and_html(tmp_path):
    base, cand = _systems(tmp_path)
    html = tmp_path / "report.html"
    out = _run(["compare-rag", base, cand, "--source", "ids", "-m", "hit_rate@1", "--by", "style",
                "--permutations", "200", "--html", str(html)])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if "paraphrased" in x)
    assert line.split()[-7:] == ["paraphrased", "4", "0.0000", "1.0000", "+1.0000", "[+1.0000,", "+1.0000]"]
    text = html.read_text(encoding="utf-8")
    section = text[text.index('<section class="card" id="slices">'):]
    section = section[:section.index("</section>")]
    assert '<a href="#slices">By style</a>' in text
    assert ('<tr data-slice="paraphrased"><th class="row">paraphrased</th><td>4</td>'
            '<td data-system="base" data-mean="0.0">0.0000</td><td data-system="cand" data-mean="1.0">1.0000</td>'
            '<td data-delta="1.0">+1.0000</td><td>[+1.0000, +1.0000]</td></tr>') in section
    assert '<tr data-slice="(none)">' in section
    out = _run(["compare-rag", base, cand, "--source", "ids", "-m", "hit_rate@1", "--by", "style",
                "--permutations", "200", "--format", "markdown"])
    assert "| hit_rate@1 | paraphrased | 4 | 0.0000 | 1.0000 | +1.0000 | [+1.0000, +1.0000] |" in out.output
    out = _run(["compare-rag", base, cand, "--source", "ids", "-m", "hit_rate@1", "--by", "style",
                "--permutations", "200", "--format", "csv"])
    assert "style,paraphrased,4,hit_rate@1,cand,4,1.0,1.0,1.0,1.0,1.0,1.0" in out.output.splitlines()


def test_systems_that_label_a_case_differently_are_refused():
    a = [_case(0, True, style="plain"), _case(1, True, style="plain")]
    b = [_case(0, True, style="plain"), _case(1, True, style="paraphrased")]
    sets = {"a": a, "b": b}
    cmp = compare_records(sets, "ids", "mrr", permutations=10)
    with pytest.raises(InputError, match="case 'q1' has style 'plain' in system 'a' and 'paraphrased' in system 'b'"):
        slice_comparison(cmp, "style", records=sets)
    # a label computed elsewhere (one per case id) slices the same comparison, in the order asked
    s = slice_comparison(cmp, "class", labels={"q0": "hit", "q1": "miss"}, order=["miss", "hit"])
    assert s.names == ["miss", "hit"] and cmp.summary["slices"]["by"] == "class"


@pytest.mark.browser
def test_slice_table_in_chromium(tmp_path):
    from _chromium import Chromium, find_chromium

    if find_chromium() is None:
        pytest.skip("needs chromium")
    base, cand = _systems(tmp_path)
    sets = {"base": load_records_of(base), "cand": load_records_of(cand)}
    cmp = compare_records(sets, "ids", ["hit_rate@1", "mrr"], permutations=100)
    s = slice_comparison(cmp, "style", records=sets)
    path = tmp_path / "report.html"
    path.write_text(render_html_report(cmp, records=sets, slices=s), encoding="utf-8")
    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.console_errors == []
        shown = page.evaluate("Array.from(document.querySelectorAll('#slices .metric-panel'))"
                              ".filter(e => getComputedStyle(e).display !== 'none').map(e => e.dataset.metric)")
        assert shown == ["hit_rate@1"]  # the metric picked in the top bar
        cells = page.evaluate("Array.from(document.querySelectorAll('#slices .metric-panel[data-metric=\"hit_rate@1\"] "
                              "tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
        assert cells[0] == ["paraphrased", "4", "0.0000", "1.0000", "+1.0000", "[+1.0000, +1.0000]"]
        page.screenshot(tmp_path / "slices.png")


def load_records_of(path: str) -> list:
    return evaluate_rag(path, "ids", metrics=["mrr"]).records


def test_slices_of_arrays_need_no_records():
    from rankwise.analysis.slices import slice_values

    s = slice_values({"a": np.array([[0.2], [0.4], [np.nan]])}, ["x", "y", "z"], ["score"], lambda c: "all", by="k")
    assert s.means["a"]["all"]["score"].n == 2 and s.means["a"]["all"]["score"].mean == pytest.approx(0.3)


def test_traces_joined_to_a_test_set_take_its_own_fields(tmp_path):
    from rankwise.traces import import_traces

    span = {"name": "s", "context": {"trace_id": "0x" + "1" * 32, "span_id": "0x" + "a" * 16}, "parent_id": None,
            "start_time": "2026-01-01T00:00:00Z",
            "attributes": {"openinference.span.kind": "RETRIEVER", "input.value": "Where is Paris?",
                           "retrieval.documents.0.document.content": "Paris is in France.",
                           "retrieval.documents.0.document.id": "fr#0"}}
    traces = tmp_path / "spans.json"
    traces.write_text(json.dumps(span), encoding="utf-8")
    testset = _jsonl(tmp_path / "ts.jsonl", [{"id": "q1", "question": "Where is Paris?",
                                              "reference_context_ids": ["fr#0"], "style": "plain"}])
    imp = import_traces(traces, testset=testset)
    assert [c.fields for c in imp.testset] == [{"style": "plain"}]
    assert load_testset(write_testset(imp.testset, tmp_path / "imported.jsonl"))[0].fields == {"style": "plain"}


def test_slice_names_are_escaped_in_the_html():
    cases = [_case(0, True, style="<script>alert(1)</script>"), _case(1, False, style="a&b")]
    sets = {"a": cases, "b": cases}
    cmp = compare_records(sets, "ids", "mrr", permutations=10)
    text = render_html_report(cmp, slices=slice_comparison(cmp, "<by>", labels={"q0": "<script>alert(1)</script>",
                                                                                "q1": "a&b"}))
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'data-slice="a&amp;b"' in text and "By &lt;by&gt;" in text
