"""Every command shown in README.md and docs/*.md runs here, and every transcript shown is the real
output.

Commands are read from the fenced blocks of each page: ```bash / ```sh / ```shell blocks (every line
that calls ``rankwise`` or ``python -m rankwise``; ``make demo`` is ``rankwise demo``, as the
Makefile says) and ```console blocks or unlabelled blocks with ``$ `` prompts, whose following lines
are the output shown. The commands of one page run in order, in one temporary working folder
prepared by that page's setup (:data:`SETUPS`), in-process through click's CliRunner.
``$RANKWISE_SHARED_DATA`` names the shared test collections; ``--base-url`` is pointed at a loopback
fake server (tests/llm_server.py, tests/generator_server.py, tests/synth_server.py) that answers
like a model would.

A command passes when it exits 0 (2 when its transcript shows ``rankwise: error:``, N when its
comment says ``# exits N``) and, when the page shows its output, when that output matches after
timings are normalised (a ``...`` line in the page stands for any number of lines).
``RANKWISE_REGEN_DOCS=1`` rewrites the transcripts that differ with the actual output instead of
failing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _extras import need
from conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
REGEN = os.environ.get("RANKWISE_REGEN_DOCS", "") not in ("", "0")
WIDTH = {"README.md": "100"}  # transcripts are shown as a terminal this wide prints them (120 unless said)


@dataclass
class Command:
    """One command of a page: where it is, what it runs and the output the page shows (None: none
    shown)."""

    page: str
    line: int
    text: str
    expected: list[str] | None = None
    span: tuple[int, int] | None = None  # 0-based line range of the shown output in the page
    args: list[str] = field(default_factory=list)
    redirect: str | None = None
    exit_code: int = 0
    env: dict[str, str] = field(default_factory=dict)  # VAR=value prefixes (kept for a python -m script)


# ---------------------------------------------------------------------------------------------
# extraction
def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language, 0-based line of the first content line, content lines) of every fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        yield lang, start, lines[start:j]
        i = j + 1


def _rankwise_args(line: str) -> tuple[list[str], str | None] | None:
    """The arguments after ``rankwise`` (and a ``> FILE`` redirect), or None when the line does not
    run rankwise."""
    if not re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(rankwise|make demo|\S*python3? -m rankwise)\b", line):
        return None
    tokens = shlex.split(line, comments=True)
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        tokens = tokens[1:]  # VAR=value prefixes
    if len(tokens) >= 3 and re.fullmatch(r"(\S*/)?python3?", tokens[0]) and tokens[2] in SCRIPTS:
        tokens = ["rankwise", f"-m {tokens[2]}", *tokens[3:]]  # a script of the package: run_command calls it
    if tokens[:2] == ["make", "demo"]:
        tokens = ["rankwise", "demo"]
    if len(tokens) >= 3 and re.fullmatch(r"(\S*/)?python3?", tokens[0]) and tokens[1:3] == ["-m", "rankwise"]:
        tokens = ["rankwise", *tokens[3:]]
    if not tokens or tokens[0] != "rankwise":
        return None
    args, redirect = [], None
    it = iter(tokens[1:])
    for tok in it:
        if tok == ">":
            redirect = next(it)
        elif tok.startswith(">") and len(tok) > 1:
            redirect = tok[1:]
        else:
            args.append(os.path.expandvars(tok))
    return args, redirect


def _logical_lines(lines: list[str]) -> Iterator[tuple[int, str, int]]:
    """(index of the first line, text with ``\\`` continuations joined, index after it) for each
    line of a block."""
    i = 0
    while i < len(lines):
        first, text = i, lines[i]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        yield first, text, i


def page_commands(path: Path) -> list[Command]:
    """Every command shown on a page, in order, with the transcript that follows it when there is
    one."""
    name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    found: list[Command] = []
    for lang, start, lines in fenced_blocks(path.read_text(encoding="utf-8")):
        prompted = any(line.startswith("$ ") for line in lines)
        if lang not in SHELL_LANGS and not (lang == "" and prompted):
            continue
        current: Command | None = None
        exit_of: Command | None = None
        for first, text, nxt in _logical_lines(lines):
            if prompted and not text.startswith("$ "):
                if exit_of is not None and text.strip().isdigit():
                    exit_of.exit_code, exit_of = int(text.strip()), None
                elif current is not None and current.expected is not None:
                    current.expected.append(text)
                    current.span = (current.span[0], start + nxt)
                continue
            body = text[2:] if text.startswith("$ ") else text
            if body.strip() == "echo $?" and found:
                exit_of = found[-1]  # the next line shown is the exit code of the command before
                current = None
                continue
            parsed = None if body.lstrip().startswith("#") or not body.strip() else _rankwise_args(body)
            if parsed is None:
                current = None
                continue
            exits = re.search(r"#.*\bexits? (\d)\b", body)
            current = Command(name, start + first + 1, body.strip(), args=parsed[0], redirect=parsed[1],
                              exit_code=int(exits.group(1)) if exits else 0,
                              env=dict(re.findall(r"^([A-Za-z_]\w*)=(\S*)\s+", body.strip())))
            if prompted:
                current.expected, current.span = [], (start + nxt, start + nxt)
            found.append(current)
    for cmd in found:
        if cmd.expected is not None:
            while cmd.expected and not cmd.expected[-1].strip():
                cmd.expected.pop()
                cmd.span = (cmd.span[0], cmd.span[1] - 1)
            if any(line.startswith("rankwise: error:") for line in cmd.expected):
                cmd.exit_code = 2
            if not cmd.expected:
                cmd.expected, cmd.span = None, None
    return found


# ------------------------------------------------------------------------------------------------
# running
_PROGRESS = re.compile(r" \d+/\d+ +\d+:\d\d:\d\d( +-?[-:\d]+)?\s*$")
_TIME = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|min)\b|\b\d+(\.\d+)? requests/s\b")


def normalise(lines: list[str], workdir: Path) -> list[str]:
    """Timings become ``<time>``, the working folder ``.``; trailing spaces and blank edges go."""
    out = [_TIME.sub("<time>", line.replace(str(workdir) + os.sep, "").replace(str(workdir), ".")).rstrip()
           for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; an expected ``...`` line stands for any number of actual lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


@dataclass
class Servers:
    """The loopback fake models, started when a page first needs one."""

    stack: ExitStack
    started: dict[str, object] = field(default_factory=dict)

    def url(self, kind: str) -> str:
        if kind not in self.started:
            if kind == "generator":
                from generator_server import running_generator as start
            elif kind == "synth":
                from synth_server import running_server as start
            else:
                from llm_server import running_server as start
            self.started[kind] = self.stack.enter_context(start())
            settings = Path(f".{kind}-server.json")  # a page's setup may tell the fake model what to play
            if settings.exists():
                import json

                self.started[kind].configure(**json.loads(settings.read_text(encoding="utf-8")))
        return self.started[kind].base_url


SERVER_OF = {"answer": "generator", "position-curve": "generator", "utility": "generator", "calibrate": "generator",
             "synth": "synth"}  # every other command that calls a model calls the judge's server


SHOWN_URL = "http://127.0.0.1:8765/v1"  # what a page shows as the server's address when it gives no --base-url


def _with_server(args: list[str], servers: Servers) -> tuple[list[str], tuple[str, str] | None]:
    """Point ``--base-url`` (given or not) at the loopback server that plays the model this command
    calls; also (loopback URL, URL the page shows) so that the output can say what the page says."""
    if "--model" not in args and not any(a.startswith("llm:") for a in args):
        return args, None
    url = servers.url(SERVER_OF.get(args[0], "judge"))
    shown = next((b for a, b in zip(args, args[1:], strict=False) if a == "--base-url"), SHOWN_URL)
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--base-url":
            skip = True
            continue
        if not a.startswith("--base-url="):
            out.append(a)
    return [*out, "--base-url", url], (url, shown)


SCRIPTS = {"rankwise.integrations.github"}  # `python -m` scripts of the package the pages show (main(argv) -> code)


def run_script(cmd: Command) -> tuple[int, list[str], str]:
    """A ``python -m`` script of the package, in-process: its ``main(argv)`` with the command's
    VAR=value prefixes set; (exit code, stdout and stderr lines, traceback or '')."""
    import contextlib
    import importlib
    import io
    import traceback

    out = io.StringIO()
    saved = {k: os.environ.get(k) for k in cmd.env}
    os.environ.update(cmd.env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = importlib.import_module(cmd.args[0][3:]).main(cmd.args[1:])
        crash = ""
    except Exception as exc:  # a crash is reported, not raised
        code, crash = 1, "".join(traceback.format_exception(exc))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue().splitlines(), crash


def run_command(cmd: Command, workdir: Path, servers: Servers) -> tuple[int, list[str], str]:
    """Run one command in-process; (exit code, output lines as a terminal shows them, traceback or
    '')."""
    from click.testing import CliRunner

    from rankwise.cli import main

    if cmd.args and cmd.args[0].startswith("-m "):
        return run_script(cmd)

    width = WIDTH.get(cmd.page, "120")
    env = {"RANKWISE_WIDTH": width, "RANKWISE_CACHE": str(workdir / ".llm-cache.sqlite"),
           "OPENAI_API_KEY": "sk-loopback", "COLUMNS": width}
    args, urls = _with_server(cmd.args, servers)
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=True)
    output = result.output
    if cmd.redirect is not None:
        (workdir / cmd.redirect).write_text(result.stdout, encoding="utf-8")
        output = result.stderr
    lines = [line for line in output.splitlines() if not _PROGRESS.search(line)]  # a terminal overwrites these
    while lines and not lines[0].strip():
        lines.pop(0)
    if urls is not None:
        lines = [line.replace(*urls) for line in lines]
    crash = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        crash = "".join(traceback.format_exception(result.exception))
    return result.exit_code, lines, crash


def regenerate(page: Path, replacements: list[tuple[tuple[int, int], list[str]]]) -> None:
    """Write the actual outputs in place of the shown ones (bottom up, so earlier spans stay valid).
    """
    lines = page.read_text(encoding="utf-8").split("\n")
    for (start, end), new in sorted(replacements, reverse=True):
        new = [line.rstrip() for line in new]
        while new and not new[-1]:
            new.pop()
        lines[start:end] = new
    page.write_text("\n".join(lines), encoding="utf-8")


def on_spark(cmd: Command) -> bool:
    """Does the command start a Spark session (``--engine spark``)? Those run in their own, slower
    test."""
    return any(a == "--engine" and b == "spark" for a, b in zip(cmd.args, cmd.args[1:], strict=False))


def check_page(page: Path, workdir: Path, servers: Servers, *, spark: bool = False,
               outputs: dict[int, list[str]] | None = None) -> list[str]:
    """Run every command of a page (or only its Spark ones) in order; the problems found, naming
    page and line. ``outputs`` (when given) gets each command's output lines by the command's line
    in the page."""
    problems, replacements = [], []
    commands = [c for c in page_commands(page) if on_spark(c) == spark]
    earlier: dict[tuple[str, ...], tuple[int, list[str], str]] = {}
    for cmd in commands:
        began = time.perf_counter()
        key = (*cmd.args, f"> {cmd.redirect}")
        if cmd.expected is not None and key in earlier:
            code, output, crash = earlier.pop(key)  # the page shows the output of a command it ran before
        else:
            code, output, crash = run_command(cmd, workdir, servers)
            if cmd.expected is None:
                earlier[key] = (code, output, crash)
        if outputs is not None:
            outputs[cmd.line] = output
        where = f"{cmd.page}:{cmd.line}: {cmd.text}"
        print(f"{time.perf_counter() - began:6.1f} s  {where}")
        if crash:
            problems.append(f"{where}\n  crashed:\n{crash}")
            continue
        if code != cmd.exit_code:
            problems.append(f"{where}\n  exit {code}, expected {cmd.exit_code}:\n  " + "\n  ".join(output[-15:]))
            continue
        if cmd.expected is not None:
            want, got = normalise(cmd.expected, workdir), normalise(output, workdir)
            if not matches(want, got):
                if REGEN:
                    replacements.append((cmd.span, [line.replace(str(workdir) + os.sep, "") for line in output]))
                else:
                    diff = "\n".join(f"  {'-' if i < len(want) and (i >= len(got) or want[i] != got[i]) else ' '} "
                                     f"{line}" for i, line in enumerate(want))
                    problems.append(f"{where}\n  the page shows:\n{diff}\n  the command prints:\n  "
                                    + "\n  ".join(got) + "\n  (RANKWISE_REGEN_DOCS=1 rewrites the page)")
    if replacements:
        regenerate(page, replacements)
    return problems


# -------------------------------------------------------------------------------------------- page
# setups
def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copyfile(src, dst)


def setup_common(workdir: Path) -> None:
    """What every page may use: the repository's examples/ folder."""
    _copy(REPO / "examples", workdir / "examples")


