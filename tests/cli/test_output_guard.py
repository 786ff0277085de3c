"""One output guard for every command that writes (issue 20, item 2).

Every output option of every command is found in the click command tree; each one refuses (a) one of
the command's inputs, even with --force, (b) an existing file rankwise did not write, unless
--force, (c) a symlink to an input, even with --force; and --force lets a stranger's file be
replaced where allowed. Everything is refused before any work: the LLM commands point at a closed
port and are never reached."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rankwise._outputs import is_our_output
from rankwise.cli import main

pytest_plugins = ["pytester"]

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: a command that got past its checks would fail here
OUTPUT_FLAGS = {"--out", "-o", "--records", "--plot", "--html", "--report", "--rag-out", "--into", "--cache",
                "--judge-qrels"}
# options with an output-like name that only read (or that edit their one file in place)
NOT_OUTPUTS = {("probe", "--records"): "reads per-case records",
               ("cache stats", "--cache"): "reads the cache",
               ("cache clear", "--cache"): "deletes rows of the cache it names, its only file"}
FOLDERS = {("demo", "--out"), ("sweep", "--out")}  # output folders: tested below
CACHES = {"--cache", "--into"}  # read and written SQLite caches: no --force, a foreign file is refused by the cache

DOCS = {"doc1": "The Kestrel engine stores pages in a log. Checkpoints run every minute.",
        "doc2": "Replication copies the log to followers. A follower lags by seconds."}


def _walk(command, path=()):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))
    else:
        yield " ".join(path), command


def output_options() -> set[tuple[str, str]]:
    """(command, flag) of every output option in the command tree."""
    found = set()
    for name, command in _walk(main):
        for p in command.params:
            if isinstance(p, click.Option):
                for flag in set(p.opts) & OUTPUT_FLAGS:
                    if (name, flag) not in NOT_OUTPUTS and not (flag == "-o" and "--out" in p.opts):
                        found.add((name, flag))
    return found


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = {}
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    for d, text in DOCS.items():
        (corpus_dir / f"{d}.txt").write_text(text)
    f["corpus_dir"] = corpus_dir
    f["corpus"] = tmp_path / "corpus.jsonl"
    f["corpus"].write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in DOCS.items()))
    rows = []
    for i in range(8):
        d, text = list(DOCS.items())[i % 2]
        end = text.index(".") + 1
        rows.append({"id": f"q{i}", "user_input": f"What about {d}?", "reference": text[:end],
                     "reference_contexts": [{"text": text[:end], "doc_id": d, "start": 0, "end": end}],
                     "retrieved_contexts": [text[:end], "unrelated words"]})
    f["testset"] = tmp_path / "testset.jsonl"
    f["testset"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    f["rag_run"] = tmp_path / "bm25.rag.jsonl"
    f["rag_run"].write_text("".join(json.dumps(dict(r, retrieved_contexts=[
        {"id": f"{r['reference_contexts'][0]['doc_id']}#50-60", "text": "x" * 10, "doc_id":
         r["reference_contexts"][0]["doc_id"], "start": 50, "end": 60, "score": 1.0}])) + "\n" for r in rows))
    f["traces"] = tmp_path / "agent.spans.json"  # two retriever spans under one root: a test set with calls
    f["traces"].write_text("\n".join(json.dumps({
        "context": {"trace_id": "0x" + "1" * 32, "span_id": "0x" + s * 16}, "parent_id": p and "0x" + p * 16,
        "start_time": f"2026-01-01T00:00:0{i}Z", "attributes": {
            "openinference.span.kind": "RETRIEVER" if p else "AGENT", "input.value": f"q{i}?",
            **({"retrieval.documents.0.document.content": f"chunk {i}"} if p else {})}})
        for i, (s, p) in enumerate([("a", None), ("b", "a"), ("c", "a")])))
    f["ragas"] = tmp_path / "ragas.jsonl"
    f["ragas"].write_text("".join(json.dumps({"user_input": r["user_input"], "reference": r["reference"],
                                              "reference_contexts": [r["reference"]]}) + "\n" for r in rows))
    f["queries"] = tmp_path / "queries.jsonl"
    f["queries"].write_text('{"id": "q1", "text": "log checkpoints"}\n')
    f["qrels"] = tmp_path / "qrels.txt"
    f["qrels"].write_text("q1 0 d1 1\nq1 0 d2 0\n")
    f["a"], f["b"] = tmp_path / "a.trec", tmp_path / "b.trec"
    f["jqrels"], f["ja"], f["jb"] = tmp_path / "j.qrels", tmp_path / "ja.trec", tmp_path / "jb.trec"
    f["jqrels"].write_text("q1 0 doc1 1\nq1 0 doc2 0\n")  # judge-check: the corpus' documents
    f["ja"].write_text("q1 Q0 doc1 1 2 a\nq1 Q0 doc2 2 1 a\n")
    f["jb"].write_text("q1 Q0 doc2 1 2 b\nq1 Q0 doc1 2 1 b\n")
    f["a"].write_text("q1 Q0 d1 1 2 a\nq1 Q0 d2 2 1 a\n")
    f["b"].write_text("q1 Q0 d2 1 2 b\nq1 Q0 d1 2 1 b\n")
    for name in ("records", "records2"):
        f[name] = tmp_path / f"{name}.jsonl"
        assert _cli("eval-rag", f["testset"], "--records", f[name], "--quiet").exit_code == 0
    f["source_cache"] = tmp_path / "source.sqlite"
    from rankwise.llm.cache import ResponseCache

    ResponseCache(f["source_cache"]).close()
    (tmp_path / "my_retriever.py").write_text(
        "def search(question):\n"
        "    return [{'text': 'The Kestrel engine stores pages in a log.', 'doc_id': 'doc1', 'start': 0}]\n")
    return f


def _cli(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def _llm(cache):
    return ["--model", "m", "--base-url", DEAD, "--quiet", "--cache", cache]


def _args(command: str, flag: str, target, f: dict, tmp_path: Path) -> list:
    """A call of ``command`` writing ``flag`` to ``target`` (its other outputs elsewhere)."""
    cache = target if flag == "--cache" else tmp_path / "c.sqlite"
    records = target if flag == "--records" else tmp_path / "out-records.jsonl"
    args = {
        "eval-rag": ["eval-rag", f["testset"], "--quiet", flag, target],
        "compare": ["compare", f["qrels"], f["a"], f["b"], "-m", "map", flag, target],
        "compare-rag": ["compare-rag", f["records"], f["records2"], "-m", "precision@1", flag, target],
        "judge": ["judge", f["testset"], *_llm(cache), "--records", records],
        "judge-check": ["judge-check", f["jqrels"], f["ja"], f["jb"], "--corpus", f["corpus"], "--queries", f["queries"],
                        *_llm(cache), "--judge-qrels", target if flag == "--judge-qrels" else tmp_path / "judge.qrels"],
        "judge-retest": ["judge-retest", f["testset"], *_llm(cache)],
        "cache merge": ["cache", "merge", f["source_cache"], "--into", target],
        "calibrate": ["calibrate", f["records"], "--relevance", "containment", "--score-answers", "f1",
                      "--min-cases", "4", "--test-share", "0.5", flag, target],
        "run": ["run", "--corpus", f["corpus_dir"], "--queries", f["queries"], "--quiet", "--depth", "2",
                "--out", target if flag == "--out" else tmp_path / "run.trec",
                *(["--rag-out", target] if flag == "--rag-out" else [])],
        "run-adapter": ["run-adapter", "my_retriever:search", f["testset"], "--out", target],
        "answer": ["answer", f["testset"], *_llm(cache), "--records", records],
        "utility": ["utility", f["testset"], *_llm(cache), "--records", records],
        "position-curve": ["position-curve", f["testset"], *_llm(cache), "-k", "2",
                           *([flag, target] if flag != "--cache" else ["--out", tmp_path / "curve.json"])],
        "synth": ["synth", f["corpus"], *_llm(cache), "-n", "2",
                  "--out", target if flag == "--out" else tmp_path / "synth.jsonl"],
        "pool": ["pool", f["testset"], f["rag_run"], *_llm(cache),
                 "--out", target if flag == "--out" else tmp_path / "pooled.jsonl"],
        "import-testset": ["import-testset", f["ragas"], "--corpus", f["corpus"], "--out", target],
        "import-traces": ["import-traces", f["traces"], "--out", target],
        "export-testset": ["export-testset", f["testset"], "--to", "ragas", "--out", target],
        "sample-labels": ["sample-labels", f["testset"], "--relevance", "containment", "-n", "1", "--out", target],
    }[command]
    return args


def _refused(result, *words):
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("rankwise: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    for w in words:
        assert w in result.stderr, result.stderr


def _snapshot(f: dict) -> dict:
    return {p: p.read_bytes() for p in _input_files(f)}


def _input_files(f: dict) -> set[Path]:
    files = {p for k, p in f.items() if k != "corpus_dir"}
    return files | set(f["corpus_dir"].glob("*"))


def _an_input(command: str, flag: str, f: dict) -> Path:
    """One input of the call (for --plot: the first; for run: a document inside the corpus folder).
    """
    return {"eval-rag": f["testset"], "compare": f["a"], "compare-rag": f["records2"], "judge": f["testset"],
            "judge-check": f["jqrels"], "judge-retest": f["testset"],
            "cache merge": f["source_cache"], "calibrate": f["records"], "run": f["corpus_dir"] / "doc1.txt",
            "run-adapter": f["testset"], "answer": f["testset"], "utility": f["testset"],
            "position-curve": f["testset"], "synth": f["corpus"], "pool": f["rag_run"],
            "import-testset": f["ragas"], "export-testset": f["testset"], "sample-labels": f["testset"],
            "import-traces": f["traces"]}[command]


def test_every_output_option_is_covered():
    """A new command or option that writes fails here until it is guarded and listed."""
    covered = {(c, flag) for c, flag in output_options() if (c, flag) not in FOLDERS}
    assert covered == set(OPTIONS), covered ^ set(OPTIONS)


OPTIONS = sorted({("eval-rag", "--records"), ("compare", "--html"), ("compare", "--plot"),
                  ("compare-rag", "--html"), ("compare-rag", "--plot"), ("judge", "--records"), ("judge", "--cache"),
                  ("judge-check", "--judge-qrels"), ("judge-check", "--cache"), ("judge-retest", "--cache"),
                  ("cache merge", "--into"), ("calibrate", "--plot"), ("run", "--out"), ("run", "--rag-out"),
                  ("run-adapter", "--out"), ("answer", "--records"), ("answer", "--cache"),
                  ("position-curve", "--out"), ("position-curve", "--plot"), ("position-curve", "--cache"),
                  ("utility", "--records"), ("utility", "--cache"), ("synth", "--out"), ("synth", "--cache"),
                  ("pool", "--out"), ("pool", "--cache"), ("import-testset", "--out"),
                  ("export-testset", "--out"), ("sample-labels", "--out"), ("import-traces", "--out")})


@pytest.mark.parametrize(("command", "flag"), OPTIONS, ids=[f"{c}{f}" for c, f in OPTIONS])
def test_output_refuses_inputs_strangers_and_symlinks(command, flag, inputs, tmp_path):
    f = inputs
    before = _snapshot(f)
    victim = _an_input(command, flag, f)
    force = [] if flag in CACHES else ["--force"]
    # (a) an input, even with --force
    _refused(_cli(*_args(command, flag, victim, f, tmp_path), *force), flag, "input")
    # (c) a symlink to an input, even with --force
    link = tmp_path / ("link.png" if flag == "--plot" else "link.out")
    link.symlink_to(victim)
    _refused(_cli(*_args(command, flag, link, f, tmp_path), *force), flag, "input")
    assert _snapshot(f) == before
    # (b) a file rankwise did not write: refused without --force, left as it was
    stranger = tmp_path / ("holiday.png" if flag == "--plot" else "notes.txt")
    content = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40 if flag == "--plot" else b"my own notes\n"
    stranger.write_bytes(content)
    result = _cli(*_args(command, flag, stranger, f, tmp_path))
    if flag in CACHES:  # a cache: whatever it is, it is refused as a cache, one line, and left alone
        _refused(result, "rankwise cache")
    else:
        _refused(result, flag, "not a rankwise output", "--force")
    assert stranger.read_bytes() == content
    if flag in CACHES:
        return
    # --force lets the stranger's file go: the guard passes (the LLM commands then meet the closed
    # port)
    forced = _cli(*_args(command, flag, stranger, f, tmp_path), "--force")
    assert "not a rankwise output" not in forced.output and "would write" not in forced.output, forced.output
    if "--base-url" not in _args(command, flag, stranger, f, tmp_path):
        assert forced.exit_code == 0, forced.output
        assert stranger.read_bytes() != content and is_our_output(stranger)
        again = _cli(*_args(command, flag, stranger, f, tmp_path))  # ours now: rewritten without --force
        assert again.exit_code == 0, again.output
    assert _snapshot(f) == before


def test_run_out_into_the_corpus_folder_is_refused(inputs, tmp_path):
    f = inputs
    for target in (f["corpus_dir"] / "doc1.txt", f["corpus_dir"] / "new-run.trec"):
        _refused(_cli(*_args("run", "--out", target, f, tmp_path), "--force"), "--out", "input folder")
    assert (f["corpus_dir"] / "doc1.txt").read_text() == DOCS["doc1"]
    assert sorted(p.name for p in f["corpus_dir"].iterdir()) == ["doc1.txt", "doc2.txt"]


def test_output_folders(inputs, tmp_path):
    f = inputs
    sweep = ["sweep", "--corpus", f["corpus"], "--testset", f["testset"], "--quiet"]
    # (a) the corpus folder, or a folder inside it; (c) a symlink to it
    _refused(_cli("sweep", "--corpus", f["corpus_dir"], "--testset", f["testset"], "--out", f["corpus_dir"],
                  "--force"), "--out", "input")
    link = tmp_path / "linked"
    link.symlink_to(f["corpus_dir"])
    _refused(_cli("sweep", "--corpus", f["corpus_dir"], "--testset", f["testset"], "--out", link, "--force"),
             "--out", "input")
    _refused(_cli(*sweep, "--out", f["testset"], "--force"), "--out", "is a file")
    # (b) a stranger's file where we would write
    for command in (sweep, ["demo", "--quiet"]):
        folder = tmp_path / f"{command[0]}-out"
        folder.mkdir()
        (folder / "report.html").write_text("<html>mine</html>")
        _refused(_cli(*command, "--out", folder), "not a rankwise output", "--force")
        assert (folder / "report.html").read_text() == "<html>mine</html>"


def test_synth_and_pool_outputs_are_recognised_as_ours(tmp_path):
    synth_row = {"id": "s1", "user_input": "q?", "provenance": {"plan": "abc", "slot": 0}}
    pooled = {"id": "q1", "user_input": "q?", "pool_judged": []}
    curve = {"accuracy": [1.0], "counts": [1], "intervals": [[0, 1]], "weights": [1.0], "best": "log",
             "indistinguishable": [], "fits": []}
    for name, text in (("synth.jsonl", json.dumps(synth_row) + "\n"),
                       ("pool.jsonl", json.dumps({"id": "q0"}) + "\n" + json.dumps(pooled) + "\n"),
                       ("curve.json", json.dumps(curve, indent=2))):
        (tmp_path / name).write_text(text)
        assert is_our_output(tmp_path / name), name
    (tmp_path / "mine.jsonl").write_text('{"id": "q1", "provenance": {"author": "me"}}\n')
    assert not is_our_output(tmp_path / "mine.jsonl")


def test_plot_of_an_unsupported_type_is_one_line_before_any_call(inputs, tmp_path):
    f = inputs
    for command in (["position-curve", f["testset"], *_llm(tmp_path / "c.sqlite")],
                    ["calibrate", f["records"], "--relevance", "containment", "--score-answers", "f1"]):
        _refused(_cli(*command, "--plot", tmp_path / "out.txt"), "--plot", "unsupported image type '.txt'", "PNG")
        assert not (tmp_path / "out.txt").exists()


def test_foreign_sqlite_is_not_taken_as_a_cache(tmp_path):
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (x)")
    assert not is_our_output(db)


# ------------------------------------------------------------------ paths no file can be written to
# (issue 33, 5-6)

EXTRA = [("export-verdicts", "--phoenix")]  # an output named otherwise


def _bad_targets(tmp_path: Path, suffix: str) -> list[tuple[Path, str]]:
    """(a path no file can be written to, words of its refusal): looping links (one, two), a
    dangling link (its folder missing too), a link whose folder is a dangling link, a path under
    /proc."""
    one = tmp_path / f"loop{suffix}"
    one.symlink_to(one.name)
    a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    dangling = tmp_path / f"dangling{suffix}"
    dangling.symlink_to(tmp_path / "missing" / f"target{suffix}")
    gone = tmp_path / "gone"
    gone.symlink_to(tmp_path / "nowhere")
    return [(one, "symlink loop"), (a, "symlink loop"), (one / f"x{suffix}", "symlink loop"),
            (dangling, "which does not exist"), (gone / f"x{suffix}", "which does not exist"),
            (Path(f"/proc/self/rankwise{suffix}"), "under /proc")]


def _extra_args(command, flag, target, f, tmp_path):
    if (command, flag) == ("export-verdicts", "--phoenix"):
        return ["export-verdicts", f["records"], "--traces", f["traces"], "--phoenix", target]
    return _args(command, flag, target, f, tmp_path)


@pytest.mark.parametrize(("command", "flag"), OPTIONS + EXTRA, ids=[f"{c}{f}" for c, f in OPTIONS + EXTRA])
def test_links_that_loop_or_dangle_and_proc_are_refused_before_any_work(command, flag, inputs, tmp_path):
    """Issue 33, item 6: a symlink loop was a RuntimeError traceback, a dangling link was written
    through (creating its target). Now: one line naming the flag, exit 2, before any work; nothing
    created."""
    f = inputs
    before = sorted(p.name for p in tmp_path.iterdir())
    suffix = ".png" if flag == "--plot" else ".jsonl"
    for target, words in _bad_targets(tmp_path, suffix):
        force = [] if flag in CACHES else ["--force"]
        _refused(_cli(*_extra_args(command, flag, target, f, tmp_path), *force), flag, words)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "nowhere").exists()
    created = set(p.name for p in tmp_path.iterdir()) - set(before)
    assert created <= {"loop" + suffix, "a" + suffix, "b" + suffix, "dangling" + suffix, "gone"}, created


@pytest.mark.parametrize("command", ["demo", "sweep"])
def test_output_folders_that_loop_dangle_or_lie_under_proc(command, inputs, tmp_path):
    f = inputs
    base = ["demo", "--quiet"] if command == "demo" else ["sweep", "--corpus", f["corpus"], "--testset",
                                                          f["testset"], "--quiet"]
    for target, words in _bad_targets(tmp_path, ""):
        _refused(_cli(*base, "--out", target), "--out", words)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "nowhere").exists()


def test_the_guard_refuses_directories_and_read_only_places(tmp_path):
    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError

    with pytest.raises(InputError, match=r"option --records: is a directory"):
        check_outputs({"--records": tmp_path}, [])
    with pytest.raises(InputError, match=r"option --html: is under /proc"):
        check_outputs({"--html": "/proc/self/status"}, [], force=True)
    link = tmp_path / "to-proc.html"
    link.symlink_to("/proc/self/status")
    with pytest.raises(InputError, match=r"option --html: is under /proc"):
        check_outputs({"--html": link}, [], force=True)
    if os.geteuid() == 0:
        return  # root writes anywhere: read-only files and folders are only refused to others
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "r.jsonl").write_text("")
    mine = tmp_path / "mine.jsonl"
    mine.write_text("")
    mine.chmod(0o444)
    locked.chmod(0o500)
    try:
        with pytest.raises(InputError, match=r"option --records: cannot write here: no permission"):
            check_outputs({"--records": locked / "r.jsonl"}, [])
        with pytest.raises(InputError, match=r"option --records: is read-only"):
            check_outputs({"--records": mine}, [])
    finally:
        locked.chmod(0o700)


# ------------------------------------------------------------------ the baseline update target
# (issue 33, item 5)

def _runs(folder: Path) -> None:
    (folder / "qrels.txt").write_text("".join(f"q{i} 0 d1 1\n" for i in range(10)))
    (folder / "cand.trec").write_text("".join(f"q{i} Q0 d1 1 2 s\nq{i} Q0 x 2 1 s\n" for i in range(10)))


def test_library_baseline_update_refuses_bad_targets_with_one_line(tmp_path):
    from rankwise.errors import InputError
    from rankwise.testing import assert_no_regression

    _runs(tmp_path)
    targets = [(tmp_path, "is a directory"), *_bad_targets(tmp_path, ".json")]
    for target, words in targets:
        with pytest.raises(InputError, match=re.escape(words)) as caught:
            assert_no_regression(target, tmp_path / "cand.trec", ["mrr"], qrels=tmp_path / "qrels.txt",
                                 update=True)
        assert "\n" not in str(caught.value) and "baseline" in str(caught.value)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "nowhere").exists()
    good = tmp_path / "base.json"  # and a good one is written (atomically: no temporary left)
    assert assert_no_regression(good, tmp_path / "cand.trec", ["mrr"], qrels=tmp_path / "qrels.txt",
                                update=True) is None
    assert json.loads(good.read_text())["mean"]["mrr"] == 1.0
    assert not [p for p in tmp_path.iterdir() if "tmp" in p.name]


def test_pytest_plugin_baseline_update_target_is_a_usage_error(pytester):
    from integrations.test_integrations_pytest import LOAD

    _runs(pytester.path)
    pytester.makepyfile(test_gate_here="""
