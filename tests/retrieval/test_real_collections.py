"""BM25 on the real Cranfield and CISI collections (BEIR layout in tests/fixtures), scored against
their qrels.

BM25 (bm25s, Lucene variant, k1 1.5, b 0.75, Snowball English stemming, Lucene's English stopwords,
title + text) is deterministic, so the values are pinned to 3 decimals. Dense and hybrid figures,
with timings, are in docs/retrieval.md (benchmarks/retrieval_real_collections.py measures them).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rankwise import evaluate
from rankwise.cli import main
from rankwise.retrieval import load_beir, read_chunks, run_retrieval

MEASURES = ["ndcg@10", "map", "recall@100"]
EXPECTED = {
    "cranfield": {"ndcg@10": 0.373, "map": 0.304, "recall@100": 0.738},
    "cisi": {"ndcg@10": 0.386, "map": 0.168, "recall@100": 0.440},
}


@pytest.fixture(scope="module", params=["cranfield", "cisi"])
def collection(request, shared_data):
    return request.param, load_beir(shared_data / request.param)


def test_collections_load_with_their_documented_counts(collection):
    name, data = collection
    counts = {"cranfield": (1400, 225, 225), "cisi": (1460, 112, 76)}[name]
    assert (len(data.corpus), len(data.queries), data.qrels.n_queries) == counts


def test_bm25_whole_documents(collection):
    name, data = collection
    res = run_retrieval(data.corpus, data.queries, "bm25", k=100, quiet=True)
    result = evaluate(data.qrels, res.run, MEASURES)
    assert {m: round(v, 3) for m, v in result.mean.items()} == EXPECTED[name]
    # Cranfield documents 471 and 995 are empty: nothing to index, so 1398 chunks
    assert len(res.chunks) == {"cranfield": 1398, "cisi": 1460}[name]


def test_bm25_chunked_and_lifted_to_documents_stays_close(collection):
    """Chunks of 500 characters (100 overlap), lifted to documents: within 0.03 of whole documents.
    """
    name, data = collection
    res = run_retrieval(data.corpus, data.queries, "bm25", k=1000, chunk_size=500, chunk_overlap=100, quiet=True)
    docs = res.documents(100)
    for q in docs.queries:
        ranking = docs.ranking(q)
        assert len(ranking) == len(set(ranking)) <= 100
    result = evaluate(data.qrels, docs, MEASURES).mean
    for m in MEASURES:
        assert abs(result[m] - EXPECTED[name][m]) < 0.03, (m, result[m])
    assert max(c.end - c.start for c in res.chunks) <= 500


def test_cli_run_then_eval_scores_cranfield_end_to_end(shared_data, tmp_path):
    out = tmp_path / "r.trec"
    runner = CliRunner()
    ran = runner.invoke(main, ["run", "--beir", str(shared_data / "cranfield"), "--retriever", "bm25",
                               "--out", str(out), "--quiet"])
    assert ran.exit_code == 0, ran.output
    assert len(out.read_text().splitlines()) == 225 * 100
    assert len(read_chunks(tmp_path / "r.trec.chunks.jsonl")) > 1000
    scored = runner.invoke(main, ["eval", str(shared_data / "cranfield" / "qrels" / "test.tsv"), str(out),
                                  "-m", ",".join(MEASURES), "--format", "json"])
    assert scored.exit_code == 0, scored.output
    mean = json.loads(scored.output)["mean"]
    assert {m: round(mean[m], 3) for m in MEASURES} == EXPECTED["cranfield"]
