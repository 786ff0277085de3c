"""Adapters and their CLI when the user's retriever misbehaves (issue 20, "unclear or silent"): a
retriever returning None or raising SystemExit is a counted per-question failure, impossible offsets
never reach the records, a factory that raises is one line (exit 2), ``--shard ''`` is refused, a
sweep whose retriever found nothing says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.adapters import build_retriever, run_retriever
from rankwise.cli import main
from rankwise.data.records import load_records
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag

REPO = Path(__file__).resolve().parents[2]
CASES = [
    {"id": "q1", "question": "capital of France",
     "reference_contexts": [{"text": "Paris is the capital of France.", "doc_id": "d1", "start": 0, "end": 31}]},
    {"id": "q2", "question": "capital of Italy",
     "reference_contexts": [{"text": "Rome is the capital of Italy.", "doc_id": "d2", "start": 0, "end": 29}]},
]
MODULE = '''
def none(question):
    return None

def exits(question):
    if "France" in question:
        raise SystemExit(3)
    return [{"text": "Rome is the capital of Italy.", "doc_id": "d2", "start": 0}]

def bad_offsets(question):
    return [{"text": "Paris is the capital of France.", "doc_id": "d1", "start": 40, "end": 9},
            {"text": "Rome is the capital of Italy.", "doc_id": "d2", "start": -5},
            {"text": "Rome is the capital of Italy.", "doc_id": "d2", "start": 0}]

def build():
    raise RuntimeError("no index at ./index")

def build_exits():
    raise SystemExit("missing OPENAI_API_KEY")
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "my_rag.py").write_text(MODULE)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return tmp_path, cases


def _run_adapter(project_dir: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{project_dir}{os.pathsep}{REPO / 'src'}"}
    return subprocess.run([sys.executable, "-m", "rankwise.cli", "run-adapter", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=project_dir, timeout=120)


def test_a_retriever_returning_none_is_a_counted_failure(project):
    run = run_retriever(lambda q: None, CASES, retries=2, backoff=5.0)  # not retried: it would answer None again
    assert run.summary["failed"] == 2 and run.summary["chunks"] == 0
    info = run.records[0].extra["retrieval"]
    assert info["status"] == "failed: _NotAList: the retriever returned NoneType, not a list of items"
    assert info["attempts"] == 1
    folder, cases = project
    done = _run_adapter(folder, "my_rag:none", cases, "--out", folder / "r.jsonl")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == 2
    assert "(2 cases, 2 failed)" in done.stderr


def test_a_retriever_raising_system_exit_is_caught_counted_and_the_run_goes_on(project):
    folder, cases = project
    out = folder / "r.jsonl"
    done = _run_adapter(folder, "my_rag:exits", cases, "--out", out)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["failed"] == 1 and summary["chunks"] == 1
    records = load_records(out)
    assert records[0].extra["retrieval"]["status"] == "failed: SystemExit: 3"
    assert [c.text for c in records[1].chunks] == ["Rome is the capital of Italy."]


def test_impossible_offsets_are_dropped_and_counted_so_eval_rag_reads_the_records(project):
    folder, cases = project
    out = folder / "r.jsonl"
    done = _run_adapter(folder, "my_rag:bad_offsets", cases, "--out", out)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["bad_offsets"] == 4 and summary["no_offsets"] == 4
    assert "4 of 6 chunks carry impossible offsets (negative, or end before start; first: q1 rank 1: start 40, " \
           "end 9)" in done.stderr
    chunks = load_records(out)[0].chunks
    assert [(c.start, c.end) for c in chunks] == [(None, None), (None, None), (0, 29)]
    result = evaluate_rag(str(out), "span", k=[3])
    assert result.mean["precision@3"] == pytest.approx((0 + 1 / 3) / 2)  # d2 0-29 is q2's passage only
    scored = CliRunner().invoke(main, ["eval-rag", str(out), "-r", "span", "--format", "json", "--quiet"])
    assert scored.exit_code == 0, scored.output


def test_a_factory_that_raises_is_one_line_and_exit_2(project):
    folder, cases = project
    for spec, why in (("my_rag:build", "RuntimeError: no index at ./index"),
                      ("my_rag:build_exits", "SystemExit: missing OPENAI_API_KEY")):
        for command in ("run-adapter", "check-adapter"):
            env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{REPO / 'src'}"}
            extra = ["--out", folder / "r.jsonl"] if command == "run-adapter" else []
            done = subprocess.run([sys.executable, "-m", "rankwise.cli", command, spec, str(cases), *map(str, extra)],
                                  capture_output=True, text=True, env=env, cwd=folder, timeout=120)
            assert done.returncode == 2, done.stderr
            assert done.stderr == f"rankwise: error: RETRIEVER: {spec} raised {why} while building the retriever\n"
        assert not (folder / "r.jsonl").exists()
    with pytest.raises(InputError, match="boom raised ZeroDivisionError"):
        build_retriever(lambda: 1 / 0, "boom")


def test_empty_shard_is_refused(tmp_path):
    ts = tmp_path / "ts.jsonl"
    ts.write_text(json.dumps({"id": "q1", "user_input": "q?", "retrieved_contexts": ["a"]}) + "\n")
    for value in ("", " ", "1/"):
        r = CliRunner().invoke(main, ["judge", str(ts), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                      "--records", str(tmp_path / "r.jsonl"), "--cache", str(tmp_path / "c.sqlite"),
                                      "--shard", value, "--quiet"])
        assert r.exit_code == 2, r.output
        assert r.stderr == f"rankwise: error: --shard must be i/N (e.g. 0/4), got {value!r}\n"
    assert not (tmp_path / "r.jsonl").exists()


def test_sweep_says_the_retriever_found_nothing(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "d1", "text": "Paris is the capital of France. Lyon is a large city."}\n'
                      '{"id": "d2", "text": "Rome is the capital of Italy. Milan is in the north."}\n')
    ts = tmp_path / "t.jsonl"
    ts.write_text("".join(json.dumps(dict(c, question=q)) + "\n" for c, q in zip(CASES, ("zzz qqq", "xxyy wwvv"),
                                                                                  strict=True)))
    r = CliRunner().invoke(main, ["sweep", "--corpus", str(corpus), "--testset", str(ts), "--out",
                                  str(tmp_path / "sw"), "--quiet", "--chunk-size", "40", "--overlap", "0"])
    assert r.exit_code == 2, r.output
    assert r.stderr == ("rankwise: error: --relevance: no case can be scored with relevance 'span': "
                        "the retriever returned no chunks for 2 questions\n")
    # a test set without offsets still gets the span hint
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "q1", "question": "q", "reference_contexts": ["Paris"],
                                 "retrieved_contexts": ["Paris is nice"]}) + "\n")
    with pytest.raises(InputError, match="span needs doc_id/start/end"):
        evaluate_rag(str(plain), "span")
