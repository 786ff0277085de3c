"""The fuzz net over the integrations' own readers: the GitHub Action's inputs (text an action
passes: metrics, floors, alpha, max-drop, relevance) and the expectations / retrieved documents an
MLflow scorer reads. A seeded mutator makes mutants of valid values; each gives a result (exit 0 or
1), or exit 2 with one line on stderr and the summary saying so (an InputError from Python), never a
traceback."""

from __future__ import annotations

import contextlib
import io
import os
import random
from pathlib import Path

from _extras import need
from integrations.test_integrations_pytest import _write_inputs
from rankwise.errors import InputError
from rankwise.integrations.github import main

MUTANTS = int(os.environ.get("RANKWISE_FUZZ_MUTANTS", "300")) // 3
VALID = {"--metrics": "ndcg@10,P@1", "--floors": "recall@10=0.5", "--alpha": "0.05", "--max-drop": "0.01",
         "--relevance": ""}
NOISE = ["", " ", ",", "=", "@", "@-1", "nan", "inf", "-0", "1e309", "é", "\x00", "ndcg@", "=0.4", "P@5=", "0x10",
         "map", "ndcg_cut_10", "ids", "span", "llm", "a=b=c", ";", "'", '"', "\n", "recall@0", "1" * 40]


def _mutate(value: str, rng: random.Random) -> str:
    ops = rng.randrange(4)
    if ops == 0:
        return rng.choice(NOISE)
    if ops == 1 and value:
        i = rng.randrange(len(value))
        return value[:i] + rng.choice(NOISE) + value[i + 1:]
    if ops == 2:
        return value + rng.choice([",", " ", ""]) + rng.choice(NOISE)
    return value[: rng.randrange(len(value) + 1)]


def test_action_inputs_give_a_verdict_or_one_line(tmp_path, monkeypatch):
    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    rng = random.Random(24)
    codes = []
    for _ in range(MUTANTS):
        flags = dict(VALID)
        for flag in rng.sample(sorted(flags), rng.randint(1, 2)):
            flags[flag] = _mutate(flags[flag], rng)
        argv = ["--baseline", "base.trec", "--candidate", "worse.trec", "--qrels", "qrels.txt", "--html", ""]
        argv += [x for flag, value in flags.items() for x in (flag, value)]
        summary.write_text("")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: its one line, exit 2
                code = exc.code
        lines = err.getvalue().strip().splitlines()
        assert code in (0, 1, 2), (argv, code)
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("rankwise: error: "), (argv, lines)
            assert "Traceback" not in err.getvalue()
            if "the following arguments" not in lines[0]:
                assert "bad input" in summary.read_text()
        else:
            assert summary.read_text().startswith("## "), argv
        codes.append(code)
    assert {1, 2} <= set(codes)  # the mutants reach both the gate and the refusals


def test_scorer_expectations_and_documents_score_or_refuse():
    need("mlflow")
    from mlflow.entities import Feedback

    from rankwise.integrations.mlflow import _score_case, case_from_trace

    rng = random.Random(7)
    values = [None, "", "d1", 3, 2.5, [], {}, ["d1"], [{"doc_uri": "d1"}], [{"content": "alpha beta gamma"}],
              [{"doc_uri": None}], [{"content": 7}], [1, 2], "x" * 50, [{"doc_uri": ["d1"]}], {"doc_uri": "d1"}]
    keys = ["expected_retrieved_context", "reference_context_ids", "reference_contexts", "other"]
    for _ in range(MUTANTS):
        expectations = {k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 3))}
        try:
            row = case_from_trace(None, expectations, rng.choice(values))
            feedback = _score_case("ndcg@10", None, expectations, "q?", None, {}, Feedback)
        except InputError:
            continue
        assert row["retrieved_contexts"] == [] and isinstance(feedback.value, float), expectations


