"""A real cross-encoder path: a tiny randomly initialised BERT cross-encoder built with
``transformers`` (config, weights and a small WordPiece vocabulary saved to a temp folder, nothing
downloaded), loaded by path through ``sentence_transformers.CrossEncoder`` — the code a user runs
with ``cross-encoder/ms-marco-MiniLM-L-6-v2``."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from _extras import need
from rankwise.adapters import rerank_records, run_retriever
from rankwise.analysis.compare import compare_records
from rankwise.datasets import bundled_files
from rankwise.metrics.rag import evaluate_rag
from rankwise.retrieval import CrossEncoderScorer, RetrieverSpec, load_corpus, run_retrievers

TOP_N, KEEP = 10, 5


@pytest.fixture(scope="module")
def kestrel():
    corpus = load_corpus(bundled_files("kestrel").corpus)
    with open(bundled_files("kestrel").questions, encoding="utf-8") as fh:
        questions = [json.loads(line) for line in fh if line.strip()]
    return corpus, questions


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, kestrel):
    """A 2-layer, 32-wide BERT with a one-logit classification head, random weights (seed 0), saved
    by path.

    torch, transformers and sentence_transformers are imported here, not at module level: collecting
    the suite (every xdist worker collects every module) would otherwise pay their ~10 s import."""
    need("sentence_transformers")
    transformers = need("transformers")
    torch = need("torch")
    corpus, questions = kestrel
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = set()
    for text in [d.text for d in corpus] + [q["question"] for q in questions]:
        words.update(re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(str(folder))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                                     initializer_range=0.5,
                                     num_labels=1)
    model = transformers.BertForSequenceClassification(config)
    model.eval()
    model.save_pretrained(str(folder))
    # as cross-encoder/ms-marco-MiniLM-L-6-v2 does: scores are the raw logit (no sigmoid squashing
    # them together)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["sentence_transformers"] = {"activation_fn": "torch.nn.modules.linear.Identity"}
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


def test_loads_by_path_like_a_hub_cross_encoder(tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    user = CrossEncoder(str(tiny_cross_encoder))  # what a user writes with "cross-encoder/ms-marco-MiniLM-L-6-v2"
    pairs = [("what is the default wal sync mode", "The default sync mode is group."),
             ("what is the default wal sync mode", "Backups run nightly.")]
    expected = np.asarray(user.predict(pairs), dtype=np.float64).ravel()
    ours = CrossEncoderScorer(tiny_cross_encoder)
    assert ours.score_pairs(pairs) == pytest.approx(expected.tolist(), abs=1e-6)
    assert expected[0] != expected[1]  # random weights still score pairs differently


def test_top10_in_top5_out_reorders_as_the_scores_say(tiny_cross_encoder, kestrel):
    from sentence_transformers import CrossEncoder

    corpus, questions = kestrel
    questions = questions[:40]
    queries = {q["id"]: q["question"] for q in questions}
    res = run_retrievers(corpus, queries, {"bm25": RetrieverSpec("bm25"),
                                           "bm25+rerank": RetrieverSpec("bm25", rerank=str(tiny_cross_encoder),
                                                                        rerank_top_n=TOP_N)},
                         k=TOP_N, chunk_size=500, chunk_overlap=50, quiet=True)
    bm25, reranked = res["bm25"], res["bm25+rerank"]
    user = CrossEncoder(str(tiny_cross_encoder))
    changed = 0
    for qid, q in queries.items():
        top = bm25.run.ranking(qid)[:TOP_N]
        scores = dict(zip(top, np.asarray(user.predict([(q, bm25.chunk(c).indexed_text) for c in top]),
                                          dtype=np.float64).ravel().tolist(), strict=True))
        got = reranked.run.ranking(qid)[:KEEP]  # retrieve 10, rerank, keep 5
        assert len(got) == KEEP and set(got) <= set(top), qid
        # in the order of the scores the user's CrossEncoder gives (to float noise of batching), the
        # best 5 kept
        assert [scores[c] for c in got] == pytest.approx(sorted(scores.values(), reverse=True)[:KEEP], abs=1e-5)
        assert list(reranked.run.to_dict()[qid].values())[:KEEP] == pytest.approx([scores[c] for c in got], abs=1e-5)
        changed += got != top[:KEEP]
    assert changed >= 0.8 * len(queries)  # random weights reorder nearly every list

    # before / after side by side, top 5 kept after reranking the top 10
    def records(result, keep):
        return [{**q, "retrieved_contexts": result.contexts(q["id"])[:keep]} for q in questions]

    metrics = ["hit_rate@1", "precision@5", "recall@5", "mrr", "ndcg@5", "char_recall@5"]
    before, after = records(bm25, KEEP), records(reranked, KEEP)
    cmp = compare_records({"bm25": before, "bm25+rerank": after}, "span", metrics, permutations=1000)
    for name, rows in (("bm25", before), ("bm25+rerank", after)):
        alone = evaluate_rag(rows, "span", metrics=metrics)
        for m in metrics:
            assert cmp.means[name][m] == pytest.approx(alone.mean[m], abs=1e-12)
    # reranking only reorders the top 10: recall of the 10 bounds it; a random model loses to BM25
    # at rank 1
    assert cmp.means["bm25+rerank"]["hit_rate@1"] < cmp.means["bm25"]["hit_rate@1"]
    assert cmp.comparison("bm25+rerank", "mrr").delta == pytest.approx(
        cmp.means["bm25+rerank"]["mrr"] - cmp.means["bm25"]["mrr"], abs=1e-12)


def test_rerank_any_adapter_output(tiny_cross_encoder, kestrel):
    """A framework's results (here a callable) reranked by the cross-encoder: top 10 in, top 5 out.
    """
    corpus, questions = kestrel
    from rankwise.retrieval import chunk_corpus

    chunks = chunk_corpus(corpus, 400, 0, titles=False)

    def search(q):  # word-overlap retriever with offsets, as any framework would return
        words = set(q.lower().split())
        scored = sorted(chunks, key=lambda c: (-len(words & set(c.text.lower().split())), c.id))[:TOP_N]
        return [{"text": c.text, "doc_id": c.doc_id, "start": c.start, "score": 1.0} for c in scored]

    run = run_retriever(search, questions[:12], k=TOP_N)
    out = rerank_records(run, str(tiny_cross_encoder), top_n=TOP_N, keep=KEEP)
    scorer = CrossEncoderScorer(tiny_cross_encoder)
    for before, after in zip(run.records, out, strict=True):
        s = scorer.score_pairs([(before.question, c.text) for c in before.chunks])
        order = sorted(range(len(s)), key=lambda i: -s[i])[:KEEP]
        assert [c.id for c in after.chunks] == [before.chunks[i].id for i in order]
        assert [c.score for c in after.chunks] == pytest.approx([s[i] for i in order], abs=1e-9)
        assert [c.rank for c in after.chunks] == list(range(1, KEEP + 1))
        assert after.extra["retrieval"]["reranked"]["from_ranks"] == [i + 1 for i in order]
    assert len(run.records[0].chunks) == TOP_N  # the input is left as it was
    assert evaluate_rag(out, "span", k=[5]).summary["evaluated"] == 12


def test_sweep_with_the_cross_encoder_by_path(tiny_cross_encoder, kestrel, tmp_path):
    from rankwise.workflows.sweep_run import sweep

    corpus, _ = kestrel
    res = sweep("kestrel", chunk_sizes=[600], overlaps=[0], retrievers=["bm25", "bm25+rerank"],
                rerank_model=str(tiny_cross_encoder), rerank_top_n=10, permutations=500, progress=False,
                out=tmp_path / "s")
    base, rr = res.records["bm25 recursive 600/0"], res.records["bm25+rerank recursive 600/0"]
    scorer = CrossEncoderScorer(tiny_cross_encoder)
    for b, r in zip(base[:10], rr[:10], strict=True):
        # the reranked top 10 are the BM25 top 10, ordered by the cross-encoder's scores
        assert {c.id for c in r.chunks} == {c.id for c in b.chunks}
        # scored on what was indexed: the document title, then the chunk text
        scores = scorer.score_pairs([(b.question, f"{corpus[c.doc_id].title}\n{c.text}") for c in r.chunks])
        assert [c.score for c in r.chunks] == pytest.approx(scores, abs=1e-5)
        assert all(x >= y for x, y in zip(scores, scores[1:], strict=False)) or max(
            abs(x - y) for x, y in zip(scores, sorted(scores, reverse=True), strict=True)) < 1e-5
    assert res.settings["rerank_model"] == str(tiny_cross_encoder)
    assert res.means["bm25+rerank recursive 600/0"]["mrr"] != res.means["bm25 recursive 600/0"]["mrr"]
    assert res.means["bm25+rerank recursive 600/0"]["recall@10"] == res.means["bm25 recursive 600/0"]["recall@10"]
