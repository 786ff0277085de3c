"""Real traces for the tests: LangChain retrievers run offline under
``openinference-instrumentation-langchain`` with the OpenTelemetry SDK's in-memory exporter; the
finished spans written as the SDK's ``ConsoleSpanExporter`` writes them, as OTLP JSON and OTLP
protobuf (OpenTelemetry's own OTLP encoder, ``encode_spans``, in protobuf's JSON mapping one request
a line, or serialised) and as Phoenix's span dataframe (the ``get_spans_dataframe()`` columns of
arize-phoenix 20.x, saved with ``to_parquet``: Phoenix itself, a server with a database and ~90
dependencies, is not installed to write them — see docs/traces.md).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

KESTREL_K = 10


def _seeded_ids(seed: int):
    """The SDK's id generator interface with seeded random ids (the same trace and span ids on every
    run)."""
    import random

    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Seeded(IdGenerator):
        def __init__(self):
            self.rng = random.Random(seed)

        def generate_span_id(self) -> int:
            return self.rng.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self.rng.getrandbits(128) or 1

    return Seeded()


@contextlib.contextmanager
def langchain_traces(seed: int | None = None):
    """Instrument LangChain for the duration; yields the in-memory exporter holding the finished
    spans (with ``seed``: trace and span ids the same on every run)."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(**({} if seed is None else {"id_generator": _seeded_ids(seed)}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def kestrel_retriever(k: int = KESTREL_K):
    """A LangChain ``VectorStoreRetriever`` over the Kestrel chunks (hashed bag-of-words vectors, no
    network): documents carry ``source`` and ``start_index`` (LangChain's ``add_start_index``), ids
    are LangChain's uuids."""
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from _hash_embedder import langchain_embeddings
    from rankwise.datasets import bundled_files
    from rankwise.retrieval import chunk_corpus, load_corpus

    chunks = chunk_corpus(load_corpus(bundled_files("kestrel").corpus), 500, 50, titles=False)
    store = InMemoryVectorStore(langchain_embeddings())
    store.add_documents([Document(c.text, metadata={"source": c.doc_id, "start_index": c.start}) for c in chunks])
    return store.as_retriever(search_kwargs={"k": k})


def kestrel_questions() -> list[dict]:
    from rankwise.datasets import bundled_files

    with open(bundled_files("kestrel").questions, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def rag_chain(retriever):
    """A one-retrieval RAG chain: retrieve, then "answer" (the first chunk's first sentence)."""
    from langchain_core.runnables import RunnableLambda

    def rag(question: str) -> str:
        docs = retriever.invoke(question)
        return docs[0].page_content.split(".")[0] if docs else "no answer"

    return RunnableLambda(rag).with_config(run_name="rag")


def two_step_agent(retriever):
    """A two-step agent: rewrite the question, retrieve, retrieve again for the follow-up, answer —
    all under one parent chain span (so every retrieval is a call of the same trace)."""
    from langchain_core.runnables import RunnableLambda

    rewrite = RunnableLambda(lambda q: q.replace("`", "").rstrip("?")).with_config(run_name="rewrite")

    def agent(question: str) -> str:
        query = rewrite.invoke(question)
        first = retriever.invoke(query)
        follow_up = f"{query} {first[0].metadata['source'] if first else ''}".strip()
        second = retriever.invoke(follow_up)
        return (second or first)[0].page_content.split(".")[0] if (second or first) else "no answer"

    return RunnableLambda(agent).with_config(run_name="agent")


def write_console(spans, path: Path) -> Path:
    """The SDK's own ``ConsoleSpanExporter`` writing to a file (``span.to_json()`` objects, one
    after another)."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    with open(path, "w", encoding="utf-8") as fh:
        ConsoleSpanExporter(out=fh).export(spans)
    return path


def otlp_request(spans):
    """OpenTelemetry's own ``ExportTraceServiceRequest`` of the spans
    (``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans``: the message the SDK's OTLP
    exporters send)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans)