# ------------------------------------------------------------------ MLflow tracking URIs and saved
# baselines (issue 33)
URI_NOISE = ["", "/", "//", "///", ":", "?", "#", "@", "%00", "%ff", "\x00", "é", " ", "..", "/proc/x", "/dev/full",
             "nosuch", "file:", "sqlite:", "http:", "https://", ":0", ":99999", ":-1", "[::1", "u:p@", "+psycopg2",
             "db.db/", "mlruns", "\n", "~"]


def _uri_mutant(uri: str, rng: random.Random) -> str:
    op = rng.randrange(3)
    if op == 0 and uri:
        i = rng.randrange(len(uri))
        return uri[:i] + rng.choice(URI_NOISE) + uri[i + rng.randrange(2):]
    if op == 1:
        return uri + rng.choice(URI_NOISE)
    return uri[: rng.randrange(len(uri) + 1)]


def test_tracking_uri_mutants_are_accepted_or_one_line_within_seconds(tmp_path, monkeypatch):
    """Mutants of a good SQLite URI, a refused loopback server and a file store: each is accepted or
    refused with one line (an InputError), within the probe's seconds; none is a traceback or a
    hang."""
    need("mlflow")
    import socket
    import time

    from rankwise.integrations._mlflow_uri import PROBE_SECONDS
    from rankwise.integrations.mlflow import check_tracking_uri

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    (tmp_path / "corrupt.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)))
    valid = ["sqlite:///good.db", f"sqlite:///{tmp_path / 'abs.db'}", "sqlite:///corrupt.db",
             f"http://127.0.0.1:{port}", f"postgresql://u:pw@127.0.0.1:{port}/db", "mlruns", "file:///tmp/mlruns"]
    from rankwise.integrations._mlflow_uri import _schemes

    _schemes(), check_tracking_uri("")  # MLflow's tracking modules imported (seconds) before any mutant is timed
    rng = random.Random(33)
    outcomes = set()
    for _ in range(max(MUTANTS // 2, 20)):
        uri = _uri_mutant(rng.choice(valid), rng)
        start = time.monotonic()
        try:
            assert check_tracking_uri(uri) == uri or not uri  # none given: MLflow's default, checked
            outcomes.add("accepted")
        except InputError as exc:
            assert "\n" not in str(exc) and "MLflow tracking URI" in str(exc), (uri, str(exc))
            if "u:pw@" in uri:
                assert "pw@" not in str(exc), str(exc)  # the password masked
            outcomes.add("refused")
        assert time.monotonic() - start < PROBE_SECONDS + 2, uri
    assert outcomes == {"accepted", "refused"}


def test_saved_baseline_mutants_give_a_verdict_or_one_line(tmp_path, monkeypatch):
    """Mutants of a saved result (``eval --format json --per-query``) as the gate's baseline: bytes
    that are not UTF-8, NULs, binary, deep nesting, lone surrogates, cut short. Each gives a verdict
    (exit 0 or 1) or one line naming the file, exit 2."""
    from _inprocess import run_cli

    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    saved = run_cli(["eval", "qrels.txt", "base.trec", "-m", "ndcg@10", "--format", "json", "--per-query"])
    good = saved.stdout.encode()
    noise = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x80\x80", bytes(range(256)), b"[" * 100_000,
             b'{"a":' * 50_000, b'"\\ud800"', b"\r", b"\xef\xbb\xbf", b"}", b"]]]", b"\x1a"]
    rng = random.Random(5)
    codes = []
    for n in range(max(MUTANTS // 3, 20)):
        i = rng.randrange(len(good))
        op = rng.randrange(3)
        data = (good[:i] + rng.choice(noise) + good[i:] if op == 0 else good[:i] if op == 1 else
                good[:i] + rng.choice(noise) + good[i + rng.randrange(1, 20):])
        name = f"base{n}.json"
        Path(name).write_bytes(data)
        done = run_cli(["gate", "--baseline", name, "--candidate", "base.trec", "--qrels", "qrels.txt", "-m",
                        "ndcg@10"])
        assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr, done.stderr[-3000:]
        if done.returncode == 2:
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("rankwise: error: ") and name in lines[0], lines
        codes.append(done.returncode)
    assert 2 in codes and 0 in codes


def test_scorers_on_real_traces_with_fuzzed_documents_score_or_refuse(tmp_path):
    """Real MLflow traces (``mlflow.trace`` with a RETRIEVER span, logged to a SQLite store and read
    back): the retriever returns fuzzed documents — ids missing, None, numbers or lists, no or
    non-text content, odd metadata, raw dicts, strings, duplicates, a long list — and rankwise's
    public scorers give a finite value in range with a rationale for each, or an InputError of one
    line; never another exception, never NaN."""
    mlflow = need("mlflow")
    import math

    from mlflow.entities import Document, SpanType

    import rankwise
    from rankwise.integrations._mlflow_uri import borrowed_mlflow

    uri = f"sqlite:///{tmp_path / 'fuzz.db'}"  # the experiment's artifacts in tmp_path too (MLflow's default: ./mlruns)
    mlflow.MlflowClient(uri).create_experiment("fuzz", artifact_location=(tmp_path / "artifacts").as_uri())
    borrowed = borrowed_mlflow(mlflow, uri, "fuzz")  # restored afterwards
    borrowed.__enter__()
    rng = random.Random(22)
    ids = [None, "", "d1", "d2", 7, 2.5, ["d1"], {"x": 1}, "d1 ", "é/d1"]
    contents = [None, "", "alpha beta gamma", "Paris is the capital of France.", 7, "x" * 3000]
    metas = [None, {}, {"doc_uri": "d1"}, {"doc_uri": None}, {"doc_uri": ["d1"]}, {"doc_uri": 3}, {"other": "y"}]

    def document():
        kind = rng.randrange(4)
        if kind == 0:  # a Document as a user's code builds it
            content = rng.choice([c for c in contents if isinstance(c, str)])
            meta = rng.choice([m for m in metas if m is not None])
            return Document(page_content=content, metadata=meta, id=rng.choice([None, "d1", "d2", "d3"]))
        if kind == 1:  # a raw dict, any field
            return {k: v for k, v in (("id", rng.choice(ids)), ("page_content", rng.choice(contents)),
                                      ("metadata", rng.choice(metas))) if rng.random() < 0.7}
        return rng.choice(["d1", 3, None, ["nested"]])  # not a document at all

    scorers = rankwise.mlflow.scorers(["ndcg@10", "recall@5", "mrr"])
    expectations = [{"expected_retrieved_context": [{"doc_uri": "d1"}]}, {"reference_context_ids": ["d1", "d2"]},
                    {"reference_contexts": ["Paris is the capital of France."]}, {}]
    outcomes = {"value": 0, "refused": 0}
    try:
        for i in range(max(MUTANTS // 6, 12)):
            n = rng.choice([0, 1, 3, 40])
            docs = [document() for _ in range(n)]
            if docs and rng.random() < 0.2:
                docs = docs + docs  # the same documents twice

            @mlflow.trace(span_type=SpanType.RETRIEVER)
            def retrieve(question, docs=docs):
                return docs

            @mlflow.trace
            def app(question):
                return str(retrieve(question))[:50]

            app(f"question {i}?")
            mlflow.flush_trace_async_logging()
            trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
            exp = rng.choice(expectations)
            for s in scorers:
                try:
                    fb = s(inputs={"question": f"question {i}?"}, outputs=None, expectations=exp, trace=trace)
                except InputError as exc:
                    assert "\n" not in str(exc), exc
                    outcomes["refused"] += 1
                    continue
                assert isinstance(fb.value, float) and math.isfinite(fb.value) and 0.0 <= fb.value <= 1.0, fb
                assert fb.rationale, fb
                outcomes["value"] += 1
                outcomes["positive"] = outcomes.get("positive", 0) + (fb.value > 0)
    finally:
        borrowed.__exit__(None, None, None)
    # the fuzz reaches the scoring, and fuzzed documents are read (some score above 0), not only
    # refused
    assert outcomes["value"] > 0 and outcomes.get("positive", 0) > 0, outcomes
