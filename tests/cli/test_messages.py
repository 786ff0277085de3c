"""Messages and output a user can act on: whole tables through pipes, named test-set fields, the
QRELS/RUN swap hint, warnings with counts, a fast and precise reranker error, a reason for every
verdict.

The CLI is run as a real subprocess with stdout and stderr on pipes, as a user's shell script would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import rankwise
from _inprocess import run_cli
from _synthetic_runs import qrels_dict, system_run, write_trec
from rankwise.data.testset import load_testset
from rankwise.errors import InputError, RankwiseWarning
from rankwise.metrics.rag import evaluate_rag

SRC = Path(__file__).resolve().parents[2] / "src"
ELLIPSIS = "\u2026"


def rankwise_cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m rankwise.cli ARGS`` with stdout/stderr on pipes (not a terminal). In-process (as
    such a process would finish) unless ``env`` sets more than RANKWISE_WIDTH: libraries read their
    variables (e.g. huggingface_hub's HF_HOME) once, at import, so those calls get a fresh process.
    """
    full_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "RANKWISE_WIDTH")}
    full_env.update({"PYTHONPATH": str(SRC), **(env or {})})
    if set(env or {}) <= {"RANKWISE_WIDTH"}:
        return run_cli(args, env=full_env)
    return subprocess.run([sys.executable, "-m", "rankwise.cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


# --------------------------------------------------------------------------------------- whole
# tables
LONG_METRICS = ["hit_rate@10", "precision@10", "recall@100", "ndcg@10", "map@100", "r_precision", "bpref",
                "num_rel_ret", "ndcg_exp@10", "f1@10", "mrr@10", "success@5", "recall@5", "P@5", "map"]


@pytest.fixture(scope="module")
def cranfield_files(shared_data, tmp_path_factory):
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    tmp = tmp_path_factory.mktemp("runs")
    runs = [write_trec(system_run(qrels, strength=s, seed=i), tmp / f"system_with_a_long_name_{i}.trec")
            for i, s in enumerate((0.6, 1.0))]
    return qrels_path, runs


def test_piped_eval_table_is_whole(cranfield_files):
    qrels_path, runs = cranfield_files
    out = rankwise_cli("eval", str(qrels_path), str(runs[0]), "-m", ",".join(LONG_METRICS), "--per-query")
    assert out.returncode == 0, out.stderr
    assert ELLIPSIS not in out.stdout
    result = rankwise.evaluate(qrels_path, runs[0], LONG_METRICS)
    header = next(line for line in out.stdout.splitlines() if "query" in line)
    for name in result.names:
        assert name in header
    all_row = next(line for line in out.stdout.splitlines() if line.strip("│┃ ").startswith("all"))
    cells = [c.strip() for c in all_row.strip().strip("│").split("│")]
    for name, cell in zip(result.names, cells[1:], strict=True):
        value = result.mean[name]
        assert cell == (str(int(value)) if name.startswith("num_") else f"{value:.4f}"), name
    # every per-query row is there, each on one line
    assert sum(1 for line in out.stdout.splitlines() if line.startswith("│ ")) == len(result.per_query) + 1


def test_piped_metrics_list_and_compare_are_whole(cranfield_files):
    out = rankwise_cli("metrics")
    assert out.returncode == 0 and ELLIPSIS not in out.stdout
    from rankwise.metrics.registry import METRICS

    words = set(out.stdout.replace("\u2502", " ").split())
    for m in METRICS.values():  # descriptions wrap within their column (see test_piped_metrics_list_wraps...)
        assert set(m.description.split()) <= words, m.name
    qrels_path, runs = cranfield_files
    out = rankwise_cli("compare", str(qrels_path), *map(str, runs), "-m", "ndcg@10,recall@100",
                       "--permutations", "200", "--resamples", "200")
    assert out.returncode == 0, out.stderr
    assert ELLIPSIS not in out.stdout
    assert "system_with_a_long_name_1" in out.stdout and "Holm-Bonferroni" in out.stdout


def test_piped_rag_and_probe_tables_are_whole():
    testset = Path(__file__).resolve().parents[2] / "examples" / "rich_testset.jsonl"
    out = rankwise_cli("eval-rag", str(testset), "-q", "-k", "1,3,4")
    assert out.returncode == 0, out.stderr
    assert ELLIPSIS not in out.stdout
    result = evaluate_rag(str(testset), "containment", k=[1, 3, 4])
    lines = out.stdout.splitlines()
    for case in result.per_query:
        row = next(line for line in lines if line.startswith(f"\u2502 {case} "))
        cells = [c.strip() for c in row.strip().strip("\u2502").split("\u2502")][1:]
        assert cells == [f"{result.per_query[case][n]:.4f}" for n in result.names], case
    out = rankwise_cli("probe", "--verdicts", "1,0,1,1,0,0,1,0,1,1,0,1")
    assert out.returncode == 0 and ELLIPSIS not in out.stdout
    assert "flip @12 1\u21920" in out.stdout


def test_width_option_folds_instead_of_cutting(cranfield_files):
    qrels_path, runs = cranfield_files
    out = rankwise_cli("--width", "60", "eval", str(qrels_path), str(runs[0]), "-m", ",".join(LONG_METRICS))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60
    assert ELLIPSIS not in out.stdout
    result = rankwise.evaluate(qrels_path, runs[0], LONG_METRICS)
    for name in result.names:
        assert any(name in line for line in lines), name
    env_width = rankwise_cli("eval", str(qrels_path), str(runs[0]), "-m", ",".join(LONG_METRICS),
                             env={"RANKWISE_WIDTH": "70"})
    assert env_width.returncode == 0 and max(len(line) for line in env_width.stdout.splitlines()) <= 70
    assert ELLIPSIS not in env_width.stdout
    bad = rankwise_cli("--width", "5", "metrics")
    assert bad.returncode == 2 and "--width" in bad.stderr


# ------------------------------------------------------------------------------------------ swap
# hint
def test_swapped_qrels_and_run_say_so(cranfield_files, tmp_path):
    qrels_path, runs = cranfield_files
    trec_qrels = tmp_path / "qrels.txt"
    trec_qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels_dict(qrels_path).items()
                                  for d, g in docs.items()), encoding="utf-8")
    out = rankwise_cli("eval", str(runs[0]), str(trec_qrels))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "did you swap QRELS and RUN?" in out.stderr
    assert "Traceback" not in out.stderr
    with pytest.raises(InputError, match="did you swap QRELS and RUN"):
        rankwise.evaluate(runs[0], trec_qrels)
    with pytest.raises(InputError, match="did you swap QRELS and RUN"):
        rankwise.load_run(trec_qrels)
    # the right order works, and an unrelated bad file gets no swap hint
    assert rankwise_cli("eval", str(trec_qrels), str(runs[0]), "-m", "P@5").returncode == 0
    junk = tmp_path / "junk.txt"
    junk.write_text("a b c\n", encoding="utf-8")
    out = rankwise_cli("eval", str(junk), str(runs[0]))
    assert out.returncode == 2 and "did you swap" not in out.stderr


