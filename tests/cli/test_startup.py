"""What each command imports (docs/performance.md, "Startup": `rankwise eval` of a 20-line run <=
0.35 s as a whole process). Importing numpy, pyarrow and click is most of that time; these tests
keep everything else off the common path, so a later import cannot slip back onto it unnoticed:
eval's imports are held to a list in every input format (the preference, judgement-group and z-score
modules load only with -R / -Z or a measure of theirs, rich only for the table); `run -r bm25` loads
no model library, numba or scipy; the LLM commands import the SDK only to send a request.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rankwise.metrics import registry

# run the CLI in a child process and list what it imported (the list printed after its output)
_CHILD = (
    "import sys\nfrom rankwise.cli import main\n"
    "try:\n    main(sys.argv[1:], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
    "print('\\nMODULES', ' '.join(sorted(sys.modules)))\nsys.stdout.flush()\nsys.stderr.flush()\n"
    # leave as the command line does (cli/_base.py): Arrow's thread pools can abort a teardown
    # (tests/cli/test_exit.py)
    "import os\nos._exit(0)\n"
)
# never needed to score qrels against a run and print the numbers
HEAVY = ("pandas", "polars", "scipy", "torch", "sentence_transformers", "matplotlib", "sklearn", "openai",
         "aiohttp", "pyspark", "email", "http.client", "asyncio", "sqlite3",
         "rankwise.analysis", "rankwise.spark", "rankwise.relevance.llm")
# needed only for -R prefs / qrels_prefs / qrels_jg, -Z, or one of their measures
JUDGEMENTS = ("rankwise.metrics.prefs", "rankwise.metrics.jg", "rankwise.metrics.zscores", "rankwise.data.prefs")


@pytest.fixture
def files(tmp_path):
    q = tmp_path / "q.txt"
    r = tmp_path / "r.trec"
    q.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n")
    r.write_text("q1 Q0 d1 1 2.0 s\nq1 Q0 d2 2 1.0 s\nq2 Q0 d4 1 1.0 s\nq2 Q0 d3 2 0.5 s\n")
    return q, r


def _run(*args: str) -> tuple[str, set[str]]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "MODULES" in proc.stdout, proc.stderr[-2000:]
    out, _, mods = proc.stdout.rpartition("\nMODULES ")
    return out, set(mods.split())


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules or any(m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize("fmt", ["trec", "json", "csv"])
def test_eval_in_plain_text_imports_neither_rich_nor_the_judgement_modules(files, fmt):
    q, r = files
    out, modules = _run("eval", str(q), str(r), "-m", "map,P@1,ndcg_cut_10", "--format", fmt)
    assert "0.75" in out  # map: q1 1.0, q2 0.5
    assert _loaded(modules, ("rich", "rankwise.report.console", *HEAVY, *JUDGEMENTS)) == []


def test_eval_table_imports_rich_but_not_the_judgement_modules(files):
    q, r = files
    out, modules = _run("eval", str(q), str(r))
    assert "rich.table" in modules and "ndcg@10" in out
    assert _loaded(modules, (*HEAVY, *JUDGEMENTS)) == []


def test_less_common_trec_measures_load_their_module_when_asked(files):
    q, r = files
    out, modules = _run("eval", str(q), str(r), "-m", "map", "--format", "trec")
    assert "rankwise.metrics.trec" not in modules and out.split()[:3] == ["map", "all", "0.7500"]
    out, modules = _run("eval", str(q), str(r), "-m", "bpref,infAP", "--format", "trec")
    assert "rankwise.metrics.trec" in modules and "infAP" in out


def test_prefs_and_zscores_still_load_when_asked(tmp_path, files):
    _, r = files
    prefs = tmp_path / "prefs.txt"
    prefs.write_text("q1 jg1 a d1 2\nq1 jg1 b d2 1\nq2 jg1 a d3 1\nq2 jg1 b d4 0\n")
    out, modules = _run("eval", "-R", "prefs", str(prefs), str(r), "-m", "prefs_simp", "--format", "trec")
    assert "rankwise.metrics.prefs" in modules and "rankwise.data.prefs" in modules
    assert [line.split()[0] for line in out.splitlines()] == ["prefs_simp"]
    z = tmp_path / "z.txt"
    z.write_text("q1 map 0.5 0.25\nq2 map 0.5 0.25\n")
    out, modules = _run("eval", str(files[0]), str(r), "-m", "map", "-Z", str(z), "--format", "trec")
    assert "rankwise.metrics.zscores" in modules and out.split()[:3] == ["Zmap", "all", "1.0000"]


def test_every_deferred_measure_resolves_to_its_function():
    from rankwise.metrics import calls, jg, prefs, trec
    from rankwise.metrics.declare import Deferred

    deferred = {name: m.compute for name, m in registry.METRICS.items()
                if isinstance(m.compute, Deferred)}
    assert len(deferred) >= 40  # trec_eval's less common measures, the 14 preference and 3 jg ones
    modules = {"rankwise.metrics.trec": trec, "rankwise.metrics.prefs": prefs, "rankwise.metrics.jg": jg,
               "rankwise.metrics.calls": calls}
    for name, fn in deferred.items():
        target = fn.resolve()
        assert callable(target) and fn.module in modules, name
        if fn.key is None:
            assert target is getattr(modules[fn.module], fn.attr), name
    assert {n for n, fn in deferred.items() if fn.module == "rankwise.metrics.prefs"} == set(prefs.MEASURES)
    for name, (function, description, aggregate) in prefs.MEASURES.items():
        metric = registry.METRICS[name]
        assert metric.compute.resolve() is function
        assert (metric.description, metric.aggregate, metric.requires) == (description, aggregate, ("prefs",))
    assert trec.TREC_NICKNAMES["official"][-1] == "P.5,10,15,20,30,100,200,500,1000"
    assert prefs.PREFS_NICKNAMES["prefs"] == ("runid", "num_q", *list(prefs.MEASURES)[:6])
    assert jg.JG_NICKNAMES["qrels_jg"][2] == "map_avgjg"


def _inputs(tmp_path):
    """The same 2 queries in every format `rankwise eval` reads (qrels: TREC, BEIR TSV, CSV, JSONL,
    Parquet; runs: TREC, CSV, JSONL, Parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [("q1", "d1", 2.0), ("q1", "d2", 1.0), ("q2", "d4", 1.0), ("q2", "d3", 0.5)]
    rels = [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 1)]
    files = {"qrels.txt": "".join(f"{q} 0 {d} {g}\n" for q, d, g in rels),
             "qrels.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rels),
             "qrels.csv": "query_id,doc_id,relevance\n" + "".join(f"{q},{d},{g}\n" for q, d, g in rels),
             "qrels.jsonl": "".join(f'{{"query_id": "{q}", "doc_id": "{d}", "relevance": {g}}}\n'
                                    for q, d, g in rels),
             "run.trec": "".join(f"{q} Q0 {d} {i + 1} {s} r\n" for i, (q, d, s) in enumerate(rows)),
             "run.csv": "query_id,doc_id,score\n" + "".join(f"{q},{d},{s}\n" for q, d, s in rows),
             "run.jsonl": "".join(f'{{"query_id": "{q}", "doc_id": "{d}", "score": {s}}}\n' for q, d, s in rows)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows],
                             "score": [r[2] for r in rows]}), tmp_path / "run.parquet")
    pq.write_table(pa.table({"query_id": [r[0] for r in rels], "doc_id": [r[1] for r in rels],
                             "relevance": [r[2] for r in rels]}), tmp_path / "qrels.parquet")
    return tmp_path