from rankwise.testing import assert_no_regression

def test_gate(rankwise_baseline):
    assert_no_regression(rankwise_baseline, "cand.trec", metrics=["mrr"], qrels="qrels.txt")
""")
    (pytester.path / "folder").mkdir()
    links = _bad_targets(pytester.path, ".json")  # a loop, a dangling link (its folder missing too)
    cases = [("folder", "is a directory"), ("/proc/self/base.json", "under /proc"), links[0], links[3]]
    for target, words in cases:
        # in a process of its own: an in-process run drops the modules it imported (pytester's
        # snapshot), and MLflow's tracing, imported again afterwards, loses its traces (the fuzz of
        # real MLflow traces in tests/conformance then reads none)
        result = pytester.runpytest_subprocess(*LOAD, "-p", "no:cacheprovider", "--rankwise-baseline", target,
                                               "--rankwise-update-baseline")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (target, result.stdout.str(), result.stderr.str())
        err = result.stderr.str()
        assert "Traceback" not in err and "option --rankwise-baseline" in err and words in err, err
    assert not (pytester.path / "missing").exists() and not (pytester.path / "nowhere").exists()


def test_github_gate_html_target_is_checked_before_the_gate(tmp_path, capsys, monkeypatch):
    from rankwise.integrations.github import main as github_main

    _runs(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
    for target, words in [(tmp_path, "is a directory"), *_bad_targets(tmp_path, ".html")]:
        code = github_main(["--baseline", str(tmp_path / "cand.trec"), "--candidate", str(tmp_path / "cand.trec"),
                            "--qrels", str(tmp_path / "qrels.txt"), "--metrics", "mrr", "--html", str(target)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "--html" in err and words in err, err
    assert not (tmp_path / "missing").exists()
    assert summary.read_text().count("rankwise gate: bad input") == 7 and "option --html: is under /proc" in \
        summary.read_text()