# -------------------------------------------------------------------------------------- test-set
# fields
def test_common_field_aliases_are_read():
    class Document:  # LangChain's Document: page_content and metadata attributes
        def __init__(self, page_content, metadata):
            self.page_content, self.metadata = page_content, metadata

    ts = load_testset([
        {"question": "Capital of France?", "contexts": ["Paris is the capital of France.", "Lyon."],
         "ground_truth": "Paris", "reference_contexts": ["capital of France"]},
        {"question": "Boiling point?", "ground_truths": ["100 degrees", "212 F"],
         "contexts": [{"page_content": "Water boils at 100 degrees.",
                       "metadata": {"source": "physics.md", "start_index": 40, "id": "p#2"}},
                      Document("Ice melts at 0 degrees.", {"id": "p#3"})]},
        {"user_input": "Who?", "retrieved_contexts": [{"text": "Neil Armstrong", "score": 0.9, "id": "m1"}],
         "reference_context_ids": ["m1"]},
    ])
    a, b, c = ts.cases
    assert a.question == "Capital of France?" and [x.text for x in a.chunks][0].startswith("Paris")
    assert a.reference == "Paris" and a.reference_contexts[0].text == "capital of France"
    assert b.reference == "100 degrees\n212 F"
    first = b.chunks[0]
    assert (first.text, first.id, first.doc_id, first.start, first.end) == \
        ("Water boils at 100 degrees.", "p#2", "physics.md", 40, 67)
    assert (b.chunks[1].text, b.chunks[1].id) == ("Ice melts at 0 degrees.", "p#3")
    assert (c.chunks[0].id, c.chunks[0].score) == ("m1", 0.9)


