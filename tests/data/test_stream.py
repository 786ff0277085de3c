"""Runs larger than memory: streamed evaluation (block by block, grouped files read directly, others
partitioned on disk) gives the in-memory result to the last digit; Parquet runs and qrels are read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from _inprocess import run_cli
from rankwise import evaluate
from rankwise.cli import main
from rankwise.data.stream import NotGrouped, iter_run_blocks
from rankwise.errors import InputError
from rankwise.metrics.stream import evaluate_stream

MEASURES = ["P@10", "recall@100", "ndcg@10", "map", "mrr", "bpref", "num_ret", "num_rel_ret", "r_precision",
            "ndcg"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """1e5 rows over 1,000 queries (grouped, depth 40-160), with ties and scores in several
    notations; qrels for 900 of them plus 60 queries the run lacks; 30 run queries are not in the
    qrels."""
    rng = np.random.default_rng(3)
    d = tmp_path_factory.mktemp("stream")
    queries = [f"q{i}" for i in range(1000)]
    depths = rng.integers(40, 161, len(queries))
    depths = (depths * 100_000 / depths.sum()).astype(int)
    lines, qrels_lines = [], []
    rows = []
    for q, depth in zip(queries, depths.tolist(), strict=True):
        docs = rng.choice(50_000, depth, replace=False)
        scores = np.round(rng.normal(0, 3, depth), 1)  # many ties
        for doc, s in zip(docs.tolist(), scores.tolist(), strict=True):
            rows.append((q, f"D{doc}", s))
    for i, (q, doc, s) in enumerate(rows):
        text = repr(s) if i % 3 else f"{s:.3e}"
        lines.append(f"{q} Q0 {doc} {i} {text} tag")
    docs_of: dict[str, list[str]] = {}  # each query's documents in run order (one pass, not one per query)
    for q, doc, _ in rows:
        docs_of.setdefault(q, []).append(doc)
    for q in queries[30:930] + [f"x{i}" for i in range(60)]:
        picked = docs_of.get(q, [])[:15] if q.startswith("q") else []
        picked += [f"D{n}" for n in rng.choice(50_000, 5, replace=False).tolist()]
        for doc in dict.fromkeys(picked):
            qrels_lines.append(f"{q} 0 {doc} {int(rng.integers(-1, 4))}")
    (d / "run.trec").write_text("\n".join(lines) + "\n")
    order = rng.permutation(len(lines))
    (d / "shuffled.trec").write_text("\n".join(lines[i] for i in order) + "\n")
    (d / "qrels.txt").write_text("\n".join(qrels_lines) + "\n")
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows],
                             "score": [r[2] for r in rows]}).take(pa.array(order)), d / "run.parquet",
                   row_group_size=7_000)
    q_cols = [line.split() for line in qrels_lines]
    pq.write_table(pa.table({"query_id": [c[0] for c in q_cols], "doc_id": [c[2] for c in q_cols],
                             "relevance": [int(c[3]) for c in q_cols]}), d / "qrels.parquet")
    return d


def _same(a, b):
    assert a.mean == b.mean  # exact digits, not approximately
    assert a.summary == b.summary
    assert a.per_query.query_ids == b.per_query.query_ids
    assert np.array_equal(a.per_query.values, b.per_query.values, equal_nan=True)


@pytest.mark.parametrize("missing", ["zero", "skip"])
@pytest.mark.parametrize("run", ["run.trec", "shuffled.trec", "run.parquet"])
def test_streamed_equals_in_memory(files, run, missing):
    reference = evaluate(files / "qrels.txt", files / "run.trec", MEASURES, missing=missing)
    assert reference.summary["missing_from_run"] == 60 and reference.summary["ignored_not_in_qrels"] == 100
    streamed = evaluate_stream(files / "qrels.txt", files / run, MEASURES, missing=missing, block_rows=7_000,
                               workdir=files)
    _same(streamed, reference)
    _same(evaluate(files / "qrels.parquet", files / run, MEASURES, missing=missing), reference)


def test_grouped_file_streams_in_blocks_of_whole_queries(files):
    blocks = list(iter_run_blocks(files / "run.trec", block_rows=10_000))
    assert len(blocks) >= 8
    assert all(len(b) < 1.5 * 10_000 for b in blocks)  # a batch past the budget, at most
    seen = [q for b in blocks for q in b.queries]
    assert len(seen) == len(set(seen)) == 1000
    assert sum(len(b) for b in blocks) == len((files / "run.trec").read_text().splitlines())


def test_ungrouped_file_is_detected_then_partitioned(files):
    blocks = iter_run_blocks(files / "shuffled.trec", block_rows=10_000)
    with pytest.raises(NotGrouped):
        next(blocks)  # in its first batch, before any block is ranked
    parts = list(iter_run_blocks(files / "shuffled.trec", block_rows=10_000, grouped=False, workdir=files))
    seen = [q for b in parts for q in b.queries]
    assert len(seen) == len(set(seen)) == 1000 and len(parts) >= 8
    assert not list(files.glob("rankwise-partitions-*"))  # the partitions are removed


@pytest.fixture
def few_open_files():
    """A process allowed 200 open files (``ulimit -n 200``): 100 partition files open at most."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (200, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _spread_run(tmp_path, extra: str = "") -> None:
    """20,000 rows of 700 queries in turn (not grouped): 1,000 partitions at block_rows=20, read in
    batches of 4,096 rows, each touching some 700 partitions."""
    rows = [f"q{i % 700} Q0 d{i} 1 {i % 7}.5 t" for i in range(20_000)]
    (tmp_path / "run.trec").write_text("\n".join(rows) + "\n" + extra)
    (tmp_path / "qrels.txt").write_text("".join(f"q{q} 0 d{q + 700 * (q % 5)} {q % 3}\n" for q in range(700)))


