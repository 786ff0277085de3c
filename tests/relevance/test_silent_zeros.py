"""No silent zeros (issue 32, item 3): a verdict source that can match nothing says so once, with
the likely cause and the fix, under the eval-rag table and in its JSON summary (and once per system
in compare-rag, gate and sweep); when every verdict of the source is missing, the command stops with
that sentence (exit 2) instead of printing means of 0. Each case is made here from small files, the
way a user meets it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag

RULES = ("Setup. Each player takes five tokens and one board.\n\n"
         "Scoring. A tower scores three points when it stands at the end of the game. Towers that fell score nothing.\n")
FAQ = "Can I move twice? No: one move per turn, unless a card says otherwise.\n"

ID_HINT = ("no retrieved chunk id equals a reference id in any case, but chunk doc_ids do (chunk ids such as "
           "'faq.md#0', 'rules.md#0'; reference ids such as 'faq.md', 'rules.md'): the reference ids name documents; "
           "pass --id-field doc_id")
EXT_HINT = ("no retrieved chunk's doc_id equals a reference's in any case, but they differ only by an extension "
            "(chunks 'faq.md', references 'faq'): a corpus read from a folder (`rankwise run --corpus folder/`, "
            "`sweep --corpus folder/`) names each document by its path in the folder, extension included; write the "
            "test set's doc_id as that name ('faq.md'), or give the corpus as a JSONL with your own ids")
SPAN_HINT = ("no retrieved chunk (of 4) carries (doc_id, start, end), so no 'span' verdict could be given: these "
             "cases carry no character offsets: pass --corpus to import-traces (it finds each chunk in its document), "
             "or use -r containment")


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _invoke(*args: str):
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def _ids_testset(tmp_path: Path) -> Path:
    """(a) Reference ids that are document ids; chunks that carry chunk ids (and their documents).
    """
    rows = [{"id": "q1", "question": "How many points does a tower score?",
             "retrieved_contexts": [{"id": "rules.md#0", "doc_id": "rules.md", "text": RULES[:60]},
                                    {"id": "faq.md#0", "doc_id": "faq.md", "text": FAQ}],
             "reference_context_ids": ["rules.md"]},
            {"id": "q2", "question": "Can I move twice?",
             "retrieved_contexts": [{"id": "faq.md#0", "doc_id": "faq.md", "text": FAQ}],
             "reference_context_ids": ["faq.md"]}]
    return _write(tmp_path / "ids.jsonl", rows)


def test_ids_that_name_documents_against_chunk_ids_say_use_doc_id(tmp_path):
    path = _ids_testset(tmp_path)
    code, out, err = _invoke("eval-rag", str(path), "-r", "ids", "-k", "2")
    assert code == 0, err
    assert out.count(ID_HINT) == 1 and f"nothing can match: {ID_HINT}" in out  # under the table, once
    assert ID_HINT not in err  # said once: not again as a warning
    assert out.index("nothing can match") > out.index("hit_rate@2")
    code, out, _ = _invoke("eval-rag", str(path), "-r", "ids", "-k", "2", "--format", "json")
    summary = json.loads(out)["summary"]
    assert summary["no_match"] == ID_HINT and json.loads(out)["mean"]["hit_rate@2"] == 0.0
    # the fix it names works, and the note is gone
    fixed = evaluate_rag(path, "ids", k=2, id_field="doc_id")
    assert fixed.mean["hit_rate@2"] == 1.0 and "no_match" not in fixed.summary


def _folder_run(tmp_path: Path) -> tuple[Path, Path]:
    """(b) `rankwise run --corpus folder/` over a test set whose passages name documents without
    extension."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rules.md").write_text(RULES, encoding="utf-8")
    (docs / "faq.md").write_text(FAQ, encoding="utf-8")
    s = RULES.index("A tower scores")
    e = RULES.index("nothing.") + len("nothing.")
    f = FAQ.index("one move per turn")
    questions = _write(tmp_path / "testset.jsonl", [
        {"id": "q1", "question": "How many points does a tower score?",
         "reference_contexts": [{"text": RULES[s:e], "doc_id": "rules", "start": s, "end": e}]},
        {"id": "q2", "question": "Can I move twice?",
         "reference_contexts": [{"text": "one move per turn", "doc_id": "faq", "start": f, "end": f + 17}]}])
    rag = tmp_path / "rag.jsonl"
    code, _, err = _invoke("run", "--corpus", str(docs), "--queries", str(questions), "--chunk-size", "80",
                           "--out", str(tmp_path / "r.trec"), "--rag-out", str(rag), "--quiet")
    assert code == 0, err
    return docs, questions