def test_unrecognised_fields_are_named_with_the_accepted_names(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"query_text": "q?", "docs": ["a", "b"], "gold": ["a"]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_testset(path)
    message = str(err.value)
    for name in ("'docs'", "'gold'", "'query_text'", "retrieved_contexts", "contexts", "reference_contexts",
                 "ground_truth", "page_content"):
        assert name in message
    out = rankwise_cli("eval-rag", str(path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "'docs' (1 case)" in out.stderr
    # usable chunks but the ground truth under a name we do not know: a warning naming it
    with pytest.warns(RankwiseWarning, match="'gold' \\(1 case\\)"):
        load_testset([{"question": "q?", "contexts": ["a"], "gold": ["a"]}])


# -------------------------------------------------------------------------------------------
# warnings
def _duplicate_cases():
    return [{"id": "q1", "retrieved_contexts": [{"id": "c1", "text": "alpha beta"}, {"id": "c1", "text": "alpha beta"}],
             "reference_contexts": ["alpha"]},
            {"id": "q2", "retrieved_contexts": [{"id": "c2", "text": "gamma"}, {"id": "c2", "text": "gamma"}],
             "reference_contexts": ["delta"]},
            {"id": "q3", "retrieved_contexts": [{"id": "c3", "text": "alpha"}], "reference_contexts": ["alpha"]}]


def test_duplicate_ids_and_deep_cutoffs_warn_once_with_a_count(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_rag(_duplicate_cases(), "containment", k=[1, 5])
    messages = [str(w.message) for w in caught if issubclass(w.category, RankwiseWarning)]
    assert len(messages) == 2
    assert messages[0].startswith("2 cases list a chunk id more than once (case 'q1': 'c1' 2 times)")
    assert messages[1].startswith("K = 5 is larger than every retrieved list (the longest holds 2 chunks)")
    assert result.summary["warnings"] == messages
    # no warning when nothing is odd
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clean = evaluate_rag(_duplicate_cases()[2:], "containment", k=[1])
    assert not [w for w in caught if issubclass(w.category, RankwiseWarning)]
    assert "warnings" not in clean.summary

    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in _duplicate_cases()), encoding="utf-8")
    out = rankwise_cli("eval-rag", str(path), "-k", "1,5", "--format", "json")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines == [f"rankwise: warning: {m}" for m in messages]
    assert json.loads(out.stdout)["summary"]["warnings"] == messages


# ------------------------------------------------------------------------------------ reranker
# fails fast
def test_unloadable_reranker_fails_fast_naming_rerank(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "text": "BM25 ranks by term frequency."}) + "\n", encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "q1", "text": "what is bm25"}) + "\n", encoding="utf-8")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub")}
    started = time.perf_counter()
    out = rankwise_cli("run", "--corpus", str(corpus), "--queries", str(queries), "--rerank",
                       "cross-encoder/ms-marco-MiniLM-L-6-v2", "-o", str(tmp_path / "r.trec"), "--quiet", env=env)
    elapsed = time.perf_counter() - started
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--rerank" in out.stderr and "reranker" in out.stderr and "--model" not in out.stderr
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in out.stderr
    assert elapsed < 5.0, f"took {elapsed:.1f} s to refuse an uncached model"
    assert not (tmp_path / "r.trec").exists()
    missing = rankwise_cli("run", "--corpus", str(corpus), "--queries", str(queries), "--rerank",
                           str(tmp_path / "no-such-folder"), "-o", str(tmp_path / "r.trec"), "--quiet", env=env)
    assert missing.returncode == 2 and "--rerank" in missing.stderr and "does not exist" in missing.stderr


# ------------------------------------------------------------------------------------ a reason per
# verdict
def test_every_text_and_id_verdict_has_a_reason():
    cases = [{"id": "q",
              "retrieved_contexts": [
                  {"id": "c1", "text": "Intro. Paris is the capital of France. More.", "doc_id": "d", "start": 0,
                   "end": 44},
                  {"id": "c2", "text": "capital", "doc_id": "d", "start": 100, "end": 107},
                  {"id": "c3", "text": "nothing here", "doc_id": "e", "start": 0, "end": 12}],
              "reference_contexts": [{"text": "paris is the capital of france", "doc_id": "d", "start": 7, "end": 37},
                                     {"text": "Berlin", "doc_id": "d", "start": 95, "end": 200}],
              "reference_context_ids": ["c1", "c9"]}]
    reasons = {}
    for source in ("containment", "span", "fuzzy", "ids"):
        records = evaluate_rag(cases, source, k=3).records
        reasons[source] = [c.verdicts[source].reason for c in records[0].chunks]
        assert all(reasons[source]), source
    assert reasons["containment"] == [
        "contains reference passage 1 (chars 7\u201337 of the normalised chunk)",
        "lies inside reference passage 1 but holds only 7 letters/digits, under the evidence minimum of 20 "
        "(min_evidence_chars): a fragment, not evidence",
        "contains none of the 2 reference passages and lies inside none"]
    assert reasons["span"][0] == ("overlaps reference passage 1 by 30 chars (100% of the passage, 68% of the "
                                  "chunk): at least 50% of one of them")
    assert reasons["span"][2] == "no overlap with any of the 2 reference passage spans"
    assert reasons["fuzzy"][0] == ("similarity 1.00 to reference passage 1 >= threshold 0.8 (the passage matched "
                                   "within the chunk)")
    assert reasons["fuzzy"][2].startswith("no reference passage reaches similarity 0.8")
    assert reasons["ids"] == ["id c1 in the reference ids (grade 1)", "id c2 not in the reference ids",
                              "id c3 not in the reference ids"]