def test_more_partitions_than_files_open_at_once_lose_no_row(tmp_path, few_open_files):
    """Past the files a process may hold open, the partition writers are closed and new files begun
    for the same partitions: every row comes back once, and the numbers are the in-memory ones."""
    from rankwise.data.stream import _open_at_most

    _spread_run(tmp_path)
    assert _open_at_most() == 100
    blocks = list(iter_run_blocks(tmp_path / "run.trec", block_rows=20, grouped=False, workdir=tmp_path))
    seen = [q for b in blocks for q in b.queries]
    assert len(seen) == len(set(seen)) == 700 and sum(len(b) for b in blocks) == 20_000
    streamed = evaluate_stream(tmp_path / "qrels.txt", tmp_path / "run.trec", MEASURES, block_rows=20,
                               workdir=tmp_path)
    _same(streamed, evaluate(tmp_path / "qrels.txt", tmp_path / "run.trec", MEASURES))
    assert streamed.mean["map"] > 0
    assert not list(tmp_path.glob("rankwise-partitions-*"))


def test_a_duplicate_in_a_partition_begun_anew_names_its_line(tmp_path, few_open_files):
    """A query's rows spread over several files of its partition: the repeated doc is named on the
    line where it repeats, as in memory."""
    _spread_run(tmp_path, "q7 Q0 d7 1 0.25 t\n")  # d7 is q7's already (line 8)
    for read in (lambda: evaluate(tmp_path / "qrels.txt", tmp_path / "run.trec", ["map"]),
                 lambda: evaluate_stream(tmp_path / "qrels.txt", tmp_path / "run.trec", ["map"], block_rows=20,
                                         workdir=tmp_path)):
        with pytest.raises(InputError, match=r"run.trec:20001: field 'doc_id': doc 'd7' appears twice in query 'q7'"):
            read()


def test_duplicate_doc_in_streamed_block_names_the_line(tmp_path):
    (tmp_path / "run.trec").write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 a 1 1.0 t\nq2 Q0 a 2 0.5 t\n")
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\n")
    with pytest.raises(InputError, match=r"run.trec:4: field 'doc_id': doc 'a' appears twice in query 'q2'"):
        evaluate_stream(tmp_path / "qrels.txt", tmp_path / "run.trec", ["map"], block_rows=2)


def test_parquet_without_columns_is_a_one_line_error(tmp_path):
    pq.write_table(pa.table({"qid": ["q"], "doc_id": ["d"], "score": [1.0]}), tmp_path / "run.parquet")
    with pytest.raises(InputError, match=r"run.parquet: field 'query_id': no column 'query_id'"):
        evaluate({"q": {"d": 1}}, tmp_path / "run.parquet")


