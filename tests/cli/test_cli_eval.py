"""`rankwise eval`: output formats, errors (one line, exit 2), and agreement with pytrec_eval on
CISI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from _extras import need
from rankwise.cli import main
from rankwise.metrics import DEFAULT_METRICS

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq1 0 d 1\nq2 0 x 1\n"
RUN = "q1 Q0 a 1 1.0 sys\nq1 Q0 b 2 1.0 sys\nq1 Q0 z 3 1.0 sys\nq1 Q0 c 4 0.5 sys\nq3 Q0 x 1 1.0 sys\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    q = tmp_path / "qrels.txt"
    r = tmp_path / "run.trec"
    q.write_text(QRELS)
    r.write_text(RUN)
    return q, r


def _run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _process(*args: str) -> subprocess.CompletedProcess:
    """The real `rankwise` process (console-script entry point, as a user runs it)."""
    return subprocess.run([sys.executable, "-m", "rankwise.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


# ------------------------------------------------------------------ formats
def test_json_exact_shape(files):
    q, r = files
    res = _run("eval", q, r, "--format", "json", "-m", "P@3,map", "-m", "ndcg_cut_3")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert list(out) == ["summary", "mean"]
    assert list(out["mean"]) == ["precision@3", "map", "ndcg@3"]
    # q2 is in the qrels but not the run: scores 0 (missing="zero"); q3 is ignored
    assert out["mean"]["precision@3"] == pytest.approx((1 / 3 + 0) / 2)
    assert out["mean"]["map"] == pytest.approx((5 / 18) / 2)
    s = out["summary"]
    assert (s["evaluated"], s["missing_from_run"], s["ignored_not_in_qrels"]) == (2, 1, 1)
    assert s["missing_queries"] == ["q2"] and s["ignored_queries"] == ["q3"]


def test_json_per_query(files):
    q, r = files
    out = json.loads(_run("eval", q, r, "--format", "json", "--per-query", "-m", "P@3,mrr").output)
    assert list(out) == ["summary", "mean", "per_query"]
    assert out["per_query"] == {"q1": {"precision@3": pytest.approx(1 / 3), "mrr": pytest.approx(1 / 3)},
                                "q2": {"precision@3": 0.0, "mrr": 0.0}}


def test_missing_skip_and_relevance_level(files):
    q, r = files
    out = json.loads(_run("eval", q, r, "--format", "json", "--missing", "skip", "-l", "2",
                          "-m", "map,P@5,recall@5,Rprec,mrr,ndcg").output)
    assert {k: round(v, 4) for k, v in out["mean"].items()} == {
        "map": 0.25, "precision@5": 0.2, "recall@5": 1.0, "r_precision": 0.0, "mrr": 0.25, "ndcg": 0.4348}
    assert out["summary"]["evaluated"] == 1


def test_default_metrics(files):
    q, r = files
    out = json.loads(_run("eval", q, r, "--format", "json").output)
    assert list(out["mean"]) == list(DEFAULT_METRICS)
    assert len(DEFAULT_METRICS) == 15


def test_csv_format(files):
    q, r = files
    res = _run("eval", q, r, "--format", "csv", "-q", "-m", "P@1,num_ret")
    assert res.output.splitlines() == [
        "query_id,metric,value", "q1,precision@1,0.0", "q1,num_ret,4.0", "q2,precision@1,0.0",
        "q2,num_ret,0.0", "all,precision@1,0.0", "all,num_ret,4.0",
    ]


def test_trec_format(files):
    q, r = files
    res = _run("eval", q, r, "--format", "trec", "-m", "map,num_q,P_5", "--missing", "skip")
    # trec_eval's order (its measure table), whatever the order asked: `trec_eval -m map -m num_q -m
    # P.5`; no runid line: trec_eval prints it only when asked (-m runid, official, set, all_trec,
    # or no -m)
    assert res.output == ("num_q                 \tall\t1\n"
                          "map                   \tall\t0.2778\n"
                          "P_5                   \tall\t0.4000\n")


def test_table_format(files):
    q, r = files
    res = _run("eval", q, r, "-m", "map,P@5")
    assert res.exit_code == 0
    assert "map" in res.output and "0.1389" in res.output and "precision@5" in res.output


# ------------------------------------------------------------------ errors
def test_malformed_file_one_line_exit_2(files, tmp_path):
    q, _ = files
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 a 1 1.0 sys\nq1 Q0 b 2 oops sys\n")
    proc = _process("eval", q, bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"rankwise: error: {bad}:2: field 'score': not a number: 'oops'\n"


@pytest.mark.parametrize(("content", "pattern"), [
    ("q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n", r":2: field 'doc_id': doc 'a' appears twice in query 'q1' \(first at line 1\)"),
    ("q1 Q0 a 1\n", r":1: field 'score': expected at least 6 fields"),
    ("", r": file is empty"),
])
def test_bad_run_messages(files, tmp_path, content, pattern):
    q, _ = files
    bad = tmp_path / "bad.trec"
    bad.write_text(content)
    res = _run("eval", q, bad)
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"rankwise: error: {bad}")
    assert re.search(pattern, res.output)


def test_bad_qrels_message(files, tmp_path):
    _, r = files
    bad = tmp_path / "bad.qrels"
    bad.write_bytes(b"q1 0 a 1\nq1 0 b \xff\n")
    res = _run("eval", bad, r)
    assert res.exit_code == 2
    assert res.output == f"rankwise: error: {bad}:2: bytes that are not UTF-8 at column 8\n"


def test_missing_file(files, tmp_path):
    q, _ = files
    res = _run("eval", q, tmp_path / "nope.trec")
    assert res.exit_code == 2 and "file not found" in res.output


def test_unknown_metric_suggests(files):
    q, r = files
    proc = _process("eval", q, r, "-m", "ndgc@10")
    assert proc.returncode == 2
    assert proc.stderr.startswith("rankwise: error: ") and proc.stderr.count("\n") == 1
    assert "unknown metric 'ndgc@10'" in proc.stderr and "ndcg@10" in proc.stderr
    res = _run("eval", q, r, "-m", "presicion@5")
    assert "precision@5" in res.output


def test_no_common_query(tmp_path):
    q = tmp_path / "q"
    r = tmp_path / "r"
    q.write_text("a 0 d 1\n")
    r.write_text("b Q0 d 1 1 s\n")
    res = _run("eval", q, r, "--missing", "skip")
    assert res.exit_code == 2 and "share no query id" in res.output


def test_eval_does_not_import_heavy_modules(files):
    q, r = files
    code = (
        "import sys; from rankwise.cli import main\n"
        "try:\n    main(['eval', sys.argv[1], sys.argv[2], '--format', 'json'])\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('pandas', 'polars', 'scipy', 'torch', 'rich', 'sentence_transformers', 'matplotlib')"
        " if m in sys.modules]\nprint('HEAVY', heavy, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(q), str(r)], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ CISI, default metrics vs
# pytrec_eval
def _tfidf_run(cisi: Path) -> dict[str, dict[str, float]]:
    """A simple TF-IDF run over the CISI corpus, top 100 per query, scores rounded to float32.

    (pytrec_eval stores scores as C floats; float32 scores rank the same in both.)
    """
    token = re.compile(r"[a-z0-9]+")
    docs = [json.loads(line) for line in (cisi / "corpus.jsonl").read_text().splitlines() if line.strip()]
    queries = [json.loads(line) for line in (cisi / "queries.jsonl").read_text().splitlines() if line.strip()]
    q_terms = [token.findall(q["text"].lower()) for q in queries]
    vocab = {t: i for i, t in enumerate(sorted({t for ts in q_terms for t in ts}))}
    tf = np.zeros((len(docs), len(vocab)), dtype=np.float64)
    for i, d in enumerate(docs):
        for t in token.findall((d.get("title", "") + " " + d["text"]).lower()):
            j = vocab.get(t)
            if j is not None:
                tf[i, j] += 1
    idf = np.log((1 + len(docs)) / (1 + (tf > 0).sum(axis=0))) + 1
    w = np.log1p(tf) * idf
    qv = np.zeros((len(queries), len(vocab)))
    for i, ts in enumerate(q_terms):
        for t in ts:
            qv[i, vocab[t]] += 1
    scores = (qv * idf) @ w.T
    scores = scores.astype(np.float32).astype(np.float64)
    run = {}
    ids = [d["_id"] for d in docs]
    for i, q in enumerate(queries):
        top = np.argsort(-scores[i], kind="stable")[:100]
        run[q["_id"]] = {ids[j]: float(scores[i, j]) for j in top}
    return run


def test_cisi_default_metrics_agree_with_pytrec_eval(shared_data, tmp_path):
    pytrec_eval = need("pytrec_eval")
    cisi = shared_data / "cisi"
    qrels_path = cisi / "qrels" / "test.tsv"
    run = _tfidf_run(cisi)
    run_path = tmp_path / "tfidf.trec"
    with open(run_path, "w") as fh:
        for q, docs in run.items():
            for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), start=1):
                fh.write(f"{q} Q0 {d} {rank} {s!r} tfidf\n")
    proc = _process("eval", qrels_path, run_path, "--format", "json", "--per-query")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)

    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text().splitlines()[1:]:
        qid, did, grade = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(grade)
    measures = {"success.1,3,5,10", "P.1,3,5,10", "recall.1,3,5,10", "recip_rank", "ndcg_cut.10", "map"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {f"success_{k}": f"hit_rate@{k}" for k in (1, 3, 5, 10)}
    names |= {f"P_{k}": f"precision@{k}" for k in (1, 3, 5, 10)}
    names |= {f"recall_{k}": f"recall@{k}" for k in (1, 3, 5, 10)}
    names |= {"recip_rank": "mrr", "ndcg_cut_10": "ndcg@10", "map": "map"}

    assert len(qrels) == 76 and len(run) == 112
    s = out["summary"]
    assert (s["queries_in_qrels"], s["queries_in_run"], s["evaluated"]) == (76, 112, 76)
    assert (s["missing_from_run"], s["ignored_not_in_qrels"]) == (0, 36)
    assert set(out["per_query"]) == set(expected)
    for qid, values in expected.items():
        for tname, value in values.items():
            assert out["per_query"][qid][names[tname]] == pytest.approx(value, abs=1e-9, rel=0), (qid, tname)
    for tname, name in names.items():
        mean = sum(expected[q][tname] for q in sorted(expected)) / len(expected)
        assert out["mean"][name] == pytest.approx(mean, abs=1e-12, rel=0)
    assert 0.05 < out["mean"]["map"] < 0.5  # a real retrieval run, not a degenerate one


def test_runid_in_json_and_table_only_when_asked(files):
    q, r = files
    asked = json.loads(_run("eval", q, r, "-m", "runid", "-m", "map", "--format", "json").output)
    assert asked["runid"] == "sys" and list(asked["mean"]) == ["map"]
    default = json.loads(_run("eval", q, r, "--format", "json").output)
    assert default["runid"] == "sys"  # no -m: trec_eval's official set, which holds runid
    plain = json.loads(_run("eval", q, r, "-m", "map", "--format", "json").output)
    assert "runid" not in plain
    table = CliRunner().invoke(main, ["--width", "200", "eval", str(q), str(r), "-m", "runid,map"]).output
    assert "(runid sys)" in table  # in the title
    assert "runid" not in CliRunner().invoke(main, ["--width", "200", "eval", str(q), str(r), "-m", "map"]).output
