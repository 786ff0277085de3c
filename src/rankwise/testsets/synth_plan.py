"""The plan of a synthesised test set (no calls): the corpus cut into passages, documents visited
round robin, a style per sample, a second passage for multi-passage styles (docs/testsets.md, "How
synth works").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from rankwise.data.corpus import Corpus
from rankwise.errors import InputError
from rankwise.retrieval.chunking import CorpusChunk, chunk_corpus
from rankwise.testsets.language import detect_language

__all__ = ["STYLES", "TWO_PASSAGES", "SynthSettings", "parse_styles", "Slot", "plan_passages", "plan_samples"]


STYLES = ("factual", "paraphrase", "multi", "conversational", "multi-hop")


TWO_PASSAGES = ("multi", "multi-hop")


@dataclass(frozen=True)
class SynthSettings:
    """What to generate: ``n`` planned samples, the style shares, the seed, the passage size, the
    checks.

    Example:
        >>> SynthSettings(n=10, styles={"factual": 0.5, "paraphrase": 0.5}).n
        10
    """

    n: int = 50
    styles: dict[str, float] = field(default_factory=lambda: {"factual": 1.0})
    seed: int = 0
    passage_chars: int = 1000
    min_passage_chars: int = 40
    critic: bool = False
    critic_min: int = 3
    paraphrase_max_overlap: float = 0.6
    duplicate_threshold: float = 0.7
    max_tokens: int = 800

    def __post_init__(self) -> None:
        if self.n < 1:
            raise InputError(f"n must be >= 1, got {self.n}", field="n")
        if self.passage_chars < 100:
            raise InputError(f"passage_chars must be >= 100, got {self.passage_chars}", field="passage_chars")
        bad = set(self.styles) - set(STYLES)
        if bad:
            raise InputError(f"unknown style(s) {sorted(bad)}; choose from {', '.join(STYLES)}", field="styles")
        if not self.styles or any(not (v >= 0) for v in self.styles.values()) or sum(self.styles.values()) <= 0:
            raise InputError("style shares must be >= 0 and not all 0", field="styles")


def parse_styles(text: str) -> dict[str, float]:
    """``"factual=0.5,paraphrase=0.3"`` -> ``{"factual": 0.5, "paraphrase": 0.3}`` (a bare name has
    share 1).

    Example:
        >>> parse_styles("factual=0.5,multi=0.1,conversational")
        {'factual': 0.5, 'multi': 0.1, 'conversational': 1.0}
    """
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, share = part.partition("=")
        name = name.strip()
        if name not in STYLES:
            raise InputError(f"unknown style {name!r}; choose from {', '.join(STYLES)}", field="styles")
        try:
            value = float(share) if share else 1.0
        except ValueError:
            raise InputError(f"share of {name} is not a number: {share!r}", field="styles") from None
        if not math.isfinite(value) or value < 0:
            raise InputError(f"share of {name} must be >= 0, got {share}", field="styles")
        out[name] = value
    if not out or sum(out.values()) <= 0:
        raise InputError(f"no style with a share > 0 in {text!r}", field="styles")
    return out


@dataclass(frozen=True)
class Slot:
    """One planned sample: its index, style, passages (one, or two for ``multi`` and ``multi-hop``)
    and language."""

    index: int
    style: str
    passages: tuple[CorpusChunk, ...]
    language: str

    @property
    def id(self) -> str:
        return f"synth-{self.index:05d}"


def _allocate(n: int, shares: dict[str, float]) -> list[str]:
    total = sum(shares.values())
    exact = {s: n * v / total for s, v in shares.items()}
    counts = {s: math.floor(x) for s, x in exact.items()}
    left = n - sum(counts.values())
    for s in sorted(exact, key=lambda s: (-(exact[s] - counts[s]), STYLES.index(s)))[:left]:
        counts[s] += 1
    return [s for s in STYLES for _ in range(counts.get(s, 0))]


def plan_passages(corpus: Corpus, settings: SynthSettings) -> list[CorpusChunk]:
    chunks = chunk_corpus(corpus, settings.passage_chars, 0)
    return [c for c in chunks if len(c.text.strip()) >= settings.min_passage_chars]


def plan_samples(corpus: Corpus, settings: SynthSettings) -> list[Slot]:
    """The samples a run makes, decided before any call (the same corpus and settings give the same
    plan).

    Example:
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 10,
        ...                            "b": "Beta text about nodes and leases. " * 10})
        >>> [
        ...     s.passages[0].doc_id
        ...     for s in plan_samples(corpus, SynthSettings(n=4, passage_chars=200))
        ... ]
        ['a', 'b', 'a', 'b']
    """
    rng = random.Random(settings.seed)
    passages = plan_passages(corpus, settings)
    if not passages:
        raise InputError("the corpus has no passage of 40+ characters to generate questions from",
                         source=corpus.source)
    by_doc: dict[str, list[CorpusChunk]] = {}
    for c in passages:
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = list(by_doc)
    rng.shuffle(docs)
    for d in docs:
        rng.shuffle(by_doc[d])
    chosen: list[CorpusChunk] = []
    depth = 0
    share = math.ceil(settings.n / len(docs))
    while len(chosen) < settings.n and depth < share and any(depth < len(by_doc[d]) for d in docs):
        for d in docs:
            if depth < len(by_doc[d]) and len(chosen) < settings.n:
                chosen.append(by_doc[d][depth])
        depth += 1
    styles = _allocate(len(chosen), settings.styles)
    rng.shuffle(styles)
    partner = _partners(passages, [c for c, s in zip(chosen, styles, strict=True) if s in TWO_PASSAGES])
    slots = []
    for i, (c, style) in enumerate(zip(chosen, styles, strict=True)):
        lang = detect_language(c.text)
        if style in TWO_PASSAGES:
            other = partner.get(c.id)
            if other is None or (style == "multi-hop" and other.doc_id == c.doc_id):
                style = "factual"  # nothing to combine (a one-passage, or for two hops a one-document, corpus)
            else:
                slots.append(Slot(i, style, (c, other), lang))
                continue
        slots.append(Slot(i, style, (c,), lang))
    return slots


def _partners(passages: list[CorpusChunk], wanted: list[CorpusChunk]) -> dict[str, CorpusChunk]:
    """For each wanted passage, the BM25-nearest passage of another document (of the same one if
    alone)."""
    if not wanted or len(passages) < 2:
        return {}
    from rankwise.retrieval.bm25 import BM25Retriever

    bm25 = BM25Retriever(quiet=True, name="bm25-related")
    bm25.index(passages)
    by_id = {c.id: c for c in passages}
    queries = {c.id: " ".join(c.text.split()[:80]) for c in wanted}
    run = bm25.search(queries, k=20)
    out: dict[str, CorpusChunk] = {}
    for c in wanted:
        ranked = [by_id[i] for i in run.ranking(c.id) if i != c.id]
        other = next((p for p in ranked if p.doc_id != c.doc_id), None)
        other = other or next((p for p in ranked if p.end <= c.start or p.start >= c.end), None)
        if other is None:
            other = next((p for p in passages if p.doc_id != c.doc_id), None)
        if other is not None:
            out[c.id] = other
    return out
