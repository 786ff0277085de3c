"""Corpora, BM25, dense + FAISS with the embedding cache, fusion, reranking, lifting, pipeline and
`rankwise run`."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data import Run, read_trec_run
from rankwise.errors import InputError, RankwiseError
from rankwise.retrieval import (
    BM25Retriever,
    Corpus,
    CorpusChunk,
    DenseRetriever,
    Document,
    HybridRetriever,
    RerankRetriever,
    RetrieverSpec,
    chunk_corpus,
    fuse,
    lift_to_documents,
    load_beir,
    load_corpus,
    load_queries,
    read_chunks,
    reciprocal_rank_fusion,
    rerank,
    run_retrieval,
    run_retrievers,
    save_run,
    score_fusion,
)
from rankwise.retrieval.bm25 import Tokenizer
from rankwise.retrieval.dense import Embedder
from rankwise.retrieval.reranking import CrossEncoderScorer

# A small corpus where paraphrased questions share (almost) no word with the passage that answers
# them.
DOCS = {
    "car": "The automobile would not start because its battery had gone flat overnight.",
    "bake": "Preheat the oven to 200 degrees and bake the bread for forty minutes.",
    "cat": "Felines sleep for up to sixteen hours a day, mostly during daylight.",
    "rain": "Heavy precipitation flooded the valley and closed the mountain roads.",
    "loan": "The bank approved the mortgage after checking the applicant's income.",
    "flu": "Influenza spreads through droplets when infected people cough or sneeze.",
    "chess": "A grandmaster sacrificed her queen to force checkmate in three moves.",
    "moon": "Astronauts first walked on the lunar surface in July 1969.",
    "piano": "She practised scales on the keyboard instrument every morning before school.",
    "tax": "Citizens must file their income returns with the revenue agency by April.",
    "coffee": "Espresso is brewed by forcing hot water through finely ground beans.",
    "soccer": "The striker scored twice and his club won the championship final.",
    "volcano": "Molten rock erupted from the crater and buried the nearby village in ash.",
    "python": "Indentation defines code blocks in the Python programming language.",
    "garden": "Tomatoes need full sun, regular watering and support stakes as they grow.",
    "sleep": "Adults should get seven to nine hours of rest each night for good health.",
    "whale": "The blue whale is the largest animal ever known to have lived.",
    "train": "The express railway connects the two capitals in under three hours.",
    "password": "Use a long passphrase and enable two-factor authentication on accounts.",
    "bread": "Sourdough relies on wild yeast and lactic bacteria for its rise.",
    "ocean": "Tides are caused mainly by the gravitational pull of the moon.",
    "wedding": "The couple exchanged rings in front of two hundred guests.",
    "desert": "Camels store fat in their humps to survive long journeys without food.",
    "violin": "A luthier carved the spruce top of the string instrument by hand.",
}
PARAPHRASES = {
    "q-car": "my vehicle won't turn on, dead accumulator",
    "q-cat": "how long do kitties nap",
    "q-flu": "how does a virus pass between sick people",
    "q-moon": "when did humans land on the moon",
    "q-tax": "deadline for submitting earnings declarations to the government",
}
ANSWER = {q: q[2:] for q in PARAPHRASES}


def _chunks(texts: dict[str, str]) -> list[CorpusChunk]:
    return chunk_corpus(Corpus.from_dict(texts))


# -----------------------------------------------------------------------------------------------
# corpora
def test_text_folder_ids_are_relative_paths_and_text_is_exact(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "setup.md").write_bytes("\ufeff# Setup\r\nRun it.\r\n".encode())
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.md").write_text("secret")
    corpus = load_corpus(tmp_path)
    assert corpus.ids == ["a.txt", "guide/setup.md"]
    assert corpus["guide/setup.md"].text == "# Setup\r\nRun it.\r\n"  # BOM dropped, CRLF kept


def test_text_folder_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(InputError) as err:
        load_corpus(tmp_path)
    assert err.value.source.endswith("bad.txt") and err.value.line == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no text files"):
        load_corpus(empty)
    with pytest.raises(InputError, match="no such file or folder"):
        load_corpus(tmp_path / "missing")


def test_jsonl_corpus_fields_and_errors(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "d1", "title": "T1", "text": "one"}\n\n{"id": 2, "text": "two"}\n')
    corpus = load_corpus(path)
    assert [(d.id, d.title, d.text) for d in corpus] == [("d1", "T1", "one"), ("2", None, "two")]
    cases = [
        ('{"id": "a"}\n', 1, "text"),
        ('{"id": "a", "text": "x"}\n{"text": "y"}\n', 2, "id"),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', 2, "id"),
        ('{"id": "a", "text": 5}\n', 1, "text"),
        ('{"id": "a", "text": "x"}\n{oops\n', 2, None),
    ]
    for content, line, field in cases:
        path.write_text(content)
        with pytest.raises(InputError) as err:
            load_corpus(path)
        assert (err.value.line, err.value.field) == (line, field), content
        assert str(path) in str(err.value)


def _beir(tmp_path, qrels=True):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n"
                                                   for k, v in DOCS.items()))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                    for q, t in PARAPHRASES.items()))
    if qrels:
        (tmp_path / "qrels").mkdir()
        (tmp_path / "qrels" / "test.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in ANSWER.items()))
    return tmp_path


def test_beir_folder(tmp_path):
    data = load_beir(_beir(tmp_path))
    assert len(data.corpus) == 24 and data.queries["q-cat"] == "how long do kitties nap"
    assert data.qrels.judgements("q-car") == {"car": 1}
    with pytest.raises(InputError, match="no qrels for split 'dev'; splits found: test"):
        load_beir(tmp_path, split="dev")
    (tmp_path / "queries.jsonl").unlink()
    with pytest.raises(InputError, match="no queries.jsonl"):
        load_beir(tmp_path)


def test_queries_from_jsonl_testset_and_tsv(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"question": "first?"}\n{"id": "x", "user_input": "second?"}\n')
    assert load_queries(p) == {"1": "first?", "x": "second?"}
    t = tmp_path / "q.tsv"
    t.write_text("query_id\ttext\nq1\thello world\nq2\tbye\n")
    assert load_queries(t) == {"q1": "hello world", "q2": "bye"}
    t.write_text("q1\thello\nq1\tagain\n")
    with pytest.raises(InputError) as err:
        load_queries(t)
    assert err.value.line == 2 and "appears twice" in str(err.value)
    p.write_text('{"id": "a", "title": "no text"}\n')
    with pytest.raises(InputError) as err:
        load_queries(p)
    assert (err.value.line, err.value.field) == (1, "text")


# -----------------------------------------------------------------------------------------------
# BM25
def test_bm25_scores_are_lucene_bm25():
    """Score of a one-term query = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)) (Lucene, bm25s).
    """
    texts = {"a": "wing wing flow", "b": "wing", "c": "heat transfer in slabs", "d": "flow"}
    r = BM25Retriever(stemmer=None, stopwords=None, quiet=True)
    r.index(_chunks(texts))
    run = r.search({"q": "wing"}, k=10)
    lengths = {"a": 3, "b": 1, "c": 4, "d": 1}
    avgdl, n, df, k1, b = sum(lengths.values()) / 4, 4, 2, 1.5, 0.75
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = {d: idf * tf / (tf + k1 * (1 - b + b * lengths[d] / avgdl)) for d, tf in (("a", 2), ("b", 1))}
    got = run.to_dict()["q"]
    assert list(got) == ["b", "a"]  # short b beats a (length normalisation); c and d share no term
    for d, score in expected.items():
        assert got[d] == pytest.approx(score, rel=1e-6)


def test_bm25_stemming_and_stopwords():
    assert Tokenizer().tokenize("The Wings are flowing") == ["wing", "flow"]
    assert Tokenizer(stemmer=None, stopwords=None).tokenize("The Wings") == ["the", "wings"]
    chunks = _chunks({"d1": "a wing in the flow", "d2": "a slab"})
    stem = BM25Retriever(quiet=True)
    stem.index(chunks)
    plain = BM25Retriever(stemmer=None, quiet=True)
    plain.index(chunks)
    assert stem.search({"q": "wings"}, 5).ranking("q") == ["d1"]
    assert plain.search({"q": "wings"}, 5).ranking("q") == []
    run = stem.search({"q": "the of and", "q2": "slab"}, 5)  # only stopwords: nothing to match
    assert run.queries == ["q2"]
    with pytest.raises(InputError, match="no Snowball stemmer"):
        BM25Retriever(stemmer="klingon")


def test_bm25_titles_are_searched_and_ties_break_by_id_descending():
    docs = [Document("d1", "same text", title="Aerofoil"), Document("d2", "same text"), Document("d3", "same text")]
    r = BM25Retriever(quiet=True)
    r.index(chunk_corpus(docs))
    assert r.search({"q": "aerofoil"}, 5).ranking("q") == ["d1"]
    assert r.search({"q": "text"}, 2).ranking("q") == ["d3", "d2"]  # equal scores: larger id first, cut at k


def test_retriever_argument_errors():
    r = BM25Retriever(quiet=True)
    with pytest.raises(RankwiseError, match="call index"):
        r.search({"q": "x"}, 5)
    with pytest.raises(InputError, match="nothing to index"):
        r.index([])
    with pytest.raises(InputError, match="appears twice"):
        r.index([CorpusChunk("a", "a", 0, 1, "x"), CorpusChunk("a", "a", 0, 1, "x")])
    r.index(_chunks({"a": "x y"}))
    with pytest.raises(InputError) as err:
        r.search({"q": "x"}, 0)
    assert err.value.field == "k"


# -----------------------------------------------------------------------------------------------
# dense
@pytest.fixture(scope="module")
def dense_cold(tmp_path_factory):
    """One cold dense run (fresh cache): loads the bundled all-MiniLM-L6-v2 and embeds 24 chunks + 5
    queries."""
    cache = tmp_path_factory.mktemp("embeddings")
    r = DenseRetriever(cache_dir=cache, quiet=True)
    r.index(_chunks(DOCS))
    run = r.search(PARAPHRASES, k=5)
    return cache, r, run


def test_dense_finds_paraphrases_bm25_misses(dense_cold):
    _, _, run = dense_cold
    assert {q: run.ranking(q)[0] for q in PARAPHRASES} == ANSWER
    bm25 = BM25Retriever(quiet=True)
    bm25.index(_chunks(DOCS))
    lexical = bm25.search(PARAPHRASES, k=5)
    assert sum(lexical.ranking(q)[:1] == [ANSWER[q]] for q in PARAPHRASES) <= 2


def test_dense_rerun_embeds_nothing_and_gives_the_same_run(dense_cold):
    cache, cold, run = dense_cold
    assert (cold.embedder.computed, cold.embedder.reused) == (29, 0)
    warm = DenseRetriever(cache_dir=cache, quiet=True)
    warm.index(_chunks(DOCS))
    again = warm.search(PARAPHRASES, k=5)
    assert (warm.embedder.computed, warm.embedder.reused) == (0, 29)
    assert warm.embedder._model is None  # the model was not even loaded
    assert again.to_dict() == run.to_dict()


def test_dense_scores_are_cosine_similarities(dense_cold):
    cache, _, run = dense_cold
    emb = Embedder(cache_dir=cache, quiet=True)
    docs = emb.embed([DOCS["cat"], DOCS["sleep"]])
    query = emb.embed([PARAPHRASES["q-cat"]])[0]
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    scores = run.to_dict()["q-cat"]
    assert scores["cat"] == pytest.approx(float(docs[0] @ query), abs=1e-5)
    assert scores["sleep"] == pytest.approx(float(docs[1] @ query), abs=1e-5)
    assert emb.computed == 0


def test_batches_of_8_on_the_cpu_and_the_same_vectors_as_batches_of_64():
    """The default batch (8 on the CPU, 64 on an accelerator) pads less; the vectors are those of
    one batch of 64 to float32 rounding, and so are the similarities' order."""
    assert Embedder(cache_dir=False).batch_size == 8
    assert Embedder(cache_dir=False, device="cuda").batch_size == 64
    assert Embedder(cache_dir=False, batch_size=3).batch_size == 3
    with pytest.raises(ValueError, match="batch_size must be at least 1, not 0"):
        Embedder(cache_dir=False, batch_size=0)
    texts = [*DOCS.values(), *PARAPHRASES.values()]  # of different lengths: padding differs between the two
    small = Embedder(cache_dir=False, batch_size=2, quiet=True).embed(texts)
    large = Embedder(cache_dir=False, batch_size=64, quiet=True).embed(texts)
    assert small.shape == large.shape and np.abs(small - large).max() < 1e-6
    assert (np.argsort(-(small @ small.T), axis=1) == np.argsort(-(large @ large.T), axis=1)).all()