def test_human_labels_without_a_reason_say_where_the_label_is(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("query_id,rank,verdict,type,reason\nq,1,1,answer,\nq,2,0,irrelevant,off topic\n",
                      encoding="utf-8")
    cases = [{"id": "q", "retrieved_contexts": ["Paris is the capital.", "Lyon."], "reference_contexts": ["x"]}]
    records = evaluate_rag(cases, "human", labels=labels, k=2).records
    assert [c.verdicts["human"].reason for c in records[0].chunks] == \
        [f"labelled 1 (answer) at {labels}:2", "off topic"]


# ------------------------------------------------------------------------------ in the user's words
# (#19)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_library_parameter_names_become_the_commands_flags(tmp_path, cranfield_files):
    from rankwise.errors import in_user_words

    out = rankwise_cli("sweep", "--corpus", str(EXAMPLES / "corpus.jsonl"), "--testset",
                       str(EXAMPLES / "rich_testset.jsonl"), "--retriever", "bm25+rerank", "--out",
                       str(tmp_path / "sweep"), "--quiet", "--no-html")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("rankwise: error: 'bm25+rerank' needs a reranker: give --rerank (a cross-encoder")
    assert "rerank_model" not in out.stderr and "<input>" not in out.stderr
    qrels_path, runs = cranfield_files
    for bad in ("0", "-3"):  # --max-k 0 no longer sweeps 1..20 in silence
        out = rankwise_cli("compare", str(qrels_path), *map(str, runs), "--max-k", bad, "--permutations", "50")
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr == f"rankwise: error: Invalid value for '--max-k': {bad} is not in the range x>=1.\n"
    # the library keeps its own names; the CLI's table comes from the command's options
    err = InputError("max K must be at least 1, not 0", field="max_k")
    assert str(err) == "<input>: field 'max_k': max K must be at least 1, not 0"
    assert in_user_words(err, {"max_k": "--max-k"}) == "--max-k: max K must be at least 1, not 0"
    allow = InputError("queries differ; pass allow_query_mismatch=True to compare the shared ones")
    assert in_user_words(allow, {"allow_query_mismatch": "--allow-query-mismatch"}) == \
        "queries differ; pass --allow-query-mismatch=True to compare the shared ones"
    in_file = InputError("not a number", source="run.trec", line=3, field="score")
    assert in_user_words(in_file, {"score": "--score"}) == "run.trec:3: field 'score': not a number"


def test_null_reference_contexts_are_named(tmp_path):
    rows = [json.loads(line) for line in (EXAMPLES / "rich_testset.jsonl").read_text().splitlines()][:3]
    for row in rows:
        row["reference_contexts"] = None
    path = tmp_path / "nulls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = rankwise_cli("eval-rag", str(path))
    assert out.returncode == 2
    assert out.stderr == (f"rankwise: error: {path}: field 'reference_contexts': no case can be scored with "
                          "relevance 'containment': all 3 cases' reference_contexts are null, empty or absent "
                          "(the passages a relevant chunk must contain)\n")
    out = rankwise_cli("compare-rag", str(path), str(EXAMPLES / "rich_testset.jsonl"))
    assert out.returncode == 2 and out.stderr.startswith(
        "rankwise: error: system 'nulls': field 'reference_contexts': no case can be scored")
    with pytest.raises(InputError, match="the case's reference_contexts are null") as err:
        evaluate_rag(rows[:1], "containment")
    assert err.value.field == "reference_contexts"


def test_metric_typos_keep_the_cutoff_and_negative_cutoffs_say_so(cranfield_files):
    from rankwise.metrics.registry import parse_measures

    with pytest.raises(InputError, match=r"unknown metric 'ndgc@5'; did you mean ndcg@5\?"):
        parse_measures(["ndgc@5"])
    with pytest.raises(InputError, match=r"did you mean precision@20"):
        parse_measures(["precison@20"])
    for bad in ("recall@-1", "P_-3", "ndcg_cut.-5"):
        with pytest.raises(InputError, match=f"cutoff must be >= 1 in '{re.escape(bad)}'"):
            parse_measures([bad])
    qrels_path, runs = cranfield_files
    out = rankwise_cli("eval", str(qrels_path), str(runs[0]), "-m", "ndgc@5")
    assert out.returncode == 2
    assert out.stderr == ("rankwise: error: --metric: unknown metric 'ndgc@5'; did you mean ndcg@5? "
                          "(`rankwise metrics` lists them all)\n")
    out = rankwise_cli("eval", str(qrels_path), str(runs[0]), "-m", "recall@-1")
    assert out.stderr == "rankwise: error: --metric: cutoff must be >= 1 in 'recall@-1'\n"


def test_counts_agree_with_their_nouns(tmp_path):
    from rankwise._words import count
    from rankwise.report.console import summary_line

    assert (count(1, "case"), count(2, "case"), count(1, "query", "queries")) == ("1 case", "2 cases", "1 query")
    assert summary_line({"evaluated": 1}).startswith("1 query evaluated")
    one = tmp_path / "one.jsonl"
    one.write_text((EXAMPLES / "rich_testset.jsonl").read_text().splitlines()[1] + "\n", encoding="utf-8")
    out = rankwise_cli("eval-rag", str(one), "--records", str(tmp_path / "recs.jsonl"))
    assert out.returncode == 0, out.stderr
    assert f"records: {tmp_path / 'recs.jsonl'} (1 case)" in out.stderr and "1 cases" not in out.stderr


def test_a_file_of_blank_lines_has_no_rows(tmp_path, cranfield_files):
    qrels_path, runs = cranfield_files
    blank, empty = tmp_path / "blank.txt", tmp_path / "empty.txt"
    blank.write_text("\n\n   \n\t\n", encoding="utf-8")
    empty.write_bytes(b"")
    out = rankwise_cli("eval", str(blank), str(runs[0]))
    assert out.returncode == 2 and out.stderr == f"rankwise: error: {blank}: file has no rows: only blank lines\n"
    out = rankwise_cli("eval", str(empty), str(runs[0]))
    assert out.returncode == 2 and out.stderr == f"rankwise: error: {empty}: file is empty\n"
    blank_jsonl = tmp_path / "blank.jsonl"
    blank_jsonl.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="file has no rows: only blank lines"):
        load_testset(blank_jsonl)