@pytest.mark.parametrize("qrels, run", [("qrels.txt", "run.trec"), ("qrels.tsv", "run.trec"),
                                        ("qrels.csv", "run.csv"), ("qrels.jsonl", "run.jsonl"),
                                        ("qrels.parquet", "run.parquet"), ("qrels.txt", "run.parquet")])
def test_eval_of_every_input_format_imports_no_pandas(tmp_path, qrels, run):
    """Every format `rankwise eval` reads keeps pandas (and the rest of HEAVY) out: pyarrow's
    ``pa.array`` of Python strings and ``pq.read_table`` (through pyarrow.dataset) import pandas, a
    quarter of a second; the readers build their columns from buffers (``arrow_strings``) and read a
    Parquet file with ``ParquetFile`` (before: the BEIR/CSV/JSONL/Parquet paths imported pandas)."""
    folder = _inputs(tmp_path)
    out, modules = _run("eval", str(folder / qrels), str(folder / run), "-m", "map", "--format", "json")
    assert '"map": 0.75' in out
    assert _loaded(modules, (*HEAVY, "pyarrow.dataset")) == []


@pytest.mark.parametrize("run", ["run.trec", "run.parquet"])
def test_eval_stream_of_a_run_not_grouped_imports_no_pandas(tmp_path, run):
    """`eval --stream` of a run whose queries are not grouped partitions it on disk in Arrow IPC
    files of its own (``pyarrow.dataset.write_dataset`` did it before, importing pandas: a fifth of
    a second of every such evaluation)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [("q1", "d1", 2.0), ("q2", "d4", 1.0), ("q1", "d2", 1.0), ("q2", "d3", 0.5)]
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n")
    (tmp_path / "run.trec").write_text("".join(f"{q} Q0 {d} 1 {s} r\n" for q, d, s in rows))
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows],
                             "score": [r[2] for r in rows]}), tmp_path / "run.parquet")
    out, modules = _run("eval", str(tmp_path / "qrels.txt"), str(tmp_path / run), "-m", "map", "--format", "json",
                        "--stream", "--quiet")
    assert '"map": 0.75' in out
    assert "rankwise.data.stream" in modules
    assert _loaded(modules, (*HEAVY, "pyarrow.dataset")) == []


@pytest.mark.parametrize("command", ["judge", "synth", "answer"])
def test_llm_commands_import_no_sdk_before_a_request(command):
    """The LLM commands import neither the OpenAI SDK nor an HTTP client until they send a request.
    """
    _, modules = _run(command, "--help")
    assert _loaded(modules, ("openai", "aiohttp", "torch", "sentence_transformers", "pandas")) == []


# `rankwise eval` imports these libraries and no other (cloudpickle: pyarrow imports it when
# installed); the table adds rich
EVAL_LIBRARIES = {"numpy", "pyarrow", "click", "cloudpickle"}
# and these modules of rankwise, besides the command-line modules rankwise.cli.* that register the
# commands
EVAL_MODULES = {
    "rankwise", "rankwise._atomic", "rankwise._lazy", "rankwise._signals", "rankwise._words", "rankwise.cli",
    "rankwise.errors", "rankwise.data", "rankwise.data.columns", "rankwise.data._walk", "rankwise.data.compiled",
    "rankwise.data.text", "rankwise.data.frames",
    "rankwise.data.load", "rankwise.data.qrels", "rankwise.data.ranking", "rankwise.data.run",
    "rankwise.data.swap", "rankwise.data.tabular", "rankwise.data.trec",
    "rankwise.data.stream",  # a Parquet file: read with ParquetFile, row group by row group
    "rankwise.metrics", "rankwise.metrics._arith", "rankwise.metrics._names", "rankwise.metrics.declare",
    "rankwise.metrics.catalogue", "rankwise.metrics.catalogue.calls", "rankwise.metrics.catalogue.citations",
    "rankwise.metrics.catalogue.context", "rankwise.metrics.catalogue.ir", "rankwise.metrics.catalogue.preferences",
    "rankwise.metrics.catalogue.trec",
    "rankwise.metrics.context", "rankwise.metrics.engine", "rankwise.metrics.ir", "rankwise.metrics.matrix",
    "rankwise.metrics.registry", "rankwise.metrics.trec",  # nDCG's log table
    "rankwise.relevance", "rankwise.relevance.truth", "rankwise.relevance.verdicts",
    "rankwise.report", "rankwise.report.text", "rankwise.report.console",  # console: the table only
}


def _installed_libraries(modules: set[str]) -> set[str]:
    """The top-level packages among ``modules`` that live in site-packages (not the standard
    library), less those a bare interpreter has already (a ``.pth`` file's hook)."""
    import importlib.util
    import sysconfig

    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True,
                          text=True, timeout=60).stdout.split()
    found = set()
    for name in {m.partition(".")[0] for m in modules} - set(bare) - {"rankwise", "__main__"}:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = (spec and (spec.origin or next(iter(spec.submodule_search_locations or []), None))) or ""
        if any(origin.startswith(root) for root in roots):
            found.add(name)
    return found