def test_cache_keys_by_model_and_text(tmp_path):
    emb = Embedder(cache_dir=tmp_path, quiet=True)
    emb.cache.put("model-a", ["hello"], np.array([[3.0, 4.0]], dtype=np.float32))
    assert emb.cache.get("model-a", ["hello"])[0].tolist() == [3.0, 4.0]
    assert emb.cache.get("model-b", ["hello"]) == [None]
    assert emb.cache.get("model-a", ["hello "]) == [None]


def test_unknown_model_fails_fast_with_instructions(tmp_path):
    r = DenseRetriever("no-such-org/no-such-model", cache_dir=tmp_path, quiet=True)
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        r.index(_chunks({"a": "text"}))
    message = str(err.value)
    assert "no-such-org/no-such-model" in message and "offline" in message
    assert "path to a downloaded model folder" in message and "RANKWISE_ALLOW_DOWNLOAD" in message
    assert time.perf_counter() - start < 60  # no network wait (import of sentence-transformers aside)
    with pytest.raises(InputError, match="does not exist"):
        DenseRetriever("./no/such/folder", cache_dir=tmp_path)


def test_cross_encoder_not_available_offline_is_a_clear_error():
    with pytest.raises(InputError) as err:
        CrossEncoderScorer("cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in str(err.value) and "offline" in str(err.value)


def test_an_embedding_model_is_refused_as_a_cross_encoder():
    from rankwise.retrieval.models import bundled_model_path

    with pytest.raises(InputError, match="not a cross-encoder"):
        CrossEncoderScorer(str(bundled_model_path()))


# -----------------------------------------------------------------------------------------------
# fusion
def test_reciprocal_rank_fusion_values():
    a = Run.from_dict({"q": ["d1", "d2"]})
    b = Run.from_dict({"q": {"d2": 9.0, "d3": 1.0}})
    fused = reciprocal_rank_fusion([a, b]).to_dict()["q"]
    assert list(fused) == ["d2", "d1", "d3"]
    assert fused["d2"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["d1"] == pytest.approx(1 / 61) and fused["d3"] == pytest.approx(1 / 62)
    weighted = reciprocal_rank_fusion([a, b], weights=[2, 1], k=0).to_dict()["q"]
    assert weighted == pytest.approx({"d1": 2.0, "d2": 1.0 + 1.0, "d3": 0.5})
    assert reciprocal_rank_fusion([a, b], depth=1).to_dict()["q"] == pytest.approx({"d1": 1 / 61, "d2": 1 / 61})


def test_weighted_min_max_fusion_values():
    a = Run.from_dict({"q": {"d1": 10.0, "d2": 5.0, "d3": 0.0}, "solo": {"x": 3.0}})
    b = Run.from_dict({"q": {"d3": 0.9, "d2": 0.8, "d4": 0.1}})
    fused = score_fusion([a, b], weights=[0.7, 0.3]).to_dict()
    assert fused["q"] == pytest.approx({"d1": 0.7, "d2": 0.35 + 0.3 * 0.875, "d3": 0.3, "d4": 0.0})
    assert fused["solo"] == {"x": 0.7}  # a single hit normalises to 1
    assert list(score_fusion([a, b]).to_dict()["q"]) == ["d2", "d3", "d1", "d4"]  # d1, d3 tie at 0.5


def test_fusion_argument_errors():
    a = Run.from_dict({"q": ["d1"]})
    with pytest.raises(InputError, match="two or more"):
        reciprocal_rank_fusion([a])
    with pytest.raises(InputError, match="1 weights for 2 runs"):
        reciprocal_rank_fusion([a, a], weights=[1])
    with pytest.raises(InputError, match="no scores"):
        score_fusion([a, a])
    with pytest.raises(InputError, match="unknown fusion"):
        fuse([a, a], "max")
    with pytest.raises(InputError, match="two or more retrievers"):
        HybridRetriever([BM25Retriever()])


def test_hybrid_retriever_fuses_its_components():
    chunks = _chunks(DOCS)
    bm25, plain = BM25Retriever(quiet=True), BM25Retriever(stemmer=None, stopwords=None, name="plain", quiet=True)
    hybrid = HybridRetriever([bm25, plain], method="weighted", depth=10)
    hybrid.index(chunks)
    got = hybrid.search(PARAPHRASES, k=3)
    expected = score_fusion([bm25.search(PARAPHRASES, 10), plain.search(PARAPHRASES, 10)], name="hybrid").truncate(3)
    assert got.to_dict() == expected.to_dict()


# -----------------------------------------------------------------------------------------------
# rerank
def test_rerank_with_a_callable_reorders_the_top_n_only():
    run = Run.from_dict({"q": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}})
    texts = {"a": "x", "b": "xxx", "c": "xx", "d": "xxxxxxx"}
    out = rerank(run, {"q": "?"}, texts, lambda q, t: float(len(t)), top_n=3)
    assert out.to_dict()["q"] == {"b": 3.0, "c": 2.0, "a": 1.0, "d": 0.0}


def test_rerank_retriever_and_batch_scorer():
    class Overlap:
        calls = 0

        def score_pairs(self, pairs):
            Overlap.calls += 1
            return [len(set(q.split()) & set(t.split())) + len(t) / 1000 for q, t in pairs]

    r = RerankRetriever(BM25Retriever(quiet=True), Overlap(), top_n=5, quiet=True)
    r.index(_chunks({"a": "red apple pie", "b": "red apple", "c": "green pear"}))
    assert r.search({"q": "red apple pie"}, k=2).ranking("q") == ["a", "b"]
    assert Overlap.calls == 1


def test_rerank_errors():
    run = Run.from_dict({"q": {"a": 1.0}})
    with pytest.raises(RankwiseError, match="nan"):
        rerank(run, {"q": "?"}, {"a": "x"}, lambda q, t: float("nan"))
    with pytest.raises(InputError, match="no text for item 'a'"):
        rerank(run, {"q": "?"}, {}, lambda q, t: 1.0)
    with pytest.raises(InputError, match="model name, a folder or a callable"):
        RerankRetriever(BM25Retriever(), 42)


# -----------------------------------------------------------------------------------------------
# lifting
def test_lift_to_documents_keeps_best_chunk_rank_and_score():
    run = Run.from_dict({"q": {"d1#0-9": 3.0, "d2#0-5": 2.5, "d1#9-20": 2.0, "d3#0-4": 1.0}})
    doc_of = {"d1#0-9": "d1", "d1#9-20": "d1", "d2#0-5": "d2", "d3#0-4": "d3"}
    assert lift_to_documents(run, doc_of).to_dict() == {"q": {"d1": 3.0, "d2": 2.5, "d3": 1.0}}
    assert lift_to_documents(run, doc_of, depth=2).ranking("q") == ["d1", "d2"]
    ordered = Run.from_dict({"q": ["d2#0-5", "d1#0-9", "d2#5-9"]})
    lifted = lift_to_documents(ordered, {"d2#0-5": "d2", "d2#5-9": "d2", "d1#0-9": "d1"})
    assert lifted.kind == "ordered" and lifted.ranking("q") == ["d2", "d1"]
    with pytest.raises(InputError, match="'d3#0-4', which is not in the chunk table"):
        lift_to_documents(run, {c: d for c, d in doc_of.items() if d != "d3"})


# -----------------------------------------------------------------------------------------------
# pipeline
def test_pipeline_shares_components_and_reports_timings(dense_cold):
    cache, _, _ = dense_cold
    results = run_retrievers(DOCS, PARAPHRASES, ["bm25", "dense", "hybrid", "hybrid-weighted"], k=3,
                             cache_dir=cache, quiet=True)
    assert list(results) == ["bm25", "dense", "hybrid", "hybrid-weighted"]
    depth_runs = [run_retrieval(DOCS, PARAPHRASES, kind, k=100, cache_dir=cache, quiet=True).run
                  for kind in ("bm25", "dense")]
    assert results["hybrid"].run.to_dict() == reciprocal_rank_fusion(depth_runs).truncate(3).to_dict()
    assert results["hybrid-weighted"].run.to_dict() == score_fusion(depth_runs).truncate(3).to_dict()
    assert {q: results["dense"].run.ranking(q)[0] for q in PARAPHRASES} == ANSWER
    for res in results.values():
        assert set(res.timings) == {"chunking", "index", "search", "fusion", "rerank", "total"}
        assert res.timings["total"] == pytest.approx(sum(v for k, v in res.timings.items() if k != "total"))
        assert res.run.name == res.name
    assert results["hybrid"].timings["index"] == pytest.approx(
        results["bm25"].timings["index"] + results["dense"].timings["index"])


def test_pipeline_chunks_and_contexts_carry_exact_offsets():
    corpus = Corpus.from_dict({"manual.md": "Intro text here.\n\nThe reset button is red. Press it twice.",
                               "faq.md": "Is the button blue? No."})
    res = run_retrieval(corpus, {"q": "reset button"}, RetrieverSpec("bm25", rerank=lambda q, t: -len(t)),
                        chunk_size=25, chunk_overlap=5, k=3, quiet=True)
    assert res.name == "bm25+rerank"
    for ctx in res.contexts("q"):
        assert set(ctx) == {"id", "text", "doc_id", "start", "end", "score"}
        assert corpus[ctx["doc_id"]].text[ctx["start"]:ctx["end"]] == ctx["text"]
        assert ctx["id"] == f"{ctx['doc_id']}#{ctx['start']}-{ctx['end']}"
    assert res.documents(k=1).ranking("q")[0] in ("manual.md", "faq.md")


def test_custom_retriever_in_the_pipeline():
    from rankwise.retrieval.base import Retriever

    class Reverse(Retriever):
        name = "reverse"

        def index(self, chunks):
            self.ids = [c.id for c in chunks]

        def search(self, queries, k):
            return Run.from_dict({q: {d: float(i) for i, d in enumerate(self.ids)} for q in queries}).truncate(k)

    res = run_retrievers({"a": "x", "b": "y", "c": "z"}, {"q": "?"}, {"mine": Reverse()}, k=2, quiet=True)
    assert res["mine"].run.ranking("q") == ["c", "b"]


def test_save_run_writes_trec_and_chunks(tmp_path):
    corpus = Corpus.from_dict({"d1": "alpha beta gamma. delta epsilon.", "d2": "beta only"})
    res = run_retrieval(corpus, {"q1": "beta", "q2": "delta"}, "bm25", chunk_size=18, quiet=True)
    run_path, chunks_path = save_run(res, tmp_path / "r.trec", doc_level=True, k=10)
    assert chunks_path.name == "r.trec.chunks.jsonl"
    assert read_trec_run(run_path).to_dict()["q1"].keys() == {"d1", "d2"}
    chunks = read_chunks(chunks_path, corpus)
    assert {c.id for c in chunks} == set(res.run.doc_ids.to_pylist())
    _, all_path = save_run(res, tmp_path / "all.jsonl", all_chunks=True)
    assert len(read_chunks(all_path, corpus)) == len(res.chunks)
    assert json.loads((tmp_path / "all.jsonl").read_text().splitlines()[0])["query_id"] == "q1"
    spaced = run_retrieval({"my doc.txt": "beta"}, {"q": "beta"}, "bm25", quiet=True)
    with pytest.raises(InputError, match="'my doc.txt' contains whitespace.*JSONL"):
        save_run(spaced, tmp_path / "s.trec")


# -----------------------------------------------------------------------------------------------
# CLI
def test_cli_run_on_a_folder_writes_run_chunks_and_a_rag_testset(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    manual = "Installing.\n\nRun setup.exe and accept the licence.\n\nResetting.\n\nHold the reset pin for ten seconds."
    (folder / "manual.md").write_text(manual)
    (folder / "notes.txt").write_text("Unrelated notes about lunch.")
    start = manual.index("Hold the reset pin")
    testset = tmp_path / "testset.jsonl"
    testset.write_text(json.dumps({"id": "q1", "question": "how long must I hold the pin?",
                                   "reference_contexts": [{"text": manual[start:], "doc_id": "manual.md",
                                                           "start": start, "end": len(manual)}]}) + "\n")
    out = tmp_path / "out" / "run.trec"
    rag = tmp_path / "rag.jsonl"
    result = CliRunner().invoke(main, ["run", "--corpus", str(folder), "--queries", str(testset), "--chunk-size",
                                       "40", "--chunk-overlap", "0", "--depth", "3", "--out", str(out), "--rag-out",
                                       str(rag), "--quiet"])
    assert result.exit_code == 0, result.output
    run = read_trec_run(out)
    assert run.ranking("q1")[0] == f"manual.md#{start}-{len(manual)}"
    chunks = read_chunks(tmp_path / "out" / "run.trec.chunks.jsonl", load_corpus(folder))
    assert {c.id for c in chunks} == set(run.doc_ids.to_pylist())
    from rankwise.metrics.rag import evaluate_rag

    scored = evaluate_rag(rag, "span", k=[1])
    assert scored.mean["hit_rate@1"] == 1.0


def test_cli_run_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKWISE_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    result = runner.invoke(main, ["run", "--out", str(tmp_path / "r.trec")])
    assert result.exit_code == 2 and "either --beir DIR or both --corpus PATH and --queries PATH" in result.output
    beir = _beir(tmp_path / "b")
    result = runner.invoke(main, ["run", "--beir", str(beir), "--retriever", "dense", "--model",
                                  "no-such-org/no-such-model", "--out", str(tmp_path / "r.trec"), "--quiet"])
    assert result.exit_code == 2 and "rankwise: error:" in result.output and "no-such-org/no-such-model" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(main, ["run", "--beir", str(beir), "--rerank", "cross-encoder/ms-marco-MiniLM-L-6-v2",
                                  "--out", str(tmp_path / "r.trec"), "--quiet"])
    assert result.exit_code == 2 and "cannot load reranker (cross-encoder) model" in result.output
    assert "--rerank" in result.output and "field 'rerank'" not in result.output and "--model" not in result.output
    assert not (tmp_path / "r.trec").exists()


def test_cli_run_beir_defaults_to_whole_documents_at_document_level(tmp_path):
    beir = _beir(tmp_path / "b")
    out = tmp_path / "r.trec"
    result = CliRunner().invoke(main, ["run", "--beir", str(beir), "--out", str(out), "--depth", "5"])
    assert result.exit_code == 0, result.output
    assert f"next: rankwise eval {beir / 'qrels' / 'test.tsv'} {out}" in result.output
    run = read_trec_run(out)
    assert set(run.doc_ids.to_pylist()) <= set(DOCS)
    ev = CliRunner().invoke(main, ["eval", str(beir / "qrels" / "test.tsv"), str(out), "-m", "recall@5",
                                   "--format", "json"])
    assert ev.exit_code == 0
    assert json.loads(ev.output)["mean"]["recall@5"] == pytest.approx(
        sum(ANSWER[q] in run.ranking(q) for q in ANSWER) / 5)


def test_importing_retrieval_loads_no_heavy_library():
    import subprocess
    import sys

    code = ("import sys, rankwise.retrieval, rankwise.cli; "
            "print(sorted(m for m in ('torch', 'faiss', 'bm25s', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
