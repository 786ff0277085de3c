"""Real in-memory pipelines of LangChain, LlamaIndex and Haystack, run through
``rankwise.adapters``.

Each test scores the framework's retriever with the Kestrel span labels and asserts the metric
values equal those of the same retriever (same chunks, same hashed bag-of-words vectors) run through
rankwise's own pipeline (``DenseRetriever`` + FAISS), or values computed by hand.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings

import pytest

from _extras import need
from _hash_embedder import RankwiseHashEmbedder, hash_embed, langchain_embeddings, llamaindex_embedding
from rankwise.adapters import (
    RetrieverDepthWarning,
    RetrieverRandomIdWarning,
    RetrieverShortListWarning,
    check_adapter,
    run_retriever,
)
from rankwise.datasets import bundled_files
from rankwise.metrics.rag import evaluate_rag
from rankwise.retrieval import CorpusChunk, DenseRetriever, chunk_corpus, load_corpus, run_retrievers

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

K = 10
METRICS = ["hit_rate@1", "hit_rate@5", "precision@5", "recall@10", "mrr", "ndcg@10", "char_recall@10"]


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(bundled_files("kestrel").corpus)


@pytest.fixture(scope="module")
def questions():
    with open(bundled_files("kestrel").questions, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="module")
def chunks(corpus):
    return chunk_corpus(corpus, 500, 50, titles=False)


def ours(chunks: list[CorpusChunk], questions: list[dict], k: int = K):
    """The same dense retriever through rankwise's own pipeline, scored by span: (result, ids per
    case)."""
    res = run_retrievers(None, {q["id"]: q["question"] for q in questions},
                         {"dense": DenseRetriever(embedder=RankwiseHashEmbedder(), quiet=True)}, k=k,
                         chunks=chunks, quiet=True)["dense"]
    rows = [{**q, "retrieved_contexts": res.contexts(q["id"])} for q in questions]
    return evaluate_rag(rows, "span", metrics=METRICS), {q["id"]: _tie_order([(c["id"], c["score"]) for c in
                                                                           res.contexts(q["id"])])
                                                         for q in questions}


def _tie_order(pairs):
    """Ids best first, equal scores (to 5 decimals: FAISS scores in float32) in id order: tie order
    aside."""
    return [i for i, _ in sorted(pairs, key=lambda p: (-round(p[1], 5), p[0]))]


def assert_same(run, expected, expected_ids=None):
    got = run.evaluate("span", metrics=METRICS)
    assert got.summary["evaluated"] == expected.summary["evaluated"] == 73
    for m in METRICS:
        assert got.mean[m] == pytest.approx(expected.mean[m], abs=1e-12), m
    if expected_ids is not None:
        assert {r.id: _tie_order([(c.id, c.score) for c in r.chunks]) for r in run.records} == expected_ids
    return got


def check_offsets(run, corpus):
    """Every chunk's text is exactly its document's text at the offsets the adapter read."""
    n = 0
    for r in run.records:
        for c in r.chunks:
            assert corpus[c.doc_id].text[c.start:c.end] == c.text
            n += 1
    assert n == 73 * K


# ------------------------------------------------------------------------------------------------
# LangChain


def test_langchain_vectorstore_same_numbers_as_rankwise(chunks, questions, corpus):
    need("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(langchain_embeddings())
    store.add_documents([Document(c.text, metadata={"source": c.doc_id, "start_index": c.start}) for c in chunks])
    expected, expected_ids = ours(chunks, questions)
    for retriever in (store, store.as_retriever(search_kwargs={"k": K})):
        with pytest.warns(RetrieverRandomIdWarning, match="random uuids"):
            run = run_retriever(retriever, questions, k=K, concurrency=4)
        assert run.summary["retriever"] == "langchain-vectorstore"
        assert run.summary["id_strategy"] == {"offset": 73 * K}
        assert run.summary["failed"] == 0 and run.summary["duplicates"] == 0
        check_offsets(run, corpus)
        got = assert_same(run, expected, expected_ids)
        # scores kept: the cosine of the hashed vectors
        c = run.records[0].chunks[0]
        assert c.score == pytest.approx(sum(a * b for a, b in zip(hash_embed(questions[0]["question"]),
                                                                  hash_embed(c.text), strict=True)), abs=1e-9)
        assert got.mean["mrr"] > 0.2  # the hashed vectors rank meaningfully


def test_langchain_retriever_batch_no_scores_and_own_splitter(corpus, questions):
    need("langchain_text_splitters")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=600, chunk_overlap=80, add_start_index=True)
    docs = splitter.split_documents([Document(d.text, metadata={"source": d.id}) for d in corpus])
    # LangChain's chunking, as rankwise chunks (doc, start, end) for our own pipeline
    lc_chunks = [CorpusChunk(f"{d.metadata['source']}#{d.metadata['start_index']}-"
                       f"{d.metadata['start_index'] + len(d.page_content)}", d.metadata["source"],
                       d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content), d.page_content)
                 for d in docs]
    lc_chunks = list({c.id: c for c in lc_chunks}.values())
    store = InMemoryVectorStore(langchain_embeddings())
    store.add_documents(docs, ids=[f"{d.metadata['source']}@{i}" for i, d in enumerate(docs)])

    class Wrapped:  # a plain LangChain-style runnable (invoke + batch), no vector store to reach for scores
        def __init__(self, r):
            self.r = r

        def invoke(self, q):
            return self.r.invoke(q)

        def batch(self, qs, config=None):
            return self.r.batch(qs, config=config)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RetrieverRandomIdWarning)  # explicit ids: no uuid warning
        run = run_retriever(Wrapped(store.as_retriever(search_kwargs={"k": K})), questions, k=K)
    assert run.summary["retriever"] == "langchain"
    assert run.summary["id_strategy"] == {"id": 73 * K}
    assert all(c.score is None for r in run.records for c in r.chunks)
    check_offsets(run, corpus)
    expected, _ = ours(lc_chunks, questions)
    assert_same(run, expected)


# ------------------------------------------------------------------------------------------------
# LlamaIndex


def _llama_nodes(corpus, id_func=None):
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    parser = SentenceSplitter(chunk_size=160, chunk_overlap=20, id_func=id_func)
    return parser.get_nodes_from_documents([Document(text=d.text, doc_id=d.id) for d in corpus])


def test_llamaindex_vector_index_same_numbers_and_unstable_ids(corpus, questions):
    need("llama_index.core")
    from llama_index.core import VectorStoreIndex

    def build():
        return VectorStoreIndex(_llama_nodes(corpus), embed_model=llamaindex_embedding()).as_retriever(
            similarity_top_k=K)

    retriever = build()
    with pytest.warns(RetrieverRandomIdWarning, match="id_func"):
        run = run_retriever(retriever, questions, k=K, concurrency=4)
    assert run.summary["retriever"] == "llamaindex"
    assert run.summary["id_strategy"] == {"offset": 73 * K}
    check_offsets(run, corpus)
    li_chunks = list({c.id: CorpusChunk(c.id, c.doc_id, c.start, c.end, c.text)
                      for n in _llama_nodes(corpus)
                      for c in [CorpusChunk(f"{n.ref_doc_id}#{n.start_char_idx}-{n.end_char_idx}", n.ref_doc_id,
                                      n.start_char_idx, n.end_char_idx, corpus[n.ref_doc_id].text[
                                          n.start_char_idx:n.end_char_idx])]}.values())
    expected, expected_ids = ours(li_chunks, questions)
    assert_same(run, expected, expected_ids)

    # node ids are uuid4s: forcing them as ids makes every rebuild change them; check_adapter
    # reports it
    check = check_adapter(build, questions[:5], k=3, id_strategy="id", factory=True)
    assert len(check.changed_ids) == 15 and not check.changed_order and not check.stable
    # the default resolution (offsets) survives the rebuild
    assert check_adapter(build, questions[:5], k=3, factory=True).stable
    # an id_func gives stable native ids
    stable = check_adapter(lambda: VectorStoreIndex(_llama_nodes(corpus, lambda i, doc: f"{doc.doc_id}@{i}"),
                                                    embed_model=llamaindex_embedding()).as_retriever(
        similarity_top_k=3), questions[:5], k=3, id_strategy="id", factory=True)
    assert stable.stable and stable.first.summary["id_strategy"] == {"id": 15}


# ------------------------------------------------------------------------------------------------
# Haystack


def _haystack_docs(corpus, split_length=60, overlap=10):
    from haystack import Document
    from haystack.components.preprocessors import DocumentSplitter

    splitter = DocumentSplitter(split_by="word", split_length=split_length, split_overlap=overlap)
    return splitter.run([Document(content=d.text, meta={"doc_id": d.id}) for d in corpus])["documents"]


def test_haystack_bm25_pipeline_offsets_and_hand_computed_metrics(corpus, questions):
    need("haystack")
    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    docs = _haystack_docs(corpus)
    store.write_documents(docs)
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store))
    run = run_retriever(pipe, questions, k=K, concurrency=4)
    assert run.summary["retriever"] == "haystack-pipeline" and run.summary["failed"] == 0
    assert run.summary["id_strategy"] == {"id": 73 * K}  # Haystack ids hash content + meta: stable
    check_offsets(run, corpus)
    # the same top-k, asked of the component directly, scored by hand: hit@1 and mrr from span
    # overlap
    component = InMemoryBM25Retriever(store, top_k=K)
    assert run_retriever(component, questions[:3], k=K).summary["retriever"] == "haystack-component"
    hits, rr = [], []
    for q in questions:
        got = component.run(query=q["question"])["documents"]
        assert [d.id for d in got] == [c.id for c in next(r for r in run.records if r.id == q["id"]).chunks]

        def relevant(d, q=q):
            s = d.meta["split_idx_start"]
            e = s + len(d.content)
            return any(p["doc_id"] == d.meta["doc_id"] and min(e, p["end"]) - max(s, p["start"])
                       >= 0.5 * min(e - s, p["end"] - p["start"]) for p in q["reference_contexts"])

        flags = [relevant(d) for d in got]
        hits.append(1.0 if flags and flags[0] else 0.0)
        rr.append(next((1 / (i + 1) for i, f in enumerate(flags) if f), 0.0))
    got = run.evaluate("span", metrics=["hit_rate@1", "mrr"])
    assert got.mean["hit_rate@1"] == pytest.approx(sum(hits) / len(hits), abs=1e-12)
    assert got.mean["mrr"] == pytest.approx(sum(rr) / len(rr), abs=1e-12)
    assert got.mean["mrr"] > 0.3


def test_haystack_embedding_retriever_same_numbers_as_rankwise(corpus, questions):
    need("haystack")
    from haystack import Pipeline, component
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    @component
    class HashQueryEmbedder:
        @component.output_types(embedding=list[float])
        def run(self, text: str):
            return {"embedding": hash_embed(text)}

    # Haystack registers a component by its import path and later tests in this process (a traced
    # Haystack pipeline) look registered components up by it: make the path resolve
    HashQueryEmbedder.__qualname__ = "HashQueryEmbedder"
    globals()["HashQueryEmbedder"] = HashQueryEmbedder

    docs = [dataclasses.replace(d, embedding=hash_embed(d.content)) for d in _haystack_docs(corpus)]
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents(docs)
    pipe = Pipeline()
    pipe.add_component("embed", HashQueryEmbedder())
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=K))
    pipe.connect("embed.embedding", "retriever.query_embedding")

    def search(q):  # the pipeline takes the question as "text": wrap it, the adapter reads the documents
        return pipe.run({"embed": {"text": q}})["retriever"]["documents"]

    run = run_retriever(search, questions, k=K, id_strategy="offset")
    check_offsets(run, corpus)
    hs_chunks = list({f"{d.meta['doc_id']}#{d.meta['split_idx_start']}-{d.meta['split_idx_start'] + len(d.content)}":
                      CorpusChunk(f"{d.meta['doc_id']}#{d.meta['split_idx_start']}-"
                            f"{d.meta['split_idx_start'] + len(d.content)}", d.meta["doc_id"],
                            d.meta["split_idx_start"], d.meta["split_idx_start"] + len(d.content), d.content)
                      for d in docs}.values())
    expected, expected_ids = ours(hs_chunks, questions)
    assert_same(run, expected, expected_ids)


# ------------------------------------------------------------------------------------ lists shorter
# than k


def _short(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RetrieverShortListWarning)]


def _deeper(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RetrieverDepthWarning)]


def test_short_lists_of_mmr_threshold_and_top_k_retrievers_are_counted(corpus, questions):
    need("langchain_text_splitters")
    need("llama_index.core")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from llama_index.core import VectorStoreIndex

    questions = questions[:20]
    splitter = RecursiveCharacterTextSplitter(chunk_size=600, chunk_overlap=80, add_start_index=True)
    docs = splitter.split_documents([Document(d.text, metadata={"source": d.id}) for d in corpus])
    store = InMemoryVectorStore(langchain_embeddings())
    store.add_documents(docs, ids=[f"{d.metadata['source']}@{i}" for i, d in enumerate(docs)])

    # MMR with its own k = 4: evaluated at 4 (its depth in production), said once; no list is short
    # of that
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 4, "fetch_k": 20})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_retriever(mmr, questions, k=K)
    assert all(len(r.chunks) == 4 for r in run.records) and run.summary["short_lists"] == 0
    assert not _short(caught)
    [message] = _deeper(caught)
    assert message.startswith("asked for k = 10 chunks per question, but the retriever returns at most 4 "
                              "(search_kwargs={'k': 4, 'fetch_k': 20}): evaluated at 4")
    assert message in run.warnings

    # a score threshold (a LangChain retriever keeping the chunks scoring >= cut): exactly the
    # questions with fewer than k chunks above it
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict

    class Threshold(BaseRetriever):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        store: InMemoryVectorStore
        cut: float

        def _get_relevant_documents(self, query, *, run_manager=None):
            return [d for d, s in self.store.similarity_search_with_score(query, k=K) if s >= self.cut]

    cut = 0.2356
    expected = sum(1 for q in questions
                   if sum(1 for _, s in store.similarity_search_with_score(q["question"], k=K) if s >= cut) < K)
    assert 0 < expected < 20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_retriever(Threshold(store=store, cut=cut), questions, k=K)
    assert run.summary["short_lists"] == expected == sum(1 for r in run.records if len(r.chunks) < K)
    assert _short(caught)[0].startswith(f"{expected} of 20 questions got fewer than k = 10 chunks (shortest: ")

    # a plain similarity retriever with k chunks: nothing to say
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_retriever(store.as_retriever(search_kwargs={"k": K}), questions, k=K)
    assert not _short(caught) and run.summary["short_lists"] == 0

    # LlamaIndex: similarity_top_k below k is its depth, not a short list (test_*_own_depth below)
    index = VectorStoreIndex(_llama_nodes(corpus, lambda i, doc: f"{doc.doc_id}@{i}"),
                             embed_model=llamaindex_embedding())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_retriever(index.as_retriever(similarity_top_k=3), questions, k=K)
    assert not _short(caught) and len(_deeper(caught)) == 1 and run.summary["k"] == 3


# ------------------------------------------------ the retriever's own depth, as in production
# (issue 32, item 5)


def _recorded(retriever, questions, k):
    """run_retriever with every warning recorded: (run, depth warnings, short-list warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_retriever(retriever, questions, k=k)
    return run, _deeper(caught), _short(caught)


def _deeper_than(asked: int, own: int, setting: str, fix: str) -> str:
    """The one warning when k is asked deeper than the retriever goes (both numbers, its setting,
    the fix)."""
    return (f"asked for k = {asked} chunks per question, but the retriever returns at most {own} ({setting}): "
            f"evaluated at {own}, the depth it runs at in production, not at {asked}. To evaluate deeper, "
            f"configure the retriever deeper ({fix}); to silence this, leave k (--depth) unset or ask for at "
            f"most {own}.")


def _assert_own_depth(retriever, questions, production, own, message):
    """Asked deeper: the production lists, one warning; unset: the same, no warning; shallower:
    their top k."""
    run, deeper, short = _recorded(retriever, questions, K)
    assert [len(r.chunks) for r in run.records] == [own] * len(questions)
    assert {r.id: [c.id for c in r.chunks] for r in run.records} == production
    assert deeper == [message] and not short
    assert run.warnings.count(message) == 1
    assert (run.summary["k"], run.summary["asked_k"], run.summary["retriever_k"]) == (own, K, own)
    run, deeper, short = _recorded(retriever, questions, None)
    assert {r.id: [c.id for c in r.chunks] for r in run.records} == production
    assert not deeper and not short and run.summary["k"] == own
    run, deeper, short = _recorded(retriever, questions, 2)
    assert {r.id: [c.id for c in r.chunks] for r in run.records} == {q: ids[:2] for q, ids in production.items()}
    assert not deeper and not short and run.summary["k"] == 2
    return run


def test_langchain_retriever_is_evaluated_at_its_own_search_kwargs_k(corpus, questions):
    need("langchain_text_splitters")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    questions = questions[:20]
    splitter = RecursiveCharacterTextSplitter(chunk_size=600, chunk_overlap=80, add_start_index=True)
    docs = splitter.split_documents([Document(d.text, metadata={"source": d.id}) for d in corpus])
    store = InMemoryVectorStore(langchain_embeddings())
    store.add_documents(docs, ids=[f"{d.metadata['source']}@{i}" for i, d in enumerate(docs)])
    retriever = store.as_retriever(search_kwargs={"k": 4})
    production = {q["id"]: [d.id for d in retriever.invoke(q["question"])] for q in questions}
    assert {len(ids) for ids in production.values()} == {4}
    # was: 10 chunks per question (the store asked for the run's k), no warning
    run = _assert_own_depth(retriever, questions, production, 4,
                            _deeper_than(10, 4, "search_kwargs={'k': 4}", "search_kwargs={'k': 10}"))
    # the numbers are those of the lists the retriever gives in production
    rows = [{**q, "retrieved_contexts": [{"id": d.id, "text": d.page_content, "doc_id": d.metadata["source"],
                                          "start": d.metadata["start_index"],
                                          "end": d.metadata["start_index"] + len(d.page_content)}
                                         for d in retriever.invoke(q["question"])]}
            for q in questions]
    run, _, _ = _recorded(retriever, questions, K)
    metrics = ["hit_rate@1", "recall@4", "mrr", "ndcg@4", "char_recall@4"]
    assert run.evaluate("span", metrics=metrics).mean == evaluate_rag(rows, "span", metrics=metrics).mean
    # as_retriever() without k searches LangChain's default k, 4
    run, deeper, _ = _recorded(store.as_retriever(), questions, K)
    assert {len(r.chunks) for r in run.records} == {4}
    assert deeper == [_deeper_than(10, 4, "search_kwargs={}, LangChain's default k = 4", "search_kwargs={'k': 10}")]
    # a bare vector store has no depth of its own: it is asked for k
    run, deeper, short = _recorded(store, questions, K)
    assert {len(r.chunks) for r in run.records} == {K} and not deeper and not short


def test_llamaindex_retriever_is_evaluated_at_its_similarity_top_k(corpus, questions):
    need("llama_index.core")
    from llama_index.core import VectorStoreIndex

    questions = questions[:20]
    index = VectorStoreIndex(_llama_nodes(corpus, lambda i, doc: f"{doc.doc_id}@{i}"),
                             embed_model=llamaindex_embedding())
    retriever = index.as_retriever(similarity_top_k=3)
    production = {q["id"]: [n.node.node_id for n in retriever.retrieve(q["question"])] for q in questions}
    assert {len(ids) for ids in production.values()} == {3}
    # was: a short-list warning ("20 of 20 questions got fewer than k = 10 chunks")
    _assert_own_depth(retriever, questions, production, 3,
                      _deeper_than(10, 3, "similarity_top_k=3", "similarity_top_k=10"))


def test_haystack_retriever_is_evaluated_at_its_top_k(corpus, questions):
    need("haystack")
    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    questions = questions[:20]
    store = InMemoryDocumentStore()
    store.write_documents(_haystack_docs(corpus))
    component = InMemoryBM25Retriever(store, top_k=5)
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=5))
    production = {q["id"]: [d.id for d in component.run(query=q["question"])["documents"]] for q in questions}
    assert {len(ids) for ids in production.values()} == {5}
    # was: 10 chunks per question (top_k = k passed at run time)
    for retriever in (pipe, component):
        _assert_own_depth(retriever, questions, production, 5, _deeper_than(10, 5, "top_k=5", "top_k=10"))