def test_system_names_drop_format_and_role_endings():
    from rankwise.analysis.compare import system_names

    assert system_names(["runs/bm25.rec.jsonl", "dense.rag.jsonl", "x/hybrid.records.jsonl.gz", "a.trec"]) == \
        ["bm25", "dense", "hybrid", "a"]


def test_piped_metrics_list_wraps_its_descriptions():
    from rankwise.metrics.registry import METRICS

    out = rankwise_cli("metrics")
    assert out.returncode == 0 and ELLIPSIS not in out.stdout
    widest = max(len(line) for line in out.stdout.splitlines())
    assert widest <= 160, widest
    words = set(out.stdout.replace("│", " ").split())
    for m in METRICS.values():
        assert m.name in words, m.name
        assert set(m.description.split()) <= words, m.name


def test_a_file_s_fields_keep_the_file_s_words(tmp_path):
    """An error about a file (here the config file) names its keys as the file spells them, not as
    flags."""
    from click.testing import CliRunner

    from rankwise.cli import main

    cfg = tmp_path / "rankwise.toml"
    cfg.write_text('[llm]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nmax_retries = "x"\n')
    ts = tmp_path / "ts.jsonl"
    ts.write_text('{"id": "q1", "user_input": "q?", "reference": "r", "retrieved_contexts": ["a"]}\n')
    r = CliRunner().invoke(main, ["judge", str(ts), "--config", str(cfg), "--dry-run"])
    assert r.exit_code == 2
    assert r.stderr == f"rankwise: error: {cfg}: field 'max_retries': max_retries must be an integer, got 'x'\n"


def test_mlflow_help_promises_only_what_the_command_logs():
    """`--mlflow`'s help names the artifacts as the command's own output options; every option it
    names exists on that command where the command writes it (eval-rag has no --html: its help must
    not promise a report)."""
    import click

    from rankwise.cli import main

    logging = [c for c in main.commands.values() if any("--mlflow" in p.opts for p in c.params)]
    assert {c.name for c in logging} >= {"eval", "eval-rag", "compare", "compare-rag", "gate", "sweep"}
    for command in logging:
        help_text = next(p.help for p in command.params if "--mlflow" in getattr(p, "opts", []))
        assert "HTML report" not in help_text
        assert "the files this command writes" in help_text
        options = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        if command.name == "eval-rag":
            assert "--html" not in options and "--records" in options