def setup_eval(workdir: Path) -> None:
    """qrels.txt and run.trec (trec_eval's test files), the same qrels as a BEIR TSV, a run with a
    bad score."""
    _copy(SHARED_DATA / "trec_eval" / "qrels.test", workdir / "qrels.txt")
    _copy(SHARED_DATA / "trec_eval" / "results.test", workdir / "run.trec")
    rows = ["query-id\tcorpus-id\tscore"]
    for line in (workdir / "qrels.txt").read_text().splitlines():
        q, _, d, g = line.split()
        rows.append(f"{q}\t{d}\t{g}")
    (workdir / "qrels").mkdir()
    (workdir / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    run = (workdir / "run.trec").read_text().splitlines()[:5]
    fields = run[2].split()
    fields[4] = "high"
    run[2] = " ".join(fields)
    (workdir / "bad.trec").write_text("\n".join(run) + "\n")


def setup_trec_measures(workdir: Path) -> None:
    """trec_eval's test files, under their own names."""
    for f in (SHARED_DATA / "trec_eval").iterdir():
        _copy(f, workdir / f.name)


def setup_spark(workdir: Path) -> None:
    """qrels.txt and run.parquet (``query_id``, ``doc_id``, ``score``) from trec_eval's test files.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _copy(SHARED_DATA / "trec_eval" / "qrels.test", workdir / "qrels.txt")
    rows = [line.split() for line in (SHARED_DATA / "trec_eval" / "results.test").read_text().splitlines()]
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[2] for r in rows],
                             "score": [float(r[4]) for r in rows]}), workdir / "run.parquet")


def setup_compare(workdir: Path) -> None:
    """Cranfield as ``cranfield/``; its TF-IDF, BM25 and perturbed BM25 runs in ``runs/`` as the
    page says they were made (benchmarks/crosscheck_significance.py); the six-case test set, and it
    with every ranking reversed."""
    import importlib.util
    import json

    _copy(SHARED_DATA / "cranfield", workdir / "cranfield")
    spec = importlib.util.spec_from_file_location("crosscheck_significance",
                                                  REPO / "benchmarks" / "crosscheck_significance.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = bench.make_runs(workdir / "cranfield")
    runs["bm25_noisy"] = bench.perturbed(runs["bm25"])
    runs["bm25_partial"] = dict(list(runs["bm25"].items())[1:])  # lacks the first query (the gate's refusal)
    (workdir / "runs").mkdir()
    for name, run in runs.items():
        bench.write_trec(run, workdir / "runs" / f"{name}.trec", name)
    cases = [json.loads(line) for line in (REPO / "examples" / "rich_testset.jsonl").read_text().splitlines()]
    _copy(REPO / "examples" / "rich_testset.jsonl", workdir / "testset.jsonl")
    for case in cases:
        case["retrieved_contexts"] = case["retrieved_contexts"][::-1]
    (workdir / "reordered.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    gold = {"q1": ["d1"], "q2": ["d3"]}
    systems = {"bm25": {"q1": ["d1", "d2", "d1"], "q2": ["d3", "d4"]},
               "dense": {"q1": ["d1", "d1", "d2"], "q2": ["d3", "d3"]},
               "hybrid": {"q1": ["d1", "d2", "d1"], "q2": []}}
    for name, lists in systems.items():
        rows = [{"id": q, "user_input": f"question {q}", "retrieved_context_ids": ids,
                 "reference_context_ids": gold[q]} for q, ids in lists.items()]
        (workdir / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def setup_kestrel(workdir: Path) -> None:
    """The bundled Kestrel DB manual (38 documents, 73 questions) as ``kestrel/``."""
    _copy(REPO / "src" / "rankwise" / "datasets" / "kestrel", workdir / "kestrel")


def setup_calibrate(workdir: Path) -> None:
    """``bm25.testset.jsonl`` and ``dense.testset.jsonl``: the bundled Kestrel set retrieved as
    benchmarks/calibrate_kestrel.py does (500-character chunks, top 10), and
    ``.generator-server.json``, which tells the simulated generator (tests/generator_server.py) the
    answer key and the planted curve (RBP p = 0.7, alpha 0.1, beta 0.8)."""
    import json

    from generator_server import key_of
    from rankwise.datasets import load_bundled_corpus, load_bundled_testset
    from rankwise.retrieval import run_retrievers
    from rankwise.workflows.demo import _cases

    testset = load_bundled_testset("kestrel")
    questions = REPO / "src" / "rankwise" / "datasets" / "kestrel" / "questions.jsonl"
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    settings = {"key": key_of(rows), "curve": {"kind": "rbp", "p": 0.7}, "alpha": 0.1, "beta": 0.8,
                "mode": "sample", "seed": 1}
    (workdir / ".generator-server.json").write_text(json.dumps(settings), encoding="utf-8")
    retrieved = run_retrievers(load_bundled_corpus("kestrel"), {case.id: case.question for case in testset},
                               ["bm25", "dense"], k=10, chunk_size=500, chunk_overlap=50, quiet=True)
    for label, res in retrieved.items():
        with open(workdir / f"{label}.testset.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in _cases(testset, res))


MY_RAG = '''"""The retriever of docs/adapters.md: the Kestrel manual in a LlamaIndex VectorStoreIndex, no id_func.

Embeddings: tests/_hash_embedder.py (a deterministic hashed bag of words), so that it runs offline."""

from _hash_embedder import llamaindex_embedding
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from rankwise.datasets import bundled_files
from rankwise.retrieval import load_corpus


def build_retriever():
    corpus = load_corpus(bundled_files("kestrel").corpus)
    parser = SentenceSplitter(chunk_size=160, chunk_overlap=20)
    nodes = parser.get_nodes_from_documents([Document(text=d.text, doc_id=d.id) for d in corpus])
    return VectorStoreIndex(nodes, embed_model=llamaindex_embedding()).as_retriever(similarity_top_k=10)
'''


def setup_adapters(workdir: Path) -> None:
    """``my_rag.py`` (the page's LlamaIndex retriever, importable from the working folder), the
    Kestrel questions as ``questions.jsonl``."""
    import sys

    need("llama_index.core", reason="docs/adapters.md's my_rag module is a LlamaIndex retriever")
    sys.modules.pop("my_rag", None)  # the module of this folder, not one an earlier run imported
    (workdir / "my_rag.py").write_text(MY_RAG, encoding="utf-8")
    _copy(REPO / "src" / "rankwise" / "datasets" / "kestrel" / "questions.jsonl", workdir / "questions.jsonl")


def setup_traces(workdir: Path) -> None:
    """docs/traces.md: trace files from real instrumentation (tests/_traces.py: a LangChain
    retriever under openinference-instrumentation-langchain, seeded ids), ``broken.json``
    (traces.json cut short) and ``hops.jsonl`` (the worked example of docs/metrics.md section 7)."""
    need("openinference.instrumentation.langchain", reason="docs/traces.md makes its traces with it")
    from _traces import write_doc_traces

    write_doc_traces(workdir)
    (workdir / "broken.json").write_text((workdir / "traces.json").read_text(encoding="utf-8")[:4096],
                                         encoding="utf-8")
    metrics = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = metrics[metrics.index("<!-- calls-example -->"):].split("```jsonl\n", 1)[1].split("```", 1)[0]
    (workdir / "hops.jsonl").write_text(block, encoding="utf-8")


def setup_context_metrics(workdir: Path) -> None:
    _copy(REPO / "examples" / "ragas_testset.jsonl", workdir / "testset.jsonl")
    _copy(REPO / "examples" / "human_labels.csv", workdir / "labels.csv")


def setup_llm_judge(workdir: Path) -> None:
    """docs/llm-judge.md: labels.csv (the example human labels) and big.jsonl (100 cases x 4 chunks,
    with the loopback judge's fault markers planted in some chunks: the faults the page's transcript
    shows); the page makes its testset.jsonl itself."""
    import json

    _copy(REPO / "examples" / "human_labels.csv", workdir / "labels.csv")
    # every 7th chunk broken once (the retry answers), every 23rd twice, every 61st on every attempt
    # (fails)
    kinds = ["nochoices", "choicesobj", "usagestr", "notjson", "contentnum", "500", "reset"]
    rows = []
    for q in range(100):
        chunks = []
        for c in range(4):
            n = 4 * q + c
            kind = kinds[(n // 7) % len(kinds)]
            fault = "" if n % 7 else f" [[{kind}x1]]"
            fault = f" [[{kind}x2]]" if n % 23 == 0 else fault
            fault = f" [[{kind}]]" if n % 61 == 0 else fault
            topic = "boiler pressure" if c % 2 == 0 else "garden fence"
            chunks.append(f"Passage {n} about the {topic}.{fault}")
        rows.append({"id": f"q{q}", "user_input": f"Question {q}: what is the boiler pressure?",
                     "reference": f"The boiler pressure of unit {q} is 1.5 bar.", "retrieved_contexts": chunks})
    (workdir / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def setup_judge_retest(workdir: Path) -> None:
    """docs/judge-retest.md: testset.jsonl (40 questions x 4 chunks; a chunk names its question's
    topic, which the reference names and the question does not, or holds only filler) and a fake
    judge that flips each verdict with probability 0.1 (seeded): the noise the page's transcript
    measures."""
    import json
    import random

    rng = random.Random(1)
    topics = ["kestrel", "boiler", "violin", "glacier", "harbor", "orchard", "comet", "lantern", "meadow", "quarry"]
    rows = []
    for i in range(40):
        topic = topics[i % 10]
        chunks = [f"Log {i}-{j}: the {topic} reading was taken at dawn." if rng.random() < 0.5 else
                  f"Log {i}-{j}: nothing here but pebbles and sand." for j in range(4)]
        rows.append({"id": f"q{i:02d}", "question": f"What did survey {i} record?",
                     "reference": f"The {topic} reading.", "retrieved_contexts": chunks})
    (workdir / "testset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (workdir / ".judge-server.json").write_text(json.dumps({"flip_rate": 0.1, "flip_seed": 7}))


SETUPS: dict[str, list[Callable[[Path], None]]] = {
    "docs/eval.md": [setup_eval, setup_kestrel],
    "docs/trec-measures.md": [setup_trec_measures],
    "docs/context-metrics.md": [setup_context_metrics],
    "docs/testsets.md": [setup_kestrel],
    "docs/failures.md": [setup_kestrel],
    "docs/compare.md": [setup_compare, setup_kestrel],
    "docs/spark.md": [setup_spark],
    "docs/llm-judge.md": [setup_llm_judge],
    "docs/calibrate.md": [setup_calibrate],
    "docs/adapters.md": [setup_adapters],
    "docs/integrations.md": [setup_compare],
    "docs/judge-check.md": [setup_compare],
    "docs/plan-testset.md": [setup_compare],
    "docs/judge-retest.md": [setup_judge_retest],
    "docs/traces.md": [setup_traces],
}
SLOW = {"README.md": "runs the demo (dense retrieval)", "docs/retrieval.md": "dense retrieval",
        "docs/calibrate.md": "dense retrieval in its setup, 1,460 calls of position-curve"}


# Pages whose inputs have no setup here yet (reported as xfail, not run).
PENDING = {
}


def _pages_with_commands(spark: bool) -> list:
    params = []
    for page in PAGES:
        if not any(on_spark(c) == spark for c in page_commands(page)):
            continue
        name = page.relative_to(REPO).as_posix()
        marks = [pytest.mark.slow, pytest.mark.spark] if spark else [pytest.mark.slow] if name in SLOW else []
        if name in PENDING and not spark:
            marks.append(pytest.mark.xfail(reason=f"no setup yet: {PENDING[name]}", run=False))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


# Pages that show a console block's output in the ```text block after it (each shown line must
# appear in what the block's commands printed) and how many such lines they show at least.
TEXT_AFTER_CONSOLE = {"docs/ppi.md": 15}


def text_blocks_shown(page: Path, outputs: dict[int, list[str]]) -> tuple[list[str], int]:
    """The ```text lines after a ```console block that its commands did not print (problems naming
    page and line), and how many shown lines were checked."""
    name = page.relative_to(REPO).as_posix()
    problems, checked, printed = [], 0, None
    for lang, start, lines in fenced_blocks(page.read_text(encoding="utf-8")):
        if lang == "console":
            shown = [start + i + 1 for i, line in enumerate(lines) if line.startswith("$ ")]
            assert all(line in outputs for line in shown), f"{name}:{start}: a console command did not run"
            printed = "\n".join(x for line in shown for x in outputs[line])
        elif lang == "text" and printed:
            for i, want in enumerate(lines):
                if want.strip():
                    checked += 1
                    if want.rstrip() not in printed:
                        problems.append(f"{name}:{start + i + 1}: shows {want!r}; its commands printed:\n{printed}")
    return problems, checked


def _check(name: str, workdir: Path, monkeypatch, shared_data: Path, *, spark: bool) -> None:
    monkeypatch.setenv("RANKWISE_SHARED_DATA", str(shared_data))
    monkeypatch.chdir(workdir)
    for setup in [setup_common, *SETUPS.get(name, [])]:
        setup(workdir)
    outputs: dict[int, list[str]] = {}
    with ExitStack() as stack:
        problems = check_page(REPO / name, workdir, Servers(stack), spark=spark, outputs=outputs)
    assert not problems, f"{len(problems)} command(s) of {name} do not run as shown:\n\n" + "\n\n".join(problems)
    if name in TEXT_AFTER_CONSOLE and not spark:
        missing, checked = text_blocks_shown(REPO / name, outputs)
        assert not missing, f"{len(missing)} line(s) of {name} are not what its commands print:\n\n" + \
            "\n\n".join(missing)
        assert checked >= TEXT_AFTER_CONSOLE[name], f"{name}: only {checked} shown output lines checked"


@pytest.mark.parametrize("name", _pages_with_commands(spark=False))
def test_page_commands_run_as_shown(name, tmp_path, monkeypatch, shared_data):
    """Every command of the page exits as expected, and every transcript shown is what it prints."""
    _check(name, tmp_path, monkeypatch, shared_data, spark=False)


@pytest.mark.parametrize("name", _pages_with_commands(spark=True))
def test_page_spark_commands_run_as_shown(name, tmp_path, monkeypatch, shared_data, request):
    """The pages' ``--engine spark`` commands, on a local Spark (the same numbers as in one
    process), each page in its own folder: relative paths are read from the current folder, not the
    one the Spark session started in. The commands run in-process on the run's session (conftest's
    ``spark``), as test_spark_cli.py's do."""
    need("pyspark", reason="the Spark commands of the docs need pyspark (pip install 'rankwise[spark]')")
    request.getfixturevalue("spark")
    _check(name, tmp_path, monkeypatch, shared_data, spark=True)