def test_cli_stream_prints_the_in_memory_numbers(files):
    def cli(*args):
        out = run_cli(["eval", str(files / "qrels.txt"), *args,
                       "--format", "trec", "-m", "map,ndcg@10,P@10"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if not line.startswith("runid")]

    in_memory = cli(str(files / "run.trec"))
    assert cli(str(files / "shuffled.trec"), "--stream", "--block-rows", "5000") == in_memory
    assert cli(str(files / "run.parquet"), "--stream") == in_memory


def test_stream_shows_its_progress_on_stderr_and_quiet_silences_it(files, monkeypatch):
    """A large run streamed shows a bar counting rows on stderr (a terminal's: FORCE_COLOR), never
    on stdout; ``--quiet`` shows none; the numbers are the same either way."""
    from click.testing import CliRunner

    from rankwise.cli import main
    from rankwise.metrics import stream

    monkeypatch.setattr(stream, "PROGRESS_AT_LEAST", 0)  # every file is large
    monkeypatch.setenv("FORCE_COLOR", "1")
    args = ["eval", str(files / "qrels.txt"), str(files / "shuffled.trec"), "--stream", "--block-rows", "5000",
            "--format", "trec", "-m", "map"]
    shown, quiet = CliRunner().invoke(main, args), CliRunner().invoke(main, [*args, "--quiet"])
    assert shown.exit_code == quiet.exit_code == 0
    assert "run rows evaluated (partitioned on disk)" in shown.stderr and quiet.stderr == ""
    assert shown.stdout == quiet.stdout and shown.stdout.startswith("map")


@pytest.mark.parametrize(("text", "message"), [
    ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 x t\n", r"r.trec:2: field 'score': not a number: 'x'"),
    ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0\n", r"r.trec:2: field 'run_id': expected at least 6 fields .*got 5"),
    ("q1 Q0 a 1 2.0 t\nq1   Q0 b 2 x t extra\n", r"r.trec:2: field 'score': not a number: 'x'"),
])
def test_streaming_bad_line_is_a_one_line_error_naming_it(tmp_path, text, message):
    (tmp_path / "r.trec").write_text(text)
    with pytest.raises(InputError, match=message):
        evaluate_stream({"q1": {"a": 1}}, tmp_path / "r.trec", ["map"])


@pytest.mark.parametrize("lines", [
    ["q1 Q0 a 1 2.0 t", "q1 Q0 b 2 1.0 t extra fields"],  # fields after run_id: ignored, as trec_eval does
    ["q1 Q0 a 1 2.0 t", "q1  Q0 b 2 1.0 t"],  # several spaces between fields
    ["q1\tQ0\ta\t1\t  2.0\tSTANDARD more junk", "q1\tQ0\tb\t2\t1.0\tSTANDARD"],  # NIST's results.trunc
    ["q1 Q0 a 1 2.0 t", "q2 Q0 c 1 3.0 t", "q1 Q0 b 2 1.0 t  x"],  # and not grouped
    ["q1\tQ0\ta b\t1\t2.0\tt", "q1\tQ0\tc\t2\t1.0\tt"],  # a space inside a tab-separated field splits it
])
def test_streaming_reads_what_trec_eval_reads(tmp_path, lines):
    """Lines Arrow's fixed-delimiter reader cannot take are read exactly (split on whitespace), so
    the streamed numbers are the in-memory reader's, wherever in the file such a line stands."""
    from rankwise import evaluate

    qrels = {"q1": {"a": 1, "b": 2, "c": 1}, "q2": {"c": 1}}
    many = [f"q{i} Q0 d{j} {j} {10 - j / 10} t" for i in range(3, 40) for j in range(30)]  # regular lines first
    (tmp_path / "r.trec").write_text("\n".join(many + lines) + "\n")
    metrics = ["map", "ndcg", "num_ret", "P@2"]
    expected = evaluate(qrels, tmp_path / "r.trec", metrics, missing="skip")
    for rows in (50, 10_000):
        got = evaluate_stream(qrels, tmp_path / "r.trec", metrics, missing="skip", block_rows=rows)
        assert got.mean == expected.mean and got.per_query.to_dict() == expected.per_query.to_dict(), rows


def test_streaming_skips_comment_lines(tmp_path):
    (tmp_path / "r.trec").write_text("# produced by a test\nq1 Q0 a 1 2.0 t\n# more\nq1 Q0 b 2 1.0 t\n")
    result = evaluate_stream({"q1": {"b": 1}}, tmp_path / "r.trec", ["mrr", "num_ret"])
    assert result.mean == {"mrr": 0.5, "num_ret": 2.0}


# ------------------------------------------------ issue 20: the stream accepts and refuses what
# memory does
def _streamed(path, **kwargs):
    """Every query of a streamed run: {query: (docs in rank order, scores)}, as the CLI's --stream
    reads it."""
    try:
        blocks = list(iter_run_blocks(path, **kwargs))
    except NotGrouped:
        blocks = list(iter_run_blocks(path, grouped=False, **kwargs))
    return {q: (b.ranking(q), None if b.scores is None else b.scores[b.offsets[i]:b.offsets[i + 1]].tolist())
            for b in blocks for i, q in enumerate(b.queries)}


def _in_memory(path):
    from rankwise.data.load import load_run

    run = load_run(path)
    return {q: (run.ranking(q), None if run.scores is None else run.scores[run.offsets[i]:run.offsets[i + 1]].tolist())
            for i, q in enumerate(run.queries)}


def _message(read, path):
    with pytest.raises(InputError) as err:
        read(path)
    return str(err.value)


@pytest.mark.parametrize(("data", "expected"), [
    (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 nan t\n", "r.trec:2: field 'score': not a number: 'nan'"),
    (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1_000 t\n", "r.trec:2: field 'score': not a number: '1_000'"),
    (b"q1\tQ0\ta\t1\t2.0\tt\n\tQ0\tb\t2\t1.0\tt\n", "r.trec:2: field 'run_id': expected at least 6 fields"),
    (b"q1 Q0 a 1 2.0 t\nq1 Q0 b\xff 2 1.0 t\n", "r.trec:2: bytes that are not UTF-8 at column 8"),
    (b"", "r.trec: file is empty"),
    (b" \n\n", "r.trec: file has no rows: only blank lines"),
    (b"# only a comment\n", "r.trec: no run lines (only comments or blank lines)"),
    (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1e400 t\n", "r.trec:2: field 'score': not a finite number"),
    (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 inf t\n", "r.trec:2: field 'score': not a number: 'inf'"),
])
def test_stream_refuses_what_the_in_memory_reader_refuses(tmp_path, data, expected):
    path = tmp_path / "r.trec"
    path.write_bytes(data)
    message = _message(_in_memory, path)
    assert expected in message
    for kwargs in ({}, {"grouped": False}, {"block_rows": 1}):
        assert _message(lambda p, kw=kwargs: _streamed(p, **kw), path) == message, kwargs
    qrels = tmp_path / "q.txt"
    qrels.write_bytes(b"q1 0 a 1\n")
    result = CliRunner().invoke(main, ["eval", str(qrels), str(path), "--stream", "-m", "map"])
    assert result.exit_code == 2 and result.stderr == f"rankwise: error: {message}\n"


@pytest.mark.parametrize("data", [
    b"q1 Q0 a 1 1 t\rq1 Q0 b 2 2 t\rq1 Q0 c 3 3 t\r",  # CR line ends
    b"q1 Q0 a 1 1 t\rq1  Q0 b 2 2 t\rq1 Q0 c 3 3 t\r",  # and an irregular line: once the line-by-line path
    b"\xef\xbb\xbfq1  Q0 a 1 1 t\nq1 Q0 b 2 2 t\nq1 Q0 c 3 3 t\n",  # a byte-order mark, the same path
    b"\xef\xbb\xbfq1 Q0 a 1 1 t\r\nq1 Q0 b 2 2 t\r\nq1 Q0 c 3 3 t\r\n",
])
def test_stream_reads_cr_line_ends_and_a_bom_as_memory_does(tmp_path, data):
    path = tmp_path / "r.trec"
    path.write_bytes(data)
    expected = {"q1": (["c", "b", "a"], [3.0, 2.0, 1.0])}
    assert _in_memory(path) == expected
    for kwargs in ({}, {"grouped": False}, {"block_rows": 1}):
        assert _streamed(path, **kwargs) == expected, kwargs
    result = evaluate_stream({"q1": {"a": 1, "b": 1, "c": 1}}, path, ["map", "num_ret"])
    assert result.mean == {"map": 1.0, "num_ret": 3.0}


def test_pieces_never_split_a_crlf_and_count_lines_across(tmp_path):
    """Read in pieces of about one line, every line end kind mixed: the same rows and line numbers.
    """
    from rankwise.data.stream import _text_batches

    lines = [f"q{i // 5} Q0 d{i} {i} {i / 7!r} t" for i in range(40)]
    ends = [b"\n", b"\r\n", b"\r"]
    data = b"".join(line.encode() + ends[i % 3] for i, line in enumerate(lines)) + b"# end\r\n\r\n"
    path = tmp_path / "r.trec"
    path.write_bytes(data + b"q9 Q0 x 1 zz t\n")
    with pytest.raises(InputError, match=r"r.trec:43: field 'score': not a number: 'zz'"):
        list(_text_batches(path, 1))
    path.write_bytes(data)
    for rows in (1, 2, 7, 10**6):
        got = list(_text_batches(path, rows))
        assert [n for part in got for n in part[3].tolist()] == list(range(1, 41)), rows
        assert [s for part in got for s in part[2].tolist()] == [i / 7 for i in range(40)], rows


# ------------------------------------------------------------------ issue 20: Parquet, one set of
# rules
def _table(**columns):
    return pa.Table.from_arrays(list(columns.values()), names=[n.rstrip("_") for n in columns])


@pytest.mark.parametrize(("table", "expected"), [
    (_table(query_id=pa.array([1, 1, 2]), doc_id=pa.array([10, 11, 12]), score=pa.array([1.0, 2.0, 3.0])),
     {"1": (["11", "10"], [2.0, 1.0]), "2": (["12"], [3.0])}),
    (_table(query_id=pa.array(["q", "q"]).dictionary_encode(), doc_id=pa.array(["a", "b"]).dictionary_encode(),
            score=pa.array([2**64 - 1, 5], pa.uint64())),
     {"q": (["a", "b"], [float(2**64 - 1), 5.0])}),
    (_table(query_id=pa.array(["q", "q"], pa.large_string()), doc_id=pa.array(["a", "b"], pa.large_string()),
            score=pa.array([1, 2], pa.int8())),
     {"q": (["b", "a"], [2.0, 1.0])}),
])
def test_parquet_runs_read_alike_in_memory_and_streamed(tmp_path, table, expected):
    path = tmp_path / "run.parquet"
    pq.write_table(table, path)
    assert _in_memory(path) == expected
    for kwargs in ({}, {"grouped": False}):
        assert _streamed(path, **kwargs) == expected


@pytest.mark.parametrize(("table", "expected"), [
    (_table(query_id=pa.array(["q"]), doc_id=pa.array(["a"]), score=pa.array([1.0]), query_id_=pa.array(["q"])),
     "run.parquet: field 'query_id': column 'query_id' appears 2 times; keep one"),
    (_table(query_id=pa.array([], pa.string()), doc_id=pa.array([], pa.string()), score=pa.array([], pa.float64())),
     "run.parquet: no rows (the Parquet file holds no run)"),
    (_table(query_id=pa.array(["q", None]), doc_id=pa.array(["a", "b"]), score=pa.array([1.0, 2.0])),
     "run.parquet:2: field 'query_id': missing id"),
    (_table(query_id=pa.array(["q", "q"]), doc_id=pa.array(["a", "b"]), score=pa.array([1.0, float("nan")])),
     "run.parquet:2: field 'score': score is not a finite number: nan"),
    (_table(query_id=pa.array(["q", "q"]), doc_id=pa.array(["a", "a"]), score=pa.array([1.0, 2.0])),
     "run.parquet:2: field 'doc_id': doc 'a' appears twice in query 'q' (first at line 1)"),
])
def test_bad_parquet_runs_fail_alike_in_memory_and_streamed(tmp_path, table, expected):
    path = tmp_path / "run.parquet"
    pq.write_table(table, path)
    message = _message(_in_memory, path)
    assert message.endswith(expected), message
    for kwargs in ({}, {"grouped": False}):
        assert _message(lambda p, kw=kwargs: _streamed(p, **kw), path) == message


@pytest.mark.parametrize("data", [b"", b"PAR1", b"PAR1" + b"\0" * 40 + b"PAR1", b"not parquet at all\n"])
def test_corrupt_parquet_files_are_one_line_errors(tmp_path, data):
    from rankwise.data.load import load_qrels
    from rankwise.data.testset import load_testset

    for name, read in (("run.parquet", _in_memory), ("run.parquet", _streamed), ("q.parquet", load_qrels),
                       ("t.parquet", load_testset)):
        path = tmp_path / name
        path.write_bytes(data)
        assert "not a readable Parquet file" in _message(read, path)


@pytest.mark.parametrize(("grades", "message"), [
    (pa.array([1.0, 1e30, 1.0]), "q.parquet:2: field 'relevance': integer out of range (beyond 64 bits): 1e+30"),
    (pa.array([1, 2**63 + 5, 1], pa.uint64()),
     "q.parquet:2: field 'relevance': integer out of range (beyond 64 bits): 9223372036854775813"),
    (pa.array([1.0, 2.5, 1.0]), "q.parquet:2: field 'relevance': not an integer: 2.5"),
    (pa.array([1.0, float("inf"), 1.0]), "q.parquet:2: field 'relevance': not an integer: inf"),
    (pa.array([1, None, 1]), "q.parquet:2: field 'relevance': missing relevance"),
])
def test_parquet_grades_beyond_int64_are_errors(tmp_path, grades, message):
    from rankwise.data.load import load_qrels

    path = tmp_path / "q.parquet"
    pq.write_table(pa.table({"query_id": ["q"] * 3, "doc_id": ["a", "b", "c"], "relevance": grades}), path)
    assert _message(load_qrels, path).endswith(message)
    result = CliRunner().invoke(main, ["eval", str(path), str(path), "-m", "map"])
    assert result.exit_code == 2 and result.stderr.endswith(message + "\n")


def test_parquet_integer_grades_within_range_are_read(tmp_path):
    from rankwise.data.load import load_qrels

    path = tmp_path / "q.parquet"
    pq.write_table(pa.table({"query_id": ["q"] * 3, "doc_id": ["a", "b", "c"],
                             "relevance": pa.array([1, 2**62, 0], pa.uint64())}), path)
    assert load_qrels(path).judgements("q") == {"a": 1, "b": 2**62, "c": 0}
    pq.write_table(pa.table({"query_id": ["q"] * 2, "doc_id": ["a", "b"], "relevance": [2.0, -1.0]}), path)
    assert load_qrels(path).judgements("q") == {"a": 2, "b": -1}


# ------------------------------------------- issue 33: a Parquet run without scores, streamed as in
# memory
@pytest.fixture(scope="module")
def unscored(files):
    """run.trec's rankings as Parquet rows without a score column, each query's rows in rank order:
    grouped (``grouped.parquet``) and with the queries interleaved (``interleaved.parquet``, a
    ``rank`` column the readers ignore, as they do in memory)."""
    from rankwise.data.load import load_run

    run = load_run(files / "run.trec")
    rows = [(q, doc) for q in run.queries for doc in run.ranking(q)]
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows]}),
                   files / "grouped.parquet", row_group_size=7_000)
    slots = np.random.default_rng(5).permutation(len(rows))  # queries interleaved, each query's order kept
    by_query = np.repeat(np.arange(run.n_queries), np.diff(run.offsets))
    order = np.empty(len(rows), dtype=np.int64)
    for code in range(run.n_queries):
        mine = np.flatnonzero(by_query == code)
        order[np.sort(slots[mine])] = mine
    ranks = run.ranks()
    pq.write_table(pa.table({"query_id": [rows[i][0] for i in order], "doc_id": [rows[i][1] for i in order],
                             "rank": pa.array(ranks[order].tolist(), pa.int64())}),
                   files / "interleaved.parquet", row_group_size=7_000)
    return files


@pytest.mark.parametrize("missing", ["zero", "skip"])
@pytest.mark.parametrize("name", ["grouped.parquet", "interleaved.parquet"])
def test_parquet_without_scores_streams_the_in_memory_numbers(unscored, name, missing):
    """Without a score column the rows' order within a query ranks, in memory and streamed alike (it
    was refused by --stream: "no column 'score'"): here the same rankings as run.trec, so the same
    digits."""
    reference = evaluate(unscored / "qrels.txt", unscored / "run.trec", MEASURES, missing=missing)
    in_memory = evaluate(unscored / "qrels.txt", unscored / name, MEASURES, missing=missing)
    _same(in_memory, reference)
    for block_rows in (7_000, 100_000):
        streamed = evaluate_stream(unscored / "qrels.txt", unscored / name, MEASURES, missing=missing,
                                   block_rows=block_rows, workdir=unscored)
        _same(streamed, reference)


def test_cli_streams_a_parquet_run_without_scores(unscored):
    def cli(*args):
        out = run_cli(["eval", str(unscored / "qrels.txt"), *args, "--format", "trec", "-m", "map,ndcg@10,P@10"],
                      capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if not line.startswith("runid")]

    in_memory = cli(str(unscored / "interleaved.parquet"))
    assert in_memory == cli(str(unscored / "run.trec"))
    assert cli(str(unscored / "interleaved.parquet"), "--stream", "--block-rows", "5000") == in_memory
    assert cli(str(unscored / "grouped.parquet"), "--stream", "--block-rows", "5000") == in_memory


@pytest.mark.parametrize(("table", "expected"), [
    (_table(query_id=pa.array(["q", "q", "p"]), doc_id=pa.array(["b", "a", "c"])),
     {"q": (["b", "a"], None), "p": (["c"], None)}),
    (_table(query_id=pa.array([1, 2, 1]), doc_id=pa.array([10, 12, 11]), rank=pa.array([2, 1, 1])),
     {"1": (["10", "11"], None), "2": (["12"], None)}),
    (_table(query_id=pa.array(["q", "p", "q", "q"]).dictionary_encode(),
            doc_id=pa.array(["z", "a", "y", "x"], pa.large_string())),
     {"q": (["z", "y", "x"], None), "p": (["a"], None)}),
])
def test_parquet_runs_without_scores_read_alike_in_memory_and_streamed(tmp_path, table, expected):
    """The mutants --stream refused: no score column (only ids; a rank column the readers leave
    aside; integer, dictionary-encoded and large-string ids), grouped or not, in blocks of one row
    or many."""
    path = tmp_path / "run.parquet"
    pq.write_table(table, path)
    assert _in_memory(path) == expected
    for kwargs in ({}, {"grouped": False}, {"block_rows": 1}, {"block_rows": 1, "grouped": False}):
        assert _streamed(path, **kwargs) == expected, kwargs
    qrels = {q: {docs[-1]: 1} for q, (docs, _) in expected.items()}
    metrics = ["map", "mrr", "num_ret"]
    assert evaluate_stream(qrels, path, metrics, block_rows=1).mean == evaluate(qrels, path, metrics).mean


@pytest.mark.parametrize(("table", "expected"), [
    (_table(query_id=pa.array(["q", "q"]), doc_id=pa.array(["a", "a"])),
     "run.parquet:2: field 'doc_id': doc 'a' appears twice in query 'q' (first at line 1)"),
    (_table(query_id=pa.array(["q", "q"]), doc_id=pa.array(["a", None])), "run.parquet:2: field 'doc_id': missing id"),
])
def test_bad_parquet_runs_without_scores_fail_alike(tmp_path, table, expected):
    path = tmp_path / "run.parquet"
    pq.write_table(table, path)
    message = _message(_in_memory, path)
    assert message.endswith(expected), message
    for kwargs in ({}, {"grouped": False}, {"block_rows": 1}):
        assert _message(lambda p, kw=kwargs: _streamed(p, **kw), path) == message, kwargs


def test_pieces_reuse_one_buffer_unless_something_still_views_it(tmp_path):
    """A file read in pieces goes through one buffer, resized and read into again once the last
    piece is parsed; while anything still views a piece (an array made on its bytes, say), the next
    piece gets a buffer of its own and the viewed bytes stay as they were."""
    from pathlib import Path

    from rankwise.data.stream import _pieces

    path = tmp_path / "run.trec"
    lines = [f"q{i % 7} Q0 d{i} {i} {i / 3:.4f} tag\n".encode() for i in range(20_000)]
    path.write_bytes(b"".join(lines))
    with open(path, "rb") as fh:
        seen = [(id(piece), bytes(piece)) for piece in _pieces(fh, Path(path), 1000)]
    assert len(seen) > 10 and len({i for i, _ in seen[:-1]}) == 1  # (the last: the unfinished line's own)
    assert b"".join(b for _, b in seen) == path.read_bytes()
    with open(path, "rb") as fh:
        held = [(memoryview(piece), bytes(piece)) for piece in _pieces(fh, Path(path), 1000)]
    assert all(bytes(view) == copy for view, copy in held)
    assert b"".join(copy for _, copy in held) == path.read_bytes()