@pytest.mark.parametrize("qrels, run, fmt", [("qrels.txt", "run.trec", "trec"), ("qrels.txt", "run.trec", "table"),
                                             ("qrels.tsv", "run.trec", "json"), ("qrels.csv", "run.csv", "json"),
                                             ("qrels.jsonl", "run.jsonl", "json"),
                                             ("qrels.parquet", "run.parquet", "json")])
def test_eval_imports_only_its_list(tmp_path, qrels, run, fmt):
    """`rankwise eval` of a small file in every input format imports numpy, pyarrow and click (rich
    for the table) and no other library, and of rankwise only the modules listed: a new import on
    this path fails here until it is added to the list on purpose."""
    folder = _inputs(tmp_path)
    out, modules = _run("eval", str(folder / qrels), str(folder / run), "-m", "map,ndcg_cut_10", "--format", fmt)
    assert "0.75" in out  # map: q1 1.0, q2 0.5
    libraries = _installed_libraries(modules)
    assert {"numpy", "pyarrow", "click"} <= libraries  # what the check below is held against is really seen
    assert libraries - EVAL_LIBRARIES == ({"rich"} if fmt == "table" else set())
    own = {m for m in modules if m == "rankwise" or m.startswith("rankwise.")}
    assert sorted(m for m in own - EVAL_MODULES if not m.startswith("rankwise.cli.")) == []
    assert ("rankwise.report.console" in own) == (fmt == "table")
    assert ("rankwise.data.stream" in own) == run.endswith(".parquet")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# never needed by BM25 retrieval: bm25s imports numba and scipy whenever installed, for backends