def write_otlp(spans, path: Path) -> Path:
    """OTLP JSON: OpenTelemetry's own request (:func:`otlp_request`) in protobuf's JSON mapping, one
    request a line — ids base64, ``droppedAttributesCount`` as the SDK counted it."""
    from google.protobuf.json_format import MessageToJson

    path.write_text(MessageToJson(otlp_request(spans), indent=None) + "\n", encoding="utf-8")
    return path


def write_otlp_pb(spans, path: Path, framing: str | None = None) -> Path:
    """OTLP protobuf: OpenTelemetry's own request serialised (``SerializeToString``), alone
    (``framing=None``), or split into one request per trace each after its length: ``"fixed32"`` (4
    bytes big-endian, the collector's file exporter with ``format: proto``) or ``"varint"``
    (protobuf's delimited stream)."""
    if framing is None:
        path.write_bytes(otlp_request(spans).SerializeToString())
        return path
    by_trace: dict = {}
    for s in spans:
        by_trace.setdefault(s.context.trace_id, []).append(s)
    out = bytearray()
    for group in by_trace.values():
        raw = otlp_request(group).SerializeToString()
        if framing == "fixed32":
            out += len(raw).to_bytes(4, "big")
        else:
            from google.protobuf.internal.encoder import _VarintBytes

            out += _VarintBytes(len(raw))
        out += raw
    path.write_bytes(bytes(out))
    return path


def phoenix_rows(spans) -> list[dict]:
    """Phoenix's span dataframe rows (arize-phoenix 20.x's ``get_spans_dataframe()`` columns, as
    docs/traces.md names them): ``attributes.*`` columns, documents as one list column."""
    import datetime as dt

    rows = []
    for s in spans:
        a = dict(s.attributes or {})
        docs: dict[int, dict] = {}
        row = {"name": s.name, "span_kind": a.get("openinference.span.kind"),
               "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
               "start_time": dt.datetime.fromtimestamp(s.start_time / 1e9, dt.UTC),
               "end_time": dt.datetime.fromtimestamp(s.end_time / 1e9, dt.UTC),
               "status_code": "OK", "status_message": "", "events": [],
               "context.span_id": format(s.context.span_id, "016x"),
               "context.trace_id": format(s.context.trace_id, "032x")}
        for key, value in a.items():
            if key.startswith("retrieval.documents."):
                _, _, i, _, part = key.split(".", 4)
                docs.setdefault(int(i), {})[f"document.{part}"] = (json.loads(value) if part == "metadata"
                                                                   else value)
            else:
                row[f"attributes.{key}"] = value
        row["attributes.retrieval.documents"] = [docs[i] for i in sorted(docs)] if docs else None
        rows.append(row)
    return rows


def write_phoenix(spans, path: Path) -> Path:
    import pandas as pd

    pd.DataFrame(phoenix_rows(spans)).to_parquet(path)
    return path


def write_doc_traces(workdir: Path) -> None:
    """docs/traces.md's files: ``traces.json`` (OTLP JSON of the RAG chain over the 73 Kestrel
    questions), ``spans.parquet`` (the same spans as Phoenix's span dataframe), ``agent.json``
    (console-exporter spans of the two-step agent on the first 8 questions), ``questions.jsonl``
    (the Kestrel questions), ``llamaindex.json`` and ``corpus.jsonl``
    (:func:`write_llamaindex_traces`), ``app-traces.json`` (:func:`write_app_traces`)."""
    import shutil

    from rankwise.datasets import bundled_files

    retriever = kestrel_retriever()
    questions = kestrel_questions()
    chain = rag_chain(retriever)
    with langchain_traces(seed=23) as exporter:
        for q in questions:
            chain.invoke(q["question"])
    write_otlp(exporter.get_finished_spans(), workdir / "traces.json")
    write_phoenix(exporter.get_finished_spans(), workdir / "spans.parquet")
    agent = two_step_agent(retriever)
    with langchain_traces(seed=24) as exporter:
        for q in questions[:8]:
            agent.invoke(q["question"])
    write_console(exporter.get_finished_spans(), workdir / "agent.json")
    shutil.copyfile(bundled_files("kestrel").questions, workdir / "questions.jsonl")
    write_llamaindex_traces(workdir, questions)
    write_app_traces(workdir)