def test_run_adapter_depth_deeper_than_the_retriever_warns_once(tmp_path, questions):
    need("langchain_core")
    import subprocess
    import sys

    (tmp_path / "my_rag.py").write_text(
        "from langchain_core.documents import Document\n"
        "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
        "from langchain_core.vectorstores import InMemoryVectorStore\n"
        "def build():\n"
        "    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))\n"
        "    texts = [f'chunk {i} about wal sync modes' for i in range(12)]\n"
        "    store.add_documents([Document(t, metadata={'source': 'd', 'start_index': 40 * i})\n"
        "                         for i, t in enumerate(texts)], ids=[f'c{i}' for i in range(12)])\n"
        "    return store.as_retriever(search_kwargs={'k': 3})\n")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(q) + "\n" for q in questions[:4]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, "-m", "rankwise.cli", "run-adapter", "my_rag:build", str(cases),
                           "-d", "10", "-o", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["k"], summary["asked_k"], summary["retriever_k"], summary["chunks"]) == (3, 10, 3, 12)
    message = _deeper_than(10, 3, "search_kwargs={'k': 3}", "search_kwargs={'k': 10}")
    assert done.stderr.count("asked for k = 10") == 1 and f"warning: {message}\n" in done.stderr
    assert "RetrieverDepthWarning" not in done.stderr  # not printed a second time as a Python warning
    unset = subprocess.run([sys.executable, "-m", "rankwise.cli", "run-adapter", "my_rag:build", str(cases),
                            "-o", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert unset.returncode == 0 and json.loads(unset.stdout)["k"] == 3 and "asked for k" not in unset.stderr