# rankwise does not use; the dense and reranking models and the LLM client load only when asked for
NOT_FOR_BM25 = ("pandas", "numba", "scipy", "torch", "sentence_transformers", "transformers", "faiss", "openai",
                "aiohttp", "matplotlib", "rankwise.llm", "rankwise.retrieval.llm_rerank")


def test_run_with_bm25_imports_no_model_library(tmp_path):
    out = tmp_path / "run.trec"
    _, modules = _run("run", "--corpus", str(EXAMPLES / "corpus.jsonl"), "--queries",
                      str(EXAMPLES / "rich_testset.jsonl"), "-o", str(out), "--quiet")
    assert "bm25s" in modules and "rankwise.retrieval.bm25" in modules
    assert _loaded(modules, NOT_FOR_BM25) == []
    lines = out.read_text().splitlines()
    assert lines and all(line.split()[1] == "Q0" and line.split()[-1] == "bm25" for line in lines)


def test_bm25_ranks_the_same_when_numba_and_scipy_are_already_imported(tmp_path):
    """Hiding numba and scipy from bm25s changes nothing it computes: with both imported first (so
    bm25s sees them) the run file is byte for byte the same; and afterwards numba imports as usual.
    """
    def run(name: str, first: str) -> str:
        out = tmp_path / name
        child = (f"{first}\nimport sys\nfrom rankwise.cli import main\n"
                 "main(sys.argv[1:], standalone_mode=False)\n"
                 "import bm25s, numba\nprint('NUMBA', bm25s.NUMBA_AVAILABLE, 'numba' in sys.modules)\n")
        proc = subprocess.run([sys.executable, "-c", child, "run", "--corpus", str(EXAMPLES / "corpus.jsonl"),
                               "--queries", str(EXAMPLES / "rich_testset.jsonl"), "-o", str(out), "--quiet",
                               "--chunk-size", "200"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return out.read_text(), proc.stdout.split("NUMBA ")[-1].split()

    hidden, flags_hidden = run("hidden.trec", "")
    seen, flags_seen = run("seen.trec", "import numba, scipy.sparse")
    assert flags_hidden == ["False", "True"] and flags_seen == ["True", "True"]
    assert hidden == seen and len(hidden.splitlines()) >= 6


def test_eval_rag_imports_no_model_library_nor_llm_client():
    out, modules = _run("eval-rag", str(EXAMPLES / "rich_testset.jsonl"), "-k", "3", "--format", "json")
    assert '"cases": 6' in out and '"evaluated": 5' in out
    assert _loaded(modules, ("pandas", "polars", "scipy", "torch", "sentence_transformers", "matplotlib", "openai",
                             "aiohttp", "httpx", "pyspark", "rankwise.llm", "rankwise.spark")) == []


def test_judge_dry_run_builds_the_judge_without_the_sdk(tmp_path):
    """A dry run reads the test set, builds every prompt and counts the calls: no SDK, no HTTP
    client."""
    out, modules = _run("judge", str(EXAMPLES / "rich_testset.jsonl"), "--model", "m", "--base-url",
                        "http://127.0.0.1:9/v1", "--dry-run", "--cache", str(tmp_path / "c.sqlite"))
    assert "would make 20 calls to m" in out
    assert "rankwise.relevance.llm_judge" in modules and "rankwise.llm.client" in modules
    assert _loaded(modules, ("openai", "aiohttp", "httpx", "torch", "sentence_transformers", "pandas")) == []


def test_judge_imports_the_sdk_only_to_send_a_request(server, tmp_path):
    """The first run sends requests (the SDK loads then); the rerun, every verdict cached, sends
    none and imports no SDK."""
    server.reset()
    args = ["judge", str(EXAMPLES / "rich_testset.jsonl"), "--model", "judge-test", "--base-url", server.base_url,
            "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    out, modules = _run(*args, "--records", str(tmp_path / "a.jsonl"))
    assert server.stats()["requests"] == 20 and "20 requests made" in out
    assert "openai" in modules
    server.reset()
    out, modules = _run(*args, "--records", str(tmp_path / "b.jsonl"))
    assert server.stats()["requests"] == 0 and "0 requests made, 20 cache hits" in out
    assert _loaded(modules, ("openai", "aiohttp", "httpx")) == []
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


def test_synth_dry_run_plans_without_the_sdk(tmp_path):
    out, modules = _run("synth", str(EXAMPLES / "corpus.jsonl"), "--model", "m", "--base-url",
                        "http://127.0.0.1:9/v1", "--dry-run", "-o", str(tmp_path / "synth.jsonl"))
    assert "dry run: 3 samples planned" in out and "total                 3 calls" in out
    assert _loaded(modules, ("openai", "aiohttp", "httpx", "torch", "sentence_transformers", "pandas", "numba",
                             "scipy")) == []