DOCS = Path(__file__).resolve().parents[1] / "docs" / "traces.md"


def exporter_snippet() -> str:
    """docs/traces.md's Python block that writes ``app-traces.json`` with ``OTLPJsonFileExporter``.
    """
    blocks = DOCS.read_text(encoding="utf-8").split("```python\n")[1:]
    found = [b.split("```", 1)[0] for b in blocks if b.startswith("# app.py")]
    assert len(found) == 1, "docs/traces.md: one ```python block starting '# app.py'"
    return found[0]


def write_app_traces(workdir: Path) -> Path:
    """``app-traces.json``: docs/traces.md's exporter snippet, run as it is shown, in ``workdir``.
    """
    with contextlib.chdir(workdir):
        exec(compile(exporter_snippet(), str(DOCS), "exec"), {"__name__": "app"})  # noqa: S102 - the docs' code
    return workdir / "app-traces.json"


def write_llamaindex_traces(workdir: Path, questions: list[dict]) -> None:
    """``llamaindex.json`` (console-exporter spans of a LlamaIndex retriever under
    openinference-instrumentation-llama-index, over the Kestrel questions) and ``corpus.jsonl`` (its
    documents)."""
    import shutil

    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    from rankwise.datasets import bundled_files

    retriever = kestrel_llamaindex()
    with instrumented(LlamaIndexInstrumentor, seed=25) as exporter:
        for q in questions:
            retriever.retrieve(q["question"])
    write_console(exporter.get_finished_spans(), workdir / "llamaindex.json")
    shutil.copyfile(bundled_files("kestrel").corpus, workdir / "corpus.jsonl")


@contextlib.contextmanager
def instrumented(instrumentor_class, seed: int | None = None):
    """Any OpenInference instrumentor (LlamaIndex's, Haystack's ...) for the duration, with the
    SDK's default limits; yields the in-memory exporter holding the finished spans."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(**({} if seed is None else {"id_generator": _seeded_ids(seed)}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = instrumentor_class()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def kestrel_llamaindex(k: int = KESTREL_K):
    """A LlamaIndex ``VectorStoreIndex`` retriever over the Kestrel documents split by
    ``SentenceSplitter`` (hashed bag-of-words vectors, no network): nodes know their offsets, the
    traces do not."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter

    from _hash_embedder import llamaindex_embedding
    from rankwise.datasets import bundled_files
    from rankwise.retrieval import load_corpus

    corpus = load_corpus(bundled_files("kestrel").corpus)
    nodes = SentenceSplitter(chunk_size=160, chunk_overlap=20).get_nodes_from_documents(
        [Document(text=d.text, doc_id=d.id) for d in corpus])
    return VectorStoreIndex(nodes, embed_model=llamaindex_embedding()).as_retriever(similarity_top_k=k)


def kestrel_haystack(k: int = KESTREL_K, offsets: bool = True):
    """A Haystack pipeline (``InMemoryBM25Retriever``) over the Kestrel documents split by words;
    without ``offsets`` the chunks are stored as plain documents (no ``split_idx_start``), as a
    hand-fed store is."""
    from haystack import Document, Pipeline
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from rankwise.datasets import bundled_files
    from rankwise.retrieval import load_corpus

    corpus = load_corpus(bundled_files("kestrel").corpus)
    docs = DocumentSplitter(split_by="word", split_length=60, split_overlap=10).run(
        [Document(content=d.text, meta={"doc_id": d.id}) for d in corpus])["documents"]
    if not offsets:
        docs = [Document(content=d.content, meta={"doc_id": d.meta["doc_id"]}) for d in docs]
    store = InMemoryDocumentStore()
    store.write_documents(docs)
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=k))
    return pipe
