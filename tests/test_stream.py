"""Runs larger than memory: streamed evaluation (block by block, grouped files read directly, others
partitioned on disk) gives the in-memory result to the last digit; Parquet runs and qrels are read."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _inprocess import run_cli
from rankwise import evaluate
from rankwise.data.stream import NotGrouped, iter_run_blocks
from rankwise.errors import InputError
from rankwise.metrics.stream import evaluate_stream

MEASURES = ["P@10", "recall@100", "ndcg@10", "map", "mrr", "bpref", "num_ret", "num_rel_ret", "r_precision",
            "ndcg"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """1e5 rows over 1,000 queries (grouped, depth 40-160), with ties and scores in several notations;
    qrels for 900 of them plus 60 queries the run lacks; 30 run queries are not in the qrels."""
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
    with pytest.raises(NotGrouped):
        list(iter_run_blocks(files / "shuffled.trec", block_rows=10_000))
    parts = list(iter_run_blocks(files / "shuffled.trec", block_rows=10_000, grouped=False, workdir=files))
    seen = [q for b in parts for q in b.queries]
    assert len(seen) == len(set(seen)) == 1000 and len(parts) >= 8
    assert not list(files.glob("rankwise-partitions-*"))  # the partitions are removed


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


@pytest.mark.parametrize(("text", "message"), [
    ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 x t\n", r"r.trec:2: field 'score': not a number: 'x'"),
    ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0\n", r"r.trec:2: field 'run_id': expected 6 fields .*got 5"),
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
    """Lines Arrow's fixed-delimiter reader cannot take are read exactly (split on whitespace), so the
    streamed numbers are the in-memory reader's, wherever in the file such a line stands."""
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