def test_documents_named_with_and_without_extension_say_so(tmp_path):
    _folder_run(tmp_path)
    rag = tmp_path / "rag.jsonl"
    assert {c["doc_id"] for line in rag.read_text().splitlines()
            for c in json.loads(line)["retrieved_contexts"]} == {"rules.md", "faq.md"}
    code, out, err = _invoke("eval-rag", str(rag), "-r", "span", "-k", "3")
    assert code == 0, err
    assert out.count(EXT_HINT) == 1 and "0.0000" in out
    code, out, _ = _invoke("eval-rag", str(rag), "-r", "span", "-k", "3", "--format", "json")
    assert json.loads(out)["summary"]["no_match"] == EXT_HINT
    # the same names under ids by document: the same sentence
    ids = evaluate_rag(_write(tmp_path / "by_doc.jsonl", [
        {"id": "q1", "retrieved_contexts": [{"id": "c", "doc_id": "faq.md", "text": FAQ}],
         "reference_context_ids": ["faq"]}]), "ids", id_field="doc_id", k=1)
    assert ids.summary["no_match"] == EXT_HINT


def test_sweep_over_a_folder_says_it_once_for_every_configuration(tmp_path):
    docs, questions = _folder_run(tmp_path)
    code, out, err = _invoke("sweep", "--corpus", str(docs), "--testset", str(questions), "--chunk-size", "60,80",
                             "--retriever", "bm25", "--quiet", "--no-html", "--out", str(tmp_path / "sweep"))
    assert code == 0, err
    lines = [line for line in err.splitlines() if "differ only by an extension" in line]
    assert lines == [f"rankwise: warning: systems 'bm25 recursive 60/50' and 'bm25 recursive 80/50': {EXT_HINT}"]


def test_compare_rag_and_gate_name_the_system(tmp_path):
    a = _ids_testset(tmp_path)
    fixed = [{**json.loads(line), "reference_context_ids": [ref + "#0" for ref in json.loads(line)["reference_context_ids"]]}
             for line in a.read_text().splitlines()]
    b = _write(tmp_path / "chunks.jsonl", fixed)
    code, _, err = _invoke("compare-rag", str(a), str(b), "--source", "ids", "-m", "hit_rate@1")
    assert code == 0, err
    assert [line for line in err.splitlines() if "nothing" in line or "no retrieved chunk id" in line] == [
        f"rankwise: warning: system 'ids': {ID_HINT}"]
    code, _, err = _invoke("gate", "--baseline", str(b), "--candidate", str(a), "--relevance", "ids",
                           "-m", "hit_rate@1")
    assert code in (0, 1), err
    assert f"rankwise: warning: system 'ids': {ID_HINT}" in err.splitlines()


def test_span_without_offsets_stops_with_the_cause(tmp_path):
    _folder_run(tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "rag.jsonl").read_text().splitlines()]
    for row in rows:  # as a trace exporter writes them: text, id and score, no character offsets
        for c in row["retrieved_contexts"]:
            del c["doc_id"], c["start"], c["end"]
    path = _write(tmp_path / "traced.jsonl", rows)
    code, out, err = _invoke("eval-rag", str(path), "-r", "span", "-k", "3")
    assert code == 2 and out == ""
    assert err.strip() == f"rankwise: error: {path}: field 'retrieved_contexts': {SPAN_HINT}"
    with pytest.raises(InputError, match="these cases carry no character offsets"):
        evaluate_rag(rows, "span")
    assert evaluate_rag(path, "containment", k=3).mean["hit_rate@3"] == 1.0  # the other fix it names


@pytest.mark.parametrize(("rows", "source", "words"), [
    ([{"id": "q", "retrieved_context_ids": ["d1"], "reference_contexts": ["alpha"]}], "containment",
     "no retrieved chunk (of 1) carries text, so no 'containment' verdict could be given: score chunk ids with "
     "-r ids, or offsets with -r span"),
    ([{"id": "q", "retrieved_contexts": ["alpha"], "reference_context_ids": ["d1"]}], "ids",
     "no retrieved chunk (of 1) carries an id or doc_id, so no 'ids' verdict could be given: use -r containment"),
])
def test_every_verdict_missing_under_other_sources_stops(rows, source, words):
    with pytest.raises(InputError) as exc:
        evaluate_rag(rows, source)
    assert exc.value.problem == words


def test_a_source_that_matches_somewhere_says_nothing():
    rows = [{"id": "q1", "retrieved_contexts": [{"id": "c1", "doc_id": "d1", "text": "x"}], "reference_context_ids": ["c1"]},
            {"id": "q2", "retrieved_contexts": [{"id": "c2", "doc_id": "d2", "text": "y"}], "reference_context_ids": ["c9"]}]
    assert "no_match" not in evaluate_rag(rows, "ids", k=1).summary  # a miss, not a mismatch of names


@pytest.mark.spark
@pytest.mark.slow
def test_spark_stops_with_the_same_sentence(spark, tmp_path):
    import rankwise.spark as rs

    rows = [{"id": f"q{i}", "retrieved_contexts": [{"text": "a tower scores three points", "id": f"c{i}"}],
             "reference_contexts": [{"text": "a tower", "doc_id": "rules.md", "start": 0, "end": 7}]} for i in range(4)]
    path = _write(tmp_path / "t.jsonl", rows)
    with pytest.raises(InputError) as local:
        evaluate_rag(path, "span")
    with pytest.raises(InputError) as remote:
        rs.evaluate_rag(spark.read.text(str(path)), "span")
    assert remote.value.problem == local.value.problem == SPAN_HINT
