"""What `rankwise eval` imports (README, "Against the targets": eval of a 10-line file <= 0.35 s as a whole
process). Importing numpy, pyarrow and click is most of that time; these tests keep everything else off the
common path, so a later import cannot slip back onto it unnoticed: the preference, judgement-group and z-score
modules load only with -R / -Z or a measure of theirs, rich only for the table.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rankwise.metrics import registry

# run the CLI in a child process and list what it imported (the list printed after its output)
_CHILD = (
    "import sys\nfrom rankwise.cli import main\n"
    "try:\n    main(sys.argv[1:], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
    "sys.stdout.flush()\nprint('\\nMODULES', ' '.join(sorted(sys.modules)))\n"
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

    deferred = {name: m.compute for name, m in registry.METRICS.items()
                if isinstance(m.compute, registry._Deferred)}
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
    assert trec.NICKNAMES["official"][-1] == "P.5,10,15,20,30,100,200,500,1000"
    assert prefs.NICKNAMES["prefs"] == ("runid", "num_q", *list(prefs.MEASURES)[:6])
    assert jg.NICKNAMES["qrels_jg"][2] == "map_avgjg"


def _inputs(tmp_path):
    """The same 2 queries in every format `rankwise eval` reads (qrels: TREC, BEIR TSV, CSV, JSONL, Parquet;
    runs: TREC, CSV, JSONL, Parquet)."""
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
    """Every format `rankwise eval` reads keeps pandas (and the rest of HEAVY) out: pyarrow's ``pa.array`` of
    Python strings and ``pq.read_table`` (through pyarrow.dataset) import pandas, a quarter of a second; the
    readers build their columns from buffers (``arrow_strings``) and read a Parquet file with ``ParquetFile``
    (before: the BEIR/CSV/JSONL/Parquet paths imported pandas)."""
    folder = _inputs(tmp_path)
    out, modules = _run("eval", str(folder / qrels), str(folder / run), "-m", "map", "--format", "json")
    assert '"map": 0.75' in out
    assert _loaded(modules, (*HEAVY, "pyarrow.dataset")) == []


@pytest.mark.parametrize("command", ["judge", "synth", "answer"])
def test_llm_commands_import_no_sdk_before_a_request(command):
    """The LLM commands import neither the OpenAI SDK nor an HTTP client until they send a request."""
    _, modules = _run(command, "--help")
    assert _loaded(modules, ("openai", "aiohttp", "torch", "sentence_transformers", "pandas")) == []


def test_a_judge_dry_run_builds_the_judge_without_the_sdk(tmp_path):
    """A dry run reads the test set, builds the judge and its prompts and prices the calls: all of it without the
    SDK or an HTTP client (--help alone never reaches the judge)."""
    ts = tmp_path / "ts.jsonl"
    ts.write_text('{"id": "c1", "question": "When?", "retrieved_contexts": ["It opened in 1921."]}\n')
    out, modules = _run("judge", str(ts), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--mode",
                        "question", "--dry-run", "--cache", str(tmp_path / "c.sqlite"))
    assert "would make 1 calls to m" in out
    assert _loaded(modules, ("openai", "aiohttp", "torch", "sentence_transformers", "pandas")) == []