# ------------------------------------------------------------------------------------ the pages
# themselves
def test_extraction_reads_prompts_transcripts_and_continuations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "```bash", "pip install rankwise", "rankwise eval q r \\", "    -m map   # comment", "make demo", "```",
        "```", "$ rankwise probe --verdicts 1,0", "metric  score", "...", "", "$ rankwise eval a b > out.json",
        "```", "```", "rankwise gate SYNOPSIS [--x]", "```", "```console", "$ rankwise gate x  # exits 1", "```",
    ]))
    cmds = page_commands(page)
    assert [c.args for c in cmds] == [["eval", "q", "r", "-m", "map"], ["demo"], ["probe", "--verdicts", "1,0"],
                                      ["eval", "a", "b"], ["gate", "x"]]
    assert cmds[2].expected == ["metric  score", "..."] and cmds[2].span == (8, 10)
    assert cmds[3].redirect == "out.json" and cmds[3].expected is None
    assert cmds[4].exit_code == 1 and cmds[0].line == 3


def test_makefile_demo_is_rankwise_demo():
    """The pages' ``make demo`` runs here as ``rankwise demo``; the Makefile must say the same."""
    text = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:.*\n\t(PYTHONDONTWRITEBYTECODE= )?\.venv/bin/rankwise demo\s*$", text, re.M)


