"""Nothing lost on SIGTERM or Ctrl-C (issue 33, item 1): every file a command writes is written
whole or not at all, and a signal that lands while it is written waits for the end of the write,
then stops the command (exit 143 / 130).

Each command runs as a real process (forked from the test's, tests/_forked.py) over an earlier
output of its own. The test watches the process's open files (``/proc/PID/fd``): once it holds a
file in the output folder open for writing and at least a random number of bytes are written, the
process is stopped (SIGSTOP), the write is checked to be still under way, SIGTERM (or SIGINT) is
sent and the process continued. No sleeps and no races: the signal lands inside the write, at a
random byte. Then: exit 143 (130), one line, every output either the earlier file byte for byte or a
complete new one (never cut), no temporary file left behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from _forked import cli_popen
from rankwise.cli import main

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
DEAD = "http://127.0.0.1:9/v1"


# ------------------------------------------------------------------------------------------ the
# signal's aim

def _writing(pid: int, folder: Path, at_least: int) -> tuple[str, int] | None:
    """(path, bytes so far) of a file under ``folder`` the process has open for writing, if any."""
    root = str(folder.resolve()) + os.sep
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if not target.startswith(root):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                flags = next(int(line.split()[1], 8) for line in fh if line.startswith("flags:"))
            if flags & os.O_ACCMODE == os.O_RDONLY:
                continue
            size = os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except (OSError, StopIteration, ValueError):
            continue
        if size >= at_least:
            return target.removesuffix(" (deleted)"), size
    return None


def _signal_mid_write(args: list, folder: Path, at_least: int, tmp: Path, *, signum: int = signal.SIGTERM,
                      cwd: Path | None = None, limit: float = 180.0) -> tuple[int, str, tuple[str, int] | None]:
    """Run ``args``; send ``signum`` while it writes a file under ``folder`` with ``at_least`` bytes
    in it. (return code, stderr, (file, bytes) the signal landed in, or None when every write ended
    unseen)."""
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    with open(out, "w") as so, open(err, "w") as se:  # files, not pipes: a full pipe would stall the command
        if args and args[0] == "python":  # a Python program of the user's (not the command line)
            proc = subprocess.Popen([sys.executable, *map(str, args[1:])], env=ENV, stdout=so, stderr=se, cwd=cwd)
        else:
            proc = cli_popen([str(a) for a in args], env=ENV, stdout=so, stderr=se, cwd=cwd)
    hit, deadline = None, time.monotonic() + limit
    try:
        while proc.poll() is None and hit is None:
            if time.monotonic() > deadline:
                pytest.fail("the command never wrote its output")
            if _writing(proc.pid, folder, at_least) is None:
                time.sleep(0.0005)
                continue
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                hit = _writing(proc.pid, folder, at_least)  # still inside the write, now frozen
                if hit is not None:
                    os.kill(proc.pid, signum)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.read_text(), hit


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith((".rankwise-tmp", ".tmp"))]


# ------------------------------------------------------------------------------------------
# complete files

def _lines(data: bytes, full: bytes) -> bool:
    """Text written line by line: as many lines as the full file, the last one ended."""
    return data.endswith(b"\n") and data.count(b"\n") == full.count(b"\n")


def _jsonl(data: bytes, full: bytes) -> bool:
    try:
        [json.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError:
        return False
    return _lines(data, full)


def _json(data: bytes, full: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _parquet(data: bytes, full: bytes) -> bool:
    import io

    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(data)).num_rows == pq.read_table(io.BytesIO(full)).num_rows
    except Exception:  # noqa: BLE001 (pyarrow's errors for a cut file vary)
        return False


COMPLETE: dict[str, Callable[[bytes, bytes], bool]] = {
    ".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".trec": _lines, ".csv": _lines,
    ".html": lambda data, full: data.rstrip().endswith(b"</html>"),
    ".png": lambda data, full: data.endswith(b"IEND\xaeB`\x82"),
}


# ------------------------------------------------------------------------------------------ the
# inputs

TEXT = "The Kestrel engine stores pages in a write-ahead log. Checkpoints run every minute. "


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """Inputs big enough that each write takes a while (megabytes)."""
    root = tmp_path_factory.mktemp("inputs")
    f: dict[str, Path] = {}
    n = 400
    docs = {f"doc{d}": f"{TEXT}Document {d} on topic {d % 37}. " + "More words about pages and logs. " * 20
            for d in range(100)}
    f["corpus"] = root / "corpus.jsonl"
    f["corpus"].write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in docs.items()))
    rows = []
    for i in range(n):
        d = f"doc{i % 100}"
        ref = docs[d][:56]
        rows.append({"id": f"q{i}", "user_input": f"Where does Kestrel store pages, case {i}?", "reference": ref,
                     "reference_contexts": [{"text": ref, "doc_id": d, "start": 0, "end": 56}],
                     "retrieved_contexts": [f"{ref} Chunk {j} of case {i}. " + "filler words " * 10
                                            for j in range(8)]})
    f["testset"] = root / "testset.jsonl"
    f["testset"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    f["queries"] = root / "queries.jsonl"
    f["queries"].write_text("".join(json.dumps({"id": r["id"], "text": r["user_input"]}) + "\n" for r in rows))
    f["ragas"] = root / "ragas.jsonl"
    f["ragas"].write_text("".join(json.dumps({"user_input": r["user_input"], "reference": r["reference"],
                                              "reference_contexts": [r["reference"]]}) + "\n" for r in rows))
    f["qrels"] = root / "qrels.txt"
    f["qrels"].write_text("".join(f"q{i} 0 doc{i % 100} 1\n" for i in range(n)))
    for name, shift in (("a", 0), ("b", 1)):
        f[name] = root / f"{name}.trec"
        f[name].write_text("".join(f"q{i} Q0 doc{(i + j + shift) % 100} {j + 1} {100 - j} {name}\n"
                                   for i in range(n) for j in range(50)))
    f["traces"] = root / "spans.jsonl"  # one retriever span per trace (console exporter), 8 documents each
    spans = []
    for i in range(n):
        t, s = f"0x{i + 1:032x}", f"0x{i + 1:016x}"
        attrs = {"openinference.span.kind": "RETRIEVER", "input.value": rows[i]["user_input"]}
        for j in range(8):
            attrs[f"retrieval.documents.{j}.document.content"] = rows[i]["retrieved_contexts"][j]
            attrs[f"retrieval.documents.{j}.document.id"] = f"c{i}-{j}"
        spans.append({"context": {"trace_id": t, "span_id": s}, "parent_id": None,
                      "start_time": "2026-01-01T00:00:00Z", "attributes": attrs})
    f["traces"].write_text("".join(json.dumps(s) + "\n" for s in spans))
    for name, cut in (("records", None), ("records2", 6)):
        f[name] = root / f"{name}.jsonl"
        ts = f["testset"] if cut is None else root / "testset2.jsonl"
        if cut is not None:
            ts.write_text("".join(json.dumps(dict(r, retrieved_contexts=r["retrieved_contexts"][:cut])) + "\n"
                                  for r in rows))
        result = CliRunner().invoke(main, ["eval-rag", str(ts), "--records", str(f[name]), "--quiet"])
        assert result.exit_code == 0, result.output
    f["imported"] = root / "imported.jsonl"
    f["imported_records"] = root / "imported-records.jsonl"
    for args in (["import-traces", f["traces"], "--testset", f["testset"], "--out", f["imported"]],
                 ["eval-rag", f["imported"], "--records", f["imported_records"], "--quiet"]):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    (root / "my_retriever.py").write_text(
        "CHUNKS = [{'text': 'The Kestrel engine stores pages in a write-ahead log. ' + 'x ' * 200, "
        "'doc_id': 'doc1', 'start': 0} for _ in range(10)]\n"
        "def search(question):\n    return CHUNKS\n")
    f["root"] = root
    return f


def _commands(f: dict[str, Path], out: Path) -> dict[str, list]:
    """command -> its arguments, writing into the folder ``out``."""
    return {
        "eval-rag": ["eval-rag", f["testset"], "--records", out / "records.jsonl", "--quiet"],
        "run": ["run", "--corpus", f["corpus"], "--queries", f["queries"], "--depth", "20", "--quiet",
                "--out", out / "run.trec", "--rag-out", out / "rag.jsonl"],
        "run-adapter": ["run-adapter", "my_retriever:search", f["testset"], "--out", out / "records.jsonl"],
        "compare": ["compare", f["qrels"], f["a"], f["b"], "-m", "map,ndcg@10", "--html", out / "report.html",
                    "--plot", out / "plot.png"],
        "compare-rag": ["compare-rag", f["records"], f["records2"], "-m", "recall@5",
                        "--html", out / "report.html", "--plot", out / "plot.png"],
        "import-testset": ["import-testset", f["ragas"], "--corpus", f["corpus"], "--out", out / "testset.jsonl"],
        "export-testset": ["export-testset", f["testset"], "--to", "ragas", "--out", out / "testset.jsonl"],
        "import-traces": ["import-traces", f["traces"], "--out", out / "testset.jsonl"],
        "export-verdicts": ["export-verdicts", f["imported_records"], "--traces", f["traces"],
                            "--testset", f["testset"], "--phoenix", out / "evals.jsonl"],
        "export-verdicts-parquet": ["export-verdicts", f["imported_records"], "--traces", f["traces"],
                                    "--testset", f["testset"], "--phoenix", out / "evals.parquet"],
        "sample-labels": ["sample-labels", f["records"], "--relevance", "containment", "-n", "300",
                          "--out", out / "labels.csv"],
        "sweep": ["sweep", "--corpus", f["corpus"], "--testset", f["testset"], "--chunk-size", "300,600",
                  "--depth", "10", "--quiet", "--out", out / "sweep"],
    }


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _check_after_signal(args: list, out: Path, tmp: Path, cwd: Path, signum: int, seed: int) -> str:
    """The command run once in full, then again with ``signum`` at a random byte of a write: what it
    left."""
    first = CliRunner().invoke(main, [str(a) for a in args]) if cwd is None else None
    if first is not None:
        assert first.exit_code == 0, first.output
    else:
        rc, err, _ = _signal_mid_write(args, out, 1 << 62, tmp, cwd=cwd)  # never signalled: a full run
        assert rc == 0, err
    before = _files(out)
    assert before, "the command wrote nothing"
    rng = random.Random(seed)
    biggest = max(len(b) for b in before.values())
    for at_least in (rng.randrange(1, max(2, biggest // 2)), 1, 1):
        rc, err, hit = _signal_mid_write(args, out, at_least, tmp, signum=signum, cwd=cwd)
        if hit is not None:
            break
        assert rc == 0, err  # every write ended before it was seen: run again, aiming earlier
    else:
        pytest.fail("no write was ever caught under way")
    where = f"(seed {seed}: signal in {hit[0]} at byte {hit[1]})"
    assert rc == 128 + signum, f"{where} exit {rc}: {err}"
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("rankwise: interrupted"), f"{where} {err}"
    assert not _temporaries(out), f"{where} temporary files left: {_temporaries(out)}"
    after = _files(out)
    for path, data in after.items():  # the earlier file, or a complete new one (as many lines as a full run's)
        if before.get(path) != data:
            assert COMPLETE[path.suffix](data, before.get(path, b"")), f"{where} {path.name} is cut: {len(data)} bytes"
    assert set(before) <= set(after), f"{where} lost: {set(before) - set(after)}"
    return hit[0]


OFFLINE = ["eval-rag", "run", "run-adapter", "compare", "compare-rag", "import-testset", "export-testset",
           "import-traces", "export-verdicts", "export-verdicts-parquet", "sample-labels", "sweep"]


@pytest.mark.parametrize("command", OFFLINE)
def test_sigterm_during_a_write_keeps_every_file_whole(command, data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    args = _commands(data, out)[command]
    cwd = data["root"] if command == "run-adapter" else None
    seed = random.randrange(1 << 30)
    _check_after_signal(args, out, tmp_path, cwd, signal.SIGTERM, seed)


def test_ctrl_c_during_a_write_exits_130_with_the_file_whole(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _check_after_signal(_commands(data, out)["eval-rag"], out, tmp_path, None, signal.SIGINT,
                        random.randrange(1 << 30))


def test_calibrate_plot(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    args = ["calibrate", data["records"], "--relevance", "containment", "--score-answers", "f1", "--min-cases", "4",
            "--test-share", "0.5", "--plot", out / "ranking.png"]
    _check_after_signal(args, out, tmp_path, None, signal.SIGTERM, random.randrange(1 << 30))


# ------------------------------------------------------------------------------------------ the LLM
# commands The first run asks the loopback server and fills the cache; the signalled one answers
# from the cache and writes: the signal lands in the write of its records or test set. (Before, the
# judge's writes ignored a SIGTERM: the judge exited 0.)

def _eiffel(path: Path, n: int) -> Path:
    texts = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
             "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "user_input": "When was the Eiffel Tower completed?",
                                 "reference": "It was completed in 1889.",
                                 "reference_contexts": [{"text": texts[0], "doc_id": f"d{i}", "start": 0,
                                                         "end": len(texts[0])}],
                                 "retrieved_contexts": [f"{t} (case {i}) " + "more words " * 30 for t in texts]})
                     + "\n")
    return path


@pytest.mark.parametrize("command", ["judge", "pool"])
def test_judge_and_pool(command, srv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ts, cache = _eiffel(tmp_path / "ts.jsonl", 150), tmp_path / "c.sqlite"
    llm = ["--model", "judge-test", "--base-url", srv.base_url, "--cache", cache, "--quiet"]
    if command == "judge":
        args = ["judge", ts, *llm, "--records", out / "records.jsonl"]
    else:
        run = tmp_path / "sys.rag.jsonl"
        run.write_text("".join(json.dumps(dict(json.loads(line), retrieved_contexts=[
            {"id": f"d{i}#{10 * j}", "text": f"The Eiffel Tower was completed in 1889 (case {i}, part {j}).",
             "doc_id": f"d{i}", "start": 10 * j + 10, "end": 10 * j + 19, "score": 1.0} for j in range(4)])) + "\n"
            for i, line in enumerate(ts.read_text().splitlines())))
        args = ["pool", ts, run, *llm, "--out", out / "pooled.jsonl"]
    _check_after_signal(args, out, tmp_path, None, signal.SIGTERM, random.randrange(1 << 30))


@pytest.fixture(scope="module")
def generator():
    from generator_server import running_generator

    with running_generator() as gen:
        yield gen


@pytest.mark.parametrize("command", ["answer", "utility", "position-curve"])
def test_generator_commands(command, generator, tmp_path):
    from generator_server import key_of, synthetic_cases, write_cases

    out = tmp_path / "out"
    out.mkdir()
    cases = synthetic_cases(60, k=5)
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7})
    ts, cache = write_cases(cases, tmp_path / "ts.jsonl"), tmp_path / "c.sqlite"
    llm = ["--model", "sim", "--base-url", generator.base_url, "--cache", cache, "--quiet"]
    if command == "position-curve":
        args = ["position-curve", ts, *llm, "-k", "5", "--score", "em", "--out", out / "curve.json",
                "--plot", out / "curve.png"]
    else:
        args = [command, ts, *llm, "--records", out / "records.jsonl"]
    _check_after_signal(args, out, tmp_path, None, signal.SIGTERM, random.randrange(1 << 30))


# ------------------------------------------------------------------------------------------ the
# baseline update

UPDATE = """
import sys
from rankwise.testing import assert_no_regression
assert_no_regression(sys.argv[1], sys.argv[2], ["mrr"], qrels=sys.argv[3], update=True)
print("updated")
"""


def test_baseline_update_in_a_python_program(data, tmp_path):
    """``assert_no_regression(update=True)`` in a user's program that does not handle SIGTERM: the
    baseline (a copy of the candidate's run) is written whole, then the program ends by the signal,
    as it would have."""
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "update.py"
    script.write_text(UPDATE)
    big = tmp_path / "cand.trec"  # a candidate run of some megabytes: its copy takes a while
    big.write_text(data["a"].read_text() * 8)
    baseline = out / "baseline.trec"
    baseline.write_text(data["b"].read_text())
    old = baseline.read_bytes()
    args = ["python", script, baseline, big, data["qrels"]]
    for at_least in (random.randrange(1, len(old)), 1, 1):
        rc, err, hit = _signal_mid_write(args, out, at_least, tmp_path, cwd=tmp_path)
        if hit is not None:
            break
        assert rc == 0, err
    else:
        pytest.fail("no write was ever caught under way")
    assert rc == -signal.SIGTERM, (rc, err)  # ended by the signal, after the write
    assert baseline.read_bytes() in (old, big.read_bytes()), "the baseline is cut"
    assert baseline.read_bytes() == big.read_bytes()  # the write finished first
    assert not _temporaries(out)
