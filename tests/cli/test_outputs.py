"""Output files (issue 10, item 13): no command writes over one of its inputs, or over an existing
file rankwise did not write unless --force; OS errors on outputs are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from _readonly import read_only_folder
from rankwise._outputs import check_outputs, is_our_output
from rankwise.cli import main
from rankwise.errors import InputError

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq2 0 d4 1\n"
RUN_A = "q1 Q0 d1 1 2 a\nq1 Q0 d2 2 1 a\nq2 Q0 d3 1 2 a\nq2 Q0 d4 2 1 a\n"
RUN_B = "q1 Q0 d2 1 2 b\nq1 Q0 d1 2 1 b\nq2 Q0 d4 1 2 b\nq2 Q0 d5 2 1 b\n"
TESTSET = ('{"id": "q1", "user_input": "a?", "retrieved_contexts": ["alpha beta", "gamma"], '
           '"reference_contexts": ["alpha"]}\n')


@pytest.fixture
def files(tmp_path):
    q, a, b, t = (tmp_path / n for n in ("q.txt", "a.trec", "b.trec", "testset.jsonl"))
    q.write_text(QRELS)
    a.write_text(RUN_A)
    b.write_text(RUN_B)
    t.write_text(TESTSET)
    return q, a, b, t


def _cli(*args):
    result = CliRunner().invoke(main, [str(x) for x in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _refused(result, *words):
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("rankwise: error: ") and result.stderr.count("\n") == 1, result.stderr
    for w in words:
        assert w in result.stderr, result.stderr


def test_compare_never_writes_over_its_inputs(files):
    q, a, b, _ = files
    for option, victim in (("--html", a), ("--plot", q), ("--html", b), ("--plot", a)):
        for force in ([], ["--force"]):
            _refused(_cli("compare", q, a, b, "-m", "map", option, victim, *force), "would write over the input")
    assert a.read_text() == RUN_A and b.read_text() == RUN_B and q.read_text() == QRELS


def test_compare_refuses_foreign_files_unless_forced_and_rewrites_its_own(files, tmp_path):
    q, a, b, _ = files
    notes = tmp_path / "notes.html"
    notes.write_text("<!DOCTYPE html><p>my notes</p>")
    picture = tmp_path / "holiday.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    _refused(_cli("compare", q, a, b, "-m", "map", "--html", notes), "not a rankwise output", "--force")
    _refused(_cli("compare", q, a, b, "-m", "map", "--plot", picture), "not a rankwise output")
    assert notes.read_text() == "<!DOCTYPE html><p>my notes</p>"
    assert _cli("compare", q, a, b, "-m", "map", "--html", notes, "--force").exit_code == 0
    assert is_our_output(notes)
    report, plot = tmp_path / "r.html", tmp_path / "p.png"
    for _ in range(2):  # our own outputs are rewritten without --force
        result = _cli("compare", q, a, b, "-m", "map,P@1", "--html", report, "--plot", plot)
        assert result.exit_code == 0, result.output
    assert is_our_output(report) and is_our_output(plot)
    _refused(_cli("compare", q, a, b, "-m", "map", "--html", report, "--plot", report), "same file")
    _refused(_cli("compare", q, a, b, "-m", "map", "--html", tmp_path), "directory")


def test_eval_rag_records(files, tmp_path):
    _, _, _, t = files
    _refused(_cli("eval-rag", t, "--records", t, "--force"), "would write over the input")
    records = tmp_path / "out" / "records.jsonl"
    for _ in range(2):
        assert _cli("eval-rag", t, "--records", records, "--quiet").exit_code == 0
    assert is_our_output(records) and json.loads(records.read_text().splitlines()[0])["id"] == "q1"
    mine = tmp_path / "data.jsonl"
    mine.write_text('{"something": "else"}\n')
    _refused(_cli("eval-rag", t, "--records", mine), "not a rankwise output")
    assert mine.read_text() == '{"something": "else"}\n'
    # a folder that cannot exist (a file is in the way): refused before any work, one line
    _refused(_cli("eval-rag", t, "--records", t / "x.jsonl"), "is not a folder")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_records_to_a_full_disk_is_one_line(files):
    _, _, _, t = files
    _refused(_cli("eval-rag", t, "-k", "1,2", "--records", "/dev/full", "--force", "--quiet"), "No space left")


def test_unwritable_folder(files, tmp_path):
    """Runs as root too (a read-only bind mount: tests/_readonly.py)."""
    _, _, _, t = files
    with read_only_folder(tmp_path / "locked") as locked:
        _refused(_cli("eval-rag", t, "--records", locked / "r.jsonl"), "no permission")
        assert not (locked / "r.jsonl").exists()


def test_judge_refuses_before_any_call(files, tmp_path):
    _, _, _, t = files
    _refused(_cli("judge", t, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--records", t),
             "would write over the input")
    _refused(_cli("judge", t, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--records",
                  tmp_path / "r.jsonl", "--cache", t), "--cache")


def test_run_out_and_rag_out(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "text": "alpha beta"}\n{"id": "d2", "text": "gamma delta"}\n')
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "text": "alpha"}\n')
    base = ["run", "--corpus", corpus, "--queries", queries, "--quiet", "--depth", "2"]
    _refused(_cli(*base, "--out", corpus), "would write over the input")
    _refused(_cli(*base, "--out", tmp_path / "r.trec", "--rag-out", queries), "would write over the input")
    out = tmp_path / "r.trec"
    for _ in range(2):  # the run and its chunks are ours: a rerun needs no --force
        result = _cli(*base, "--out", out, "--rag-out", tmp_path / "rag.jsonl")
        assert result.exit_code == 0, result.output
    assert is_our_output(out) and is_our_output(tmp_path / "rag.jsonl")
    other = tmp_path / "other.trec"
    other.write_text(RUN_A)
    _refused(_cli(*base, "--out", other), "not a rankwise output")


def test_demo_folder_with_foreign_files(tmp_path):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "report.html").write_text("<html>mine</html>")
    _refused(_cli("demo", "--out", out, "--quiet"), "not a rankwise output")
    assert (out / "report.html").read_text() == "<html>mine</html>"


def test_check_outputs_library():
    with pytest.raises(InputError, match="would write over the input"):
        check_outputs({"--html": "a/../q.txt"}, ["q.txt"], force=True)
    check_outputs({"--html": None}, ["q.txt"])


def test_cache_file_with_a_foreign_schema_is_one_line_and_left_alone(files, tmp_path):
    import sqlite3

    _, _, _, t = files
    for tables in (["CREATE TABLE verdicts (x INTEGER)", "CREATE TABLE other (y)"],
                   ["CREATE TABLE verdicts (x INTEGER)", "CREATE TABLE meta (name, value)"],
                   ["CREATE TABLE meta (a, b)", "CREATE TABLE verdicts (key)"]):
        db = tmp_path / f"foreign{len(list(tmp_path.glob('foreign*')))}.sqlite"
        with sqlite3.connect(db) as con:
            for sql in tables:
                con.execute(sql)
        before = db.read_bytes()
        _refused(_cli("cache", "stats", "--cache", db), "not a rankwise cache")
        _refused(_cli("judge", t, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--cache", db,
                      "--records", tmp_path / "r.jsonl", "--quiet"), "not a rankwise cache")
        assert db.read_bytes() == before
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all\n")
    _refused(_cli("cache", "stats", "--cache", text), "not a usable rankwise cache")


def test_reports_from_before_the_generator_tag_are_still_ours(files, tmp_path):
    q, a, b, _ = files
    report = tmp_path / "r.html"
    assert _cli("compare", q, a, b, "-m", "map", "--html", report).exit_code == 0
    old = report.read_text(encoding="utf-8").replace('<meta name="generator" content="rankwise">', "")
    report.write_text(old, encoding="utf-8")
    assert is_our_output(report)
    report.write_text(old.replace('id="doc-texts"', 'id="x"'), encoding="utf-8")
    assert not is_our_output(report)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    assert is_our_output(empty) and not is_our_output(tmp_path)