def test_readme_fits_on_three_screens():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; keep it to 250 and move details to docs/"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page."""
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            out.add(title.replace(" ", "-"))
    return out


def test_every_relative_link_resolves():
    broken = []
    for page in [*PAGES, REPO / "docs" / "README.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target} (no heading #{anchor} in {dest.name})")
    assert not broken, "\n".join(broken)


def test_docs_index_lists_every_page():
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.name != "README.md" and f"]({p.name})" not in index]
    assert not missing, f"docs/README.md does not list {missing}"


def test_timing_claims_name_machine_and_load():
    """A time in the docs ("about 25 s cold", "8 minutes") says on what machine and under what load.
    """
    claims = re.compile(r"\b\d+(\.\d+)?\s?(s|seconds|minutes|min)\b(?=[^|]*$)")
    machine = re.compile(r"core|CPU|machine|VM|loopback", re.I)
    load = re.compile(r"idle|load|bus(y|ier)|shared|quiet", re.I)
    vague = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\b(cold|warm|took|takes?|about|under)\b", line) and claims.search(line):
                window = " ".join(lines[max(0, i - 3): i + 4])
                if not (machine.search(window) and load.search(window)):
                    vague.append(f"{page.relative_to(REPO)}:{i + 1}: {line.strip()}")
    assert not vague, "timings without the machine and load they were measured on:\n" + "\n".join(vague)


def _options_of(name: str) -> set[str]:
    import click

    from rankwise.cli import main

    out = {"--help", "-h"}
    for p in main.commands[name].params:
        if isinstance(p, click.Option):
            out.update(p.opts)
            out.update(p.secondary_opts)
    return out


def _paragraphs(text: str) -> Iterator[tuple[int, str, str | None]]:
    """(first line, text, the command of the section's heading) of each paragraph (a list item and a
    table row each count as one) outside fenced blocks."""
    from rankwise.cli import main

    command, fence, start, lines = None, False, 0, []
    for i, line in enumerate([*text.split("\n"), ""], start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            continue
        heading = re.match(r"^#+ .*?`rankwise ([a-z][a-z-]*)`", line)
        if line.startswith("#") or not line.strip():
            if lines:
                yield start, " ".join(lines), command
            lines = []
            if line.startswith("#"):
                command = heading.group(1) if heading and heading.group(1) in main.commands else None
            continue
        if lines and re.match(r"^\s*([-*|]|\d+\.)\s", line):  # a list item or table row: a paragraph of its own
            yield start, " ".join(lines), command
            lines = []
        if not lines:
            start = i
        lines.append(line)


def test_options_named_in_a_command_section_are_that_commands():
    """Prose names options too (an option list under `## rankwise run`): each backquoted `-x`/`--xx`
    in a section headed by a command is an option of that command, or of a command the same
    paragraph names (the gap through which retrieval.md's `-k` for `run -d/--depth` slipped:
    commands in fenced blocks run, prose did not)."""
    from rankwise.cli import main

    wrong = []
    for page in PAGES:
        for line, text, command in _paragraphs(page.read_text(encoding="utf-8")):
            if command is None:
                continue
            allowed = _options_of(command)
            for named in re.findall(r"rankwise ([a-z][a-z-]*)", text):
                if named in main.commands:
                    allowed |= _options_of(named)
            for option in re.findall(r"`(--?[A-Za-z][\w-]*)", text):
                if option not in allowed:
                    wrong.append(f"{page.relative_to(REPO)}:{line}: {option} is not an option of rankwise {command}")
    assert wrong == []
