"""Generated test sets whose labels are exact character spans, so they survive re-chunking.

The run, for ``n`` planned samples:

1. **Plan** (no calls): the corpus is cut into passages (``passage_chars``); documents are visited in a
   seeded order, round robin, one passage each per round, so no document gets more than its share
   (``ceil(n / documents)``, never more: a document with fewer passages leaves its place empty rather than
   handing it to a longer one, so fewer than ``n`` samples may be planned; a smaller ``passage_chars``
   gives more passages). Each sample gets a style from the
   ``styles`` shares (largest remainder); a ``multi`` sample gets a second passage, the BM25-nearest
   passage of another document; so does a ``multi-hop`` sample (a two-step question: a fact found in the
   first passage leads to the answer in the second, which must come from another document), whose
   reference spans carry their ``hop`` (0: the first passage, 1: the second).
2. **Generate**: one call per sample returns question, answer and supporting quotes (JSON). Every quote
   must be found in its document (exact, then normalised; :mod:`rankwise.testsets.locate`) and becomes a
   span ``{text, doc_id, start, end}`` with ``text == document[start:end]``.
3. **Check**, rejecting and counting by reason (:data:`REASONS`); optional **critic** call that sees the
   question, the answer and the quotes.
4. **Label** (not filter) difficulty by a BM25 round trip over the passages: ``easy`` (a source passage at
   rank 1), ``hard`` (in the top 10), ``unretrieved``.

Safety: the calls run on the one :class:`~rankwise.llm.runner.Runner` and cache of every LLM task: every
reply goes to the SQLite cache (the judge's file, rows of mode ``synth``) as it arrives, every accepted
sample is appended to the output and every rejected one to ``OUT.rejected.jsonl`` as soon as it is
decided (in plan order), and a rerun skips the samples already decided: a run killed at any point
resumes without repeating a call. A call that failed after its retries (``call_failed``), a reply that was
not the JSON asked for (``bad_reply``, the critic's too) and a refusal (``refused``) decided nothing: such a
reply is not cached, and a rerun asks those samples again (:data:`ASKED_AGAIN`), as the judge asks its
failures again; every usable reply cached is reused. ``max_calls`` (the call policy's: requests) and ``max_cost`` stop starting samples
once the requests sent (the money spent) plus what the samples in flight still hold would pass them.
Ctrl-C and SIGTERM stop the run at once with every decided sample written (:class:`SynthInterrupted`): the
checks that take time (quotes located in whole documents, BM25 ranks) run off the event loop, which takes
the signal while they run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import queue
import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar

from rankwise.errors import InputError
from rankwise.llm.cache import cache_key
from rankwise.llm.client import BudgetExhausted, CallError, EndpointError
from rankwise.llm.config import LLMConfig
from rankwise.llm.cost import estimate_prompt_tokens
from rankwise.llm.parse import ANY_OBJECT
from rankwise.llm.prompts import NEUTRAL_LT, data_boundary, fence, fill, load_toml, shipped_toml
from rankwise.llm.runner import Job, RunInterrupted, Runner, RunStopped, RunSummary
from rankwise.retrieval.chunking import Chunk, chunk_corpus
from rankwise.retrieval.corpus import Corpus, load_corpus
from rankwise.testsets.language import detect_language, language_name
from rankwise.testsets.locate import locate, normalise

__all__ = ["STYLES", "REASONS", "SynthSettings", "Slot", "SynthSummary", "SynthEstimate", "SynthStopped",
           "SynthInterrupted", "reply_key", "SynthPrompts", "load_synth_prompts", "parse_styles", "plan_samples",
           "estimate_synth", "synth", "lexical_overlap", "shingles", "jaccard", "reply_question",
           "near_duplicate", "render_slot", "render_critic", "check_reply", "unusable_reply", "unusable_critic",
           "rejected_path", "estimate_lines", "summary_lines"]

STYLES = ("factual", "paraphrase", "multi", "conversational", "multi-hop")
_TWO_PASSAGES = ("multi", "multi-hop")
#: why a sample was rejected
REASONS = {
    "call_failed": "the call (or the critic's) failed after its retries; a rerun asks again",
    "bad_reply": "the reply (or the critic's) was not the JSON asked for; a rerun asks again",
    "refused": "the model refused to answer (a refusal, not an answer); a rerun asks again",
    "not_answerable": "the model said the passage does not answer it",
    "quote_not_found": "a quote is not in the source document, even normalised",
    "no_quotes": "no supporting quote given",
    "multi_one_passage": "a multi-passage (or multi-hop) sample whose quotes come from one passage only",
    "answer_in_question": "the question gives the answer away verbatim",
    "wrong_language": "the question is not in the passage's language",
    "paraphrase_overlap": "a paraphrase question that reuses too many of the passage's words",
    "duplicate": "a near-duplicate of an accepted question",
    "critic": "the critic rated it not answerable from its quotes",
}
_NOT_ANSWERABLE = re.compile(
    r"\b(not (?:in|contained in|mentioned in|stated in|covered (?:in|by)) the passages?|(?:does|do) not "
    r"(?:contain|mention|say|state|answer|cover)|cannot be answered|no (?:relevant )?information|not enough "
    r"information|n/a|unanswerable|keine angabe|nicht im text|pas dans le passage)\b", re.I)
#: rejections that decided nothing (no usable reply): not cached, and asked again by a rerun, as the judge
#: asks its failures again
ASKED_AGAIN = frozenset({"call_failed", "bad_reply", "refused"})
OUTPUT_TOKENS = {"factual": 150, "paraphrase": 150, "multi": 220, "conversational": 260, "multi-hop": 240,
                 "critic": 40}


# ----------------------------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class SynthPrompts:
    """The generation templates (one per style) and the critic's, with their version."""

    version: str
    system: str
    styles: dict[str, str]
    critic_system: str
    critic_user: str
    source: str

    @property
    def prompt_version(self) -> str:
        """``synth-v<version>+<8 hex of the template text>``: a changed prompt is a new cache key."""
        text = "\x1f".join([self.system, *[self.styles[s] for s in sorted(self.styles)], self.critic_system,
                            self.critic_user])
        return f"synth-v{self.version}+{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def load_synth_prompts(path: str | PathLike | None = None) -> SynthPrompts:
    """The shipped templates (``rankwise/testsets/prompts/synth.toml``), or a user file laid out the same way
    (any key it gives replaces the shipped one).

    Example:
        >>> load_synth_prompts().prompt_version.startswith("synth-v2+")
        True
    """
    data, source = shipped_toml("rankwise.testsets", "synth.toml")
    if path is not None:
        user = load_toml(Path(path))
        source = str(path)
        for key in ("version", "system"):
            if key in user:
                data[key] = user[key]
        for table in ("styles", "critic"):
            if table in user:
                if not isinstance(user[table], dict):
                    raise InputError(f"[{table}] must be a table", source=path, field=table)
                data[table] = {**data[table], **user[table]}
        data.setdefault("version", "custom")
    for style in STYLES:
        if not isinstance(data["styles"].get(style), str):
            raise InputError(f"[styles] {style} must be a string", source=source, field=style)
    return SynthPrompts(str(data["version"]), data["system"], dict(data["styles"]), data["critic"]["system"],
                        data["critic"]["user"], source)


def _fenced(template: str, data: dict[str, str], plain: dict[str, str] | None = None) -> str:
    """``template`` filled: every ``data`` text fenced with one boundary over all of them
    (:func:`~rankwise.llm.prompts.fence`), ``plain`` values (ours, not the corpus's) as they are."""
    boundary = data_boundary(*data.values())
    return fill(template, {k: fence(v, boundary) for k, v in data.items()} | (plain or {}))


# -------------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class SynthSettings:
    """What to generate: ``n`` planned samples, the style shares, the seed, the passage size, the checks.

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
    """``"factual=0.5,paraphrase=0.3"`` -> ``{"factual": 0.5, "paraphrase": 0.3}`` (a bare name has share 1).

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
    """One planned sample: its index, style, passages (one, or two for ``multi`` and ``multi-hop``) and
    language."""

    index: int
    style: str
    passages: tuple[Chunk, ...]
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


def _passages(corpus: Corpus, settings: SynthSettings) -> list[Chunk]:
    chunks = chunk_corpus(corpus, settings.passage_chars, 0)
    return [c for c in chunks if len(c.text.strip()) >= settings.min_passage_chars]


def plan_samples(corpus: Corpus, settings: SynthSettings) -> list[Slot]:
    """The samples a run makes, decided before any call (the same corpus and settings give the same plan).

    Example:
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 10,
        ...                            "b": "Beta text about nodes and leases. " * 10})
        >>> [s.passages[0].doc_id for s in plan_samples(corpus, SynthSettings(n=4, passage_chars=200))]
        ['a', 'b', 'a', 'b']
    """
    rng = random.Random(settings.seed)
    passages = _passages(corpus, settings)
    if not passages:
        raise InputError("the corpus has no passage of 40+ characters to generate questions from",
                         source=corpus.source)
    by_doc: dict[str, list[Chunk]] = {}
    for c in passages:
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = list(by_doc)
    rng.shuffle(docs)
    for d in docs:
        rng.shuffle(by_doc[d])
    chosen: list[Chunk] = []
    depth = 0
    share = math.ceil(settings.n / len(docs))
    while len(chosen) < settings.n and depth < share and any(depth < len(by_doc[d]) for d in docs):
        for d in docs:
            if depth < len(by_doc[d]) and len(chosen) < settings.n:
                chosen.append(by_doc[d][depth])
        depth += 1
    styles = _allocate(len(chosen), settings.styles)
    rng.shuffle(styles)
    partner = _partners(passages, [c for c, s in zip(chosen, styles, strict=True) if s in _TWO_PASSAGES])
    slots = []
    for i, (c, style) in enumerate(zip(chosen, styles, strict=True)):
        lang = detect_language(c.text)
        if style in _TWO_PASSAGES:
            other = partner.get(c.id)
            if other is None or (style == "multi-hop" and other.doc_id == c.doc_id):
                style = "factual"  # nothing to combine (a one-passage, or for two hops a one-document, corpus)
            else:
                slots.append(Slot(i, style, (c, other), lang))
                continue
        slots.append(Slot(i, style, (c,), lang))
    return slots


def _partners(passages: list[Chunk], wanted: list[Chunk]) -> dict[str, Chunk]:
    """For each wanted passage, the BM25-nearest passage of another document (of the same one if alone)."""
    if not wanted or len(passages) < 2:
        return {}
    from rankwise.retrieval.bm25 import BM25Retriever

    bm25 = BM25Retriever(quiet=True, name="bm25-related")
    bm25.index(passages)
    by_id = {c.id: c for c in passages}
    queries = {c.id: " ".join(c.text.split()[:80]) for c in wanted}
    run = bm25.search(queries, k=20)
    out: dict[str, Chunk] = {}
    for c in wanted:
        ranked = [by_id[i] for i in run.ranking(c.id) if i != c.id]
        other = next((p for p in ranked if p.doc_id != c.doc_id), None)
        other = other or next((p for p in ranked if p.end <= c.start or p.start >= c.end), None)
        if other is None:
            other = next((p for p in passages if p.doc_id != c.doc_id), None)
        if other is not None:
            out[c.id] = other
    return out


def render_slot(slot: Slot, prompts: SynthPrompts, corpus: Corpus) -> list[dict]:
    """The chat messages of one sample's generation call (passages and titles fenced)."""
    first = slot.passages[0]
    data = {"passage": first.text, "title": corpus[first.doc_id].title or first.doc_id}
    if len(slot.passages) > 1:
        second = slot.passages[1]
        data |= {"passage2": second.text, "title2": corpus[second.doc_id].title or second.doc_id}
    user = _fenced(prompts.styles[slot.style], data, {"language": language_name(slot.language)})
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": user}]


def render_critic(prompts: SynthPrompts, question: str, answer: str, quotes: list[str]) -> list[dict]:
    """The chat messages of a critic call: question, answer and the quotes (not the whole passage), fenced."""
    data = {"question": question, "answer": answer, "quotes": "\n".join(f"- {q}" for q in quotes)}
    return [{"role": "system", "content": prompts.critic_system},
            {"role": "user", "content": _fenced(prompts.critic_user, data)}]


# ------------------------------------------------------------------------------------------------- cache


def reply_key(model: str, version: str, kind: str, messages: list[dict], temperature: float | None,
              max_tokens: int) -> str:
    """The cache key of one synth call (``kind``: ``generation`` or ``critic``): a SHA-256 of the model, the
    prompt version, the sampling parameters and the exact messages, in the judge's cache file (mode
    ``synth``; :func:`~rankwise.llm.cache.cache_key`).

    Example:
        >>> len(reply_key("m", "synth-v2+0", "generation", [{"role": "user", "content": "q"}], 0.0, 800))
        64
    """
    return cache_key(model=model, mode="synth", scale=kind, prompt_version=version, style="generate",
                     question="", chunk=json.dumps(messages, ensure_ascii=False, sort_keys=True), context=None,
                     params={"temperature": temperature, "max_tokens": max_tokens})


# ------------------------------------------------------------------------------------------------ checks


def lexical_overlap(question: str, passage: str) -> float:
    """Share of the question's content words (stemmed, stopwords out) that occur in the passage.

    Example:
        >>> lexical_overlap("How many copies are kept?", "Kestrel keeps three copies of each range.")
        0.25
    """
    from rankwise.retrieval.bm25 import Tokenizer

    tok = Tokenizer()
    q = set(tok.tokenize(question))
    if not q:
        return 0.0
    return round(len(q & set(tok.tokenize(passage))) / len(q), 4)


def shingles(text: str, k: int = 3) -> frozenset[str]:
    """Word ``k``-shingles of the normalised text (the words themselves when shorter).

    Example:
        >>> sorted(shingles("What is Kestrel DB?"))
        ['is kestrel db', 'what is kestrel']
    """
    words = re.findall(r"\w+", normalise(text)[0])
    if len(words) <= k:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i:i + k]) for i in range(len(words) - k + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0 for two empty sets).

    Example:
        >>> jaccard(frozenset("ab"), frozenset("bc"))
        0.3333333333333333
    """
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _gives_away(question: str, answer: str) -> bool:
    a = normalise(answer)[0].strip(" .!?;:")
    if len(a) < 4 or len(a.split()) < 1:
        return False
    return a in normalise(question)[0]


def _quote_items(obj: dict) -> list[tuple[int | None, str]] | str:
    quotes = obj.get("quotes", obj.get("quote"))
    if isinstance(quotes, (str, dict)):
        quotes = [quotes]
    if not isinstance(quotes, list):
        return "bad_reply"
    out: list[tuple[int | None, str]] = []
    for q in quotes:
        if isinstance(q, str):
            out.append((None, q))
        elif isinstance(q, dict) and isinstance(q.get("text"), str):
            p = q.get("passage")
            out.append((p if isinstance(p, int) and not isinstance(p, bool) else None, q["text"]))
        else:
            return "bad_reply"
    return [(p, t) for p, t in out if t.strip()]


def check_reply(content: str | None, slot: Slot, corpus: Corpus, settings: SynthSettings,
                norms: dict[str, tuple[str, list[int]]]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """``(sample fields, None, None)`` for a usable reply, else ``(None, reason, detail)``."""
    from rankwise.llm.parse import extract_json

    problem = unusable_reply(content, slot.style)
    if problem is not None:
        return None, *problem
    obj = extract_json(content)
    question, answer = obj.get("question"), obj.get("answer")
    if question is None or (isinstance(answer, str) and _NOT_ANSWERABLE.search(answer) and len(answer) < 200):
        return None, "not_answerable", str(answer)[:200]
    if not isinstance(question, str) or not question.strip() or not isinstance(answer, str) or not answer.strip():
        return None, "bad_reply", "question and answer must be non-empty strings"
    items = _quote_items(obj)
    if isinstance(items, str):
        return None, items, "quotes must be a list of strings or {passage, text} objects"
    if not items:
        return None, "no_quotes", "the reply lists no supporting quote"
    refs: list[dict[str, Any]] = []
    hows: list[str] = []
    used: set[int] = set()
    for number, text in items:
        order = list(range(len(slot.passages)))
        if number is not None and 1 <= number <= len(slot.passages):
            order.remove(number - 1)
            order.insert(0, number - 1)
        hit = None
        for i in order:
            p = slot.passages[i]
            doc = corpus[p.doc_id].text
            if p.doc_id not in norms:
                norms[p.doc_id] = normalise(doc)
            hit = locate(text, doc, window=(p.start, p.end), _norm=norms[p.doc_id])
            if hit is None and NEUTRAL_LT in text:  # a tag start as the prompt wrote it (escape_data)
                hit = locate(text.replace(NEUTRAL_LT, "<"), doc, window=(p.start, p.end), _norm=norms[p.doc_id])
            if hit is not None:
                inside = [j for j, q in enumerate(slot.passages)
                          if q.doc_id == p.doc_id and hit.start < q.end and q.start < hit.end]
                used.add(inside[0] if inside else i)
                refs.append({"text": doc[hit.start:hit.end], "doc_id": p.doc_id, "start": hit.start, "end": hit.end})
                if slot.style == "multi-hop":
                    refs[-1]["hop"] = inside[0] if inside else i
                hows.append(hit.how)
                break
        if hit is None:
            return None, "quote_not_found", text[:200]
    if slot.style in _TWO_PASSAGES and len(used) < 2:
        where = f"passage {min(used) + 1} of {len(slot.passages)}" if used else "no passage"
        return None, "multi_one_passage", f"every quote comes from {where}"
    if _gives_away(question, answer):
        return None, "answer_in_question", answer[:200]
    if slot.language not in ("und",):
        q_lang = detect_language(question, min_hits=2)
        if q_lang not in ("und", slot.language):
            return None, "wrong_language", f"question in {q_lang}, passage in {slot.language}"
    passage_text = " ".join(p.text for p in slot.passages)
    overlap = lexical_overlap(question, passage_text)
    if slot.style == "paraphrase" and overlap > settings.paraphrase_max_overlap:
        return None, "paraphrase_overlap", f"overlap {overlap:.2f} > {settings.paraphrase_max_overlap}"
    refs = _merge(refs)
    sample: dict[str, Any] = {"user_input": question.strip(), "reference": answer.strip(),
                              "reference_contexts": refs, "lexical_overlap": overlap, "located": hows}
    if slot.style == "conversational":
        history = obj.get("history")
        turns = []
        if isinstance(history, list):
            for t in history:
                if isinstance(t, dict) and isinstance(t.get("question"), str):
                    turns.append({"question": t["question"], "answer": str(t.get("answer") or "")})
        if not turns:
            return None, "bad_reply", "a conversational sample needs the earlier turn (history)"
        sample["history"] = turns
    return sample, None, None


def unusable_reply(content: str | None, style: str = "factual") -> tuple[str, str] | None:
    """``(reason, detail)`` when a generation reply is no answer -- a refusal (``refused``) or not the JSON
    asked for (``bad_reply``: no object, question or answer not text, quotes not a list of texts or
    ``{passage, text}`` objects, a conversational sample without its earlier turn) -- else None (an answer,
    ``{"question": null}`` included). Such a reply is not cached and decides nothing: a rerun asks again
    (:data:`ASKED_AGAIN`), as the judge asks its failures again.

    Example:
        >>> unusable_reply("I'm sorry, but I can't help with that.")[0], unusable_reply('{"question": null}')
        ('refused', None)
    """
    from rankwise.llm.parse import ParseError, extract_json, refusal_of

    if content is not None and content.startswith("REFUSAL: "):
        return "refused", content[9:209]
    if refusal_of(content) is not None:
        return "refused", (content or "")[:200]
    try:
        obj = extract_json(content)
    except ParseError as exc:
        return "bad_reply", str(exc)[:200]
    if not isinstance(obj, dict):
        return "bad_reply", "the reply is not a JSON object"
    question, answer = obj.get("question"), obj.get("answer")
    if question is None or (isinstance(answer, str) and _NOT_ANSWERABLE.search(answer) and len(answer) < 200):
        return None  # the model's answer: the passage does not answer it
    if not isinstance(question, str) or not question.strip() or not isinstance(answer, str) or not answer.strip():
        return "bad_reply", "question and answer must be non-empty strings"
    if isinstance(_quote_items(obj), str):
        return "bad_reply", "quotes must be a list of strings or {passage, text} objects"
    history = obj.get("history")
    if style == "conversational" and not (isinstance(history, list) and any(
            isinstance(t, dict) and isinstance(t.get("question"), str) for t in history)):
        return "bad_reply", "a conversational sample needs the earlier turn (history)"
    return None


def unusable_critic(content: str | None) -> tuple[str, str] | None:
    """``("bad_reply", detail)`` when a critic reply holds no numeric score (or is a refusal), else None:
    not cached, asked again by a rerun.

    Example:
        >>> unusable_critic('{"score": 4}'), unusable_critic("no idea")[0]
        (None, 'bad_reply')
    """
    from rankwise.llm.parse import ParseError, extract_json, refusal_of

    if (content is not None and content.startswith("REFUSAL: ")) or refusal_of(content) is not None:
        return "bad_reply", f"the critic refused: {(content or '')[:200]}"
    try:
        obj = extract_json(content)
    except ParseError as exc:
        return "bad_reply", f"critic gave no score: {str(exc)[:200]}"
    score = obj.get("score") if isinstance(obj, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return "bad_reply", "critic gave no score"
    return None


def reply_question(content: str | None) -> str | None:
    """The question a reply asked (for the rejected samples' file), None when it holds none.

    Example:
        >>> reply_question('{"question": "How many copies?", "answer": "3"}'), reply_question("not json")
        ('How many copies?', None)
    """
    from rankwise.llm.parse import ParseError, extract_json

    try:
        obj = extract_json(content)
    except (ParseError, TypeError, ValueError):
        return None
    question = obj.get("question") if isinstance(obj, dict) else None
    return question.strip() if isinstance(question, str) and question.strip() else None


def near_duplicate(question: str, seen: list[tuple[frozenset[str], str, str]], threshold: float) -> str | None:
    """Why ``question`` is a near-duplicate of an accepted one (``seen``: shingles, id, question), else None.

    Example:
        >>> seen = [(shingles("How many copies does Kestrel keep?"), "s1", "How many copies does Kestrel keep?")]
        >>> near_duplicate("How many copies does Kestrel keep ?", seen, 0.8)[:40]
        'Jaccard 1.00 >= 0.8 with accepted sample'
    """
    sh = shingles(question)
    for other, oid, text in seen:
        j = jaccard(sh, other)
        if j >= threshold:
            return f"Jaccard {j:.2f} >= {threshold} with accepted sample {oid!r}: {text[:200]!r}"
    return None


def _merge(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans sorted (by hop first, when they carry one), duplicates and overlaps of one hop merged (text
    re-cut from the merged span's pieces)."""
    out: list[dict[str, Any]] = []
    for r in sorted(refs, key=lambda r: (r.get("hop", -1), r["doc_id"], r["start"], r["end"])):
        if (out and out[-1]["doc_id"] == r["doc_id"] and out[-1].get("hop") == r.get("hop")
                and r["start"] <= out[-1]["end"]):
            last = out[-1]
            if r["end"] > last["end"]:
                last["text"] += r["text"][last["end"] - r["start"]:]
                last["end"] = r["end"]
            continue
        out.append(dict(r))
    return out


# -------------------------------------------------------------------------------------------------- run


@dataclass
class SynthEstimate:
    """What a run would cost, per phase: calls (those not in the cache), tokens and money."""

    phases: dict[str, dict[str, Any]]
    samples: int
    already_done: int

    @property
    def calls(self) -> int:
        return sum(p["calls"] for p in self.phases.values())


@dataclass(kw_only=True)
class SynthSummary(RunSummary):
    """What a run did: samples planned, accepted and rejected by reason, labels (synth's own fields), and
    the counters every LLM run keeps (:class:`~rankwise.llm.runner.RunSummary`: requests, tokens, cost,
    why it stopped). ``calls``: replies had from the endpoint; ``cached``: replies served from the cache."""

    planned: int
    requested: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    resumed: int = 0
    calls: int = 0
    difficulty: Counter = field(default_factory=Counter)
    styles: Counter = field(default_factory=Counter)
    languages: Counter = field(default_factory=Counter)
    max_per_document: int = 0
    documents: int = 0
    out: str = ""
    rejected_out: str = ""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "planned", "requested", "accepted", "rejected", "resumed", "calls", "requests", "cached", "prompt_tokens",
        "completion_tokens", "cached_prompt_tokens", "cost", "difficulty", "styles", "languages", "max_per_document", "documents",
        "stopped", "out", "rejected_out", "model", "prompt_version")

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for k in ("rejected", "difficulty", "styles", "languages"):
            d[k] = dict(sorted(d[k].items()))
        return d


def _fingerprint(corpus: Corpus, settings: SynthSettings, model: str, version: str) -> str:
    h = hashlib.sha256()
    for d in corpus:
        h.update(d.id.encode() + b"\0" + hashlib.sha256(d.text.encode()).digest())
    h.update(json.dumps([settings.n, sorted(settings.styles.items()), settings.seed, settings.passage_chars,
                         settings.min_passage_chars, settings.critic, model, version]).encode())
    return h.hexdigest()[:16]


def _drop_failed_calls(path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rejected rows without those that decided nothing (:data:`ASKED_AGAIN`: a call that failed after
    its retries, a reply that was no answer -- not the JSON asked for, or a refusal); the file is rewritten
    without them, so their samples are asked again, as the judge retries its failures."""
    kept = [r for r in rows if r.get("reason") not in ASKED_AGAIN]
    if len(kept) < len(rows):
        from rankwise._atomic import atomic_write

        with atomic_write(path) as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
    return kept


def _read_done(path: Path, plan: str) -> list[dict[str, Any]]:
    """Rows already written by an earlier run of the same plan (a half-written last line is dropped)."""
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # killed mid-line: that sample is redone from the cache
                continue
            raise InputError("not valid JSON (fix or remove the file to start over)", source=path,
                             line=number) from None
        prov = row.get("provenance") or {}
        if prov.get("plan") != plan:
            raise InputError(f"this file was written by another synth run (plan {prov.get('plan')}, this run "
                             f"{plan}: other corpus, settings, model or prompt); use another --out or remove it",
                             source=path, line=number, field="provenance.plan")
        rows.append(row)
    return rows


def _truncate_partial(path: Path) -> None:
    """Drop a half-written last line (a killed run) so new rows start on a line of their own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(cut)


def rejected_path(out: str | PathLike) -> Path:
    """Where rejected samples go: ``OUT`` with ``.rejected.jsonl`` in place of its suffix.

    Example:
        >>> rejected_path("sets/testset.jsonl").as_posix(), rejected_path("testset").as_posix()
        ('sets/testset.rejected.jsonl', 'testset.rejected.jsonl')
    """
    p = Path(out)
    return p.with_name((p.name[: -len(p.suffix)] if p.suffix else p.name) + ".rejected.jsonl")


def estimate_synth(corpus: Corpus, settings: SynthSettings, *, config: LLMConfig | None = None,
                   model: str | None = None, prices: Any = None, cache: str | PathLike | None = None,
                   prompts: SynthPrompts | None = None, temperature: float | None = 0.0,
                   out: str | PathLike | None = None) -> SynthEstimate:
    """The calls, tokens and money a run would spend, per phase (plan and BM25 cost no call; the critic
    phase is an upper bound: it only sees samples that passed the other checks). Calls already in the
    cache, and samples already in ``out``, are not counted. ``config`` (the run's
    :class:`~rankwise.llm.config.LLMConfig`) gives the model, prices, cache and temperature; without it,
    ``model`` (and the others) say them.

    Example:
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 20})
        >>> est = estimate_synth(corpus, SynthSettings(n=2, passage_chars=300), model="m")
        >>> est.samples, est.phases["generate"]["calls"], est.calls
        (2, 2, 2)
    """
    from rankwise.llm.cache import VerdictCache

    if config is not None:
        model, prices, cache, temperature = (config.endpoint.model, config.prices, config.cache,
                                             config.policy.temperature)
    if model is None:
        raise InputError("estimate_synth needs the model (or the run's LLMConfig)", field="model")
    prompts = prompts or load_synth_prompts()
    slots = plan_samples(corpus, settings)
    done: set[int] = set()
    if out is not None:
        plan = _fingerprint(corpus, settings, model, prompts.prompt_version)
        for path in (Path(out), rejected_path(out)):
            done |= {int(r["provenance"]["slot"]) for r in _read_done(path, plan)}
    store = VerdictCache(cache) if cache is not None and Path(cache).exists() else None
    version = prompts.prompt_version
    phases = {"plan": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
              "generate": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached": 0}}
    if settings.critic:
        phases["critic"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "upper_bound": True}
    phases["bm25 difficulty"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    try:
        for slot in slots:
            if slot.index in done:
                continue
            messages = render_slot(slot, prompts, corpus)
            key = reply_key(model, version, "generation", messages, temperature, settings.max_tokens)
            hit = store.get(key) if store is not None else None
            if hit is not None and unusable_reply(hit.reason, slot.style) is None:
                phases["generate"]["cached"] += 1
                continue
            phases["generate"]["calls"] += 1
            phases["generate"]["prompt_tokens"] += estimate_prompt_tokens(messages)
            phases["generate"]["completion_tokens"] += OUTPUT_TOKENS[slot.style]
            if settings.critic:
                critic = render_critic(prompts, "?" * 80, "?" * 120, ["?" * 150] * (len(slot.passages)))
                phases["critic"]["calls"] += 1
                phases["critic"]["prompt_tokens"] += estimate_prompt_tokens(critic)
                phases["critic"]["completion_tokens"] += OUTPUT_TOKENS["critic"]
    finally:
        if store is not None:
            store.close()
    for p in phases.values():
        p["cost"] = prices.cost(p["prompt_tokens"], p["completion_tokens"]) if prices is not None else None
    return SynthEstimate(phases, len(slots), len(done))


class SynthStopped(RunStopped):
    """The endpoint is gone, refuses the key or model, or the cache cannot be written; ``result`` (a
    :class:`SynthSummary`) counts the samples decided (all written, every reply had in the cache)."""

    result: SynthSummary


class SynthInterrupted(RunInterrupted):
    """Ctrl-C or SIGTERM during a run; ``result`` (a :class:`SynthSummary`): every sample decided is written,
    every reply had is in the cache."""

    result: SynthSummary


def synth(corpus: Corpus | str | PathLike, *, out: str | PathLike, config: LLMConfig | str | PathLike | None = None,
          settings: SynthSettings | None = None, max_cost: float | None = None,
          prompt: str | PathLike | None = None, quiet: bool = True,
          on_progress: Callable[[SynthSummary], None] | None = None, **llm: Any) -> SynthSummary:
    """Generate a test set from ``corpus`` into ``out`` (JSON Lines, appended sample by sample; rejected
    samples go to ``OUT.rejected.jsonl``); a rerun with the same arguments resumes.

    ``config`` is the one :class:`~rankwise.llm.config.LLMConfig` (endpoint, call policy, prices, cache
    file; :func:`~rankwise.llm.config.resolve_llm_config`), passed whole; or, for Python callers, a config
    file path with keywords for the rest (``model``, ``base_url``, ``cache``, ``price_in``, ``concurrency``,
    ``max_calls``, ...). ``max_calls`` caps the calls of this run, counted with the calls in flight, so it
    stops between samples; ``max_cost`` (needs prices) likewise with the money.

    Example (offline: the run planned and priced by :func:`estimate_synth`, as ``rankwise synth --dry-run``;
    with an endpoint up, ``synth(corpus, out="testset.jsonl", config=cfg, settings=settings)`` generates the
    samples and ``summary.accepted`` counts them):
        >>> from rankwise.llm.config import resolve_llm_config
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 20,
        ...                            "b": "Beta text about nodes and leases. " * 20})
        >>> cfg = resolve_llm_config(model="qwen2.5:7b", base_url="http://127.0.0.1:9/v1", env={},
        ...                          cache="no-such-synth-cache.sqlite")
        >>> settings = SynthSettings(n=4, styles={"factual": 0.5, "paraphrase": 0.5}, passage_chars=300)
        >>> est = estimate_synth(corpus, settings, config=cfg)
        >>> est.samples, est.phases["generate"]["calls"]
        (4, 4)
    """
    from rankwise.llm.config import as_llm_config

    settings = settings or SynthSettings()
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    cfg = as_llm_config(config, **llm)
    if max_cost is not None and not cfg.prices.known:
        raise InputError("--max-cost needs prices: give --price-in/--price-out (per 1M tokens) or put price_in, "
                         "price_out in the [llm] table", field="max_cost")
    run = _SynthRun(corpus, settings, cfg, load_synth_prompts(prompt), Path(out), max_cost, on_progress)
    try:
        return run.go(quiet)
    except SynthStopped as exc:
        s = exc.result
        raise EndpointError(f"{exc}; the {s.accepted + sum(s.rejected.values())} samples decided are in {out} and "
                            f"{run.rej_out}, every reply had is in the cache ({cfg.cache}): rerun the same command "
                            f"to resume") from None


class _SynthRun:
    """One synth run: the plan, what earlier runs decided, the ordered writing of samples."""

    def __init__(self, corpus: Corpus, settings: SynthSettings, cfg: LLMConfig, prompts: SynthPrompts, out: Path,
                 max_cost: float | None, on_progress: Callable | None) -> None:
        self.corpus, self.settings, self.cfg, self.prompts, self.out = corpus, settings, cfg, prompts, out
        self.max_cost, self.max_calls, self.on_progress = max_cost, cfg.policy.max_calls, on_progress
        self.model, self.version = cfg.endpoint.model, prompts.prompt_version
        self.plan = _fingerprint(corpus, settings, self.model, self.version)
        self.slots = plan_samples(corpus, settings)
        self.rej_out = rejected_path(out)
        self.summary = SynthSummary(planned=len(self.slots), requested=settings.n, out=str(out),
                                    rejected_out=str(self.rej_out), model=self.model, prompt_version=self.version,
                                    documents=len({s.passages[0].doc_id for s in self.slots}))
        self.summary.max_per_document = max(Counter(s.passages[0].doc_id for s in self.slots).values())
        self.norms: dict[str, tuple[str, list[int]]] = {}
        self.seen_questions: list[tuple[frozenset[str], str, str]] = []  # accepted: shingles, id, question
        self.done = self._resume()

    def _resume(self) -> set[int]:
        """The slots decided by earlier runs (their rows counted), files ready to append to."""
        accepted_rows = _read_done(self.out, self.plan)
        rejected_rows = _drop_failed_calls(self.rej_out, _read_done(self.rej_out, self.plan))
        s = self.summary
        for r in accepted_rows:
            s.accepted += 1
            s.difficulty[r.get("difficulty")] += 1
            s.styles[r.get("style")] += 1
            s.languages[r.get("language")] += 1
            self.seen_questions.append((shingles(r["user_input"]), str(r.get("id")), r["user_input"]))
        for r in rejected_rows:
            s.rejected[r["reason"]] += 1
        done = {int(r["provenance"]["slot"]) for r in accepted_rows + rejected_rows}
        s.resumed = len(done)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _truncate_partial(self.out)
        _truncate_partial(self.rej_out)
        return done

    def key(self, kind: str, messages: list[dict], max_tokens: int) -> str:
        return reply_key(self.model, self.version, kind, messages, self.cfg.policy.temperature, max_tokens)

    def go(self, quiet: bool) -> SynthSummary:
        """Run the slots not decided yet on the one :class:`~rankwise.llm.runner.Runner` and cache."""
        from rankwise.llm.cache import VerdictCache
        from rankwise.progress import progress
        from rankwise.retrieval.bm25 import BM25Retriever

        todo = [s for s in self.slots if s.index not in self.done]
        passages = _passages(self.corpus, self.settings)
        self.bm25 = BM25Retriever(quiet=True, name="bm25-difficulty")
        self.bm25.index(passages)
        self.passage_by_id = {c.id: c for c in passages}
        cache = VerdictCache(self.cfg.cache)
        runner = Runner(self.cfg.endpoint, self.cfg.policy, self.cfg.prices, cache, name="rankwise-synth")
        self.cpu = _Background()
        try:
            with open(self.out, "a", encoding="utf-8") as self.fh_ok, \
                    open(self.rej_out, "a", encoding="utf-8") as self.fh_rej, \
                    progress("synth", len(self.slots), quiet=quiet) as self.advance:
                self.advance(len(self.done))
                if not todo:  # all decided by earlier runs: nothing to call, nothing spent
                    self.summary.cost = self.cfg.prices.cost(0, 0)
                    return self.summary
                return runner.run(lambda r: _SynthJob(self, r, todo))
        finally:
            self.cpu.close()
            cache.close()

    def show(self, n: int, cost: float | None) -> None:
        s = self.summary
        money = f" ${cost:.4f}" if cost is not None else ""
        self.advance(n, description=f"synth: {s.accepted} kept, {s.calls} calls{money}")
        if self.on_progress is not None:
            s.cost = cost
            self.on_progress(s)

    def write(self, slot: Slot, sample: dict[str, Any] | None, reason: str | None, detail: str | None,
              question: str | None) -> None:
        """Write one decided sample (in plan order): a near-duplicate of an accepted question is rejected
        here, an accepted one gets its BM25 difficulty; a rejected one keeps the question its reply asked."""
        s = self.summary
        prov = {"model": self.model, "prompt_version": self.version, "style": slot.style, "seed": self.settings.seed,
                "slot": slot.index, "plan": self.plan,
                "passages": [{"doc_id": p.doc_id, "start": p.start, "end": p.end} for p in slot.passages]}
        if sample is not None:
            same = near_duplicate(sample["user_input"], self.seen_questions, self.settings.duplicate_threshold)
            if same is not None:
                sample, reason, detail = None, "duplicate", same
        if sample is None:
            s.rejected[reason] += 1
            self.fh_rej.write(json.dumps({"id": slot.id, "question": question, "reason": reason, "detail": detail,
                                          "provenance": prov}, ensure_ascii=False) + "\n")
            self.fh_rej.flush()
            return
        self.seen_questions.append((shingles(sample["user_input"]), slot.id, sample["user_input"]))
        rank = sample.pop("bm25_rank")
        difficulty = "easy" if rank == 1 else "hard" if rank is not None else "unretrieved"
        prov["located"] = sample.pop("located")
        row = {"id": slot.id, **sample, "style": slot.style, "language": slot.language, "difficulty": difficulty,
               "bm25_rank": rank, "provenance": prov}
        self.fh_ok.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.fh_ok.flush()
        s.accepted += 1
        s.difficulty[difficulty] += 1
        s.styles[slot.style] += 1
        s.languages[slot.language] += 1


@dataclass
class _Outcome:
    """A slot's outcome for the runner: ``ok`` (decided), ``failed`` (its call failed) or ``missing``."""

    status: str = "missing"
    error: str | None = None
    cached: bool = False


_Decision = tuple[dict[str, Any] | None, str | None, str | None, str | None]  # sample, reason, detail, question


class _SynthJob(Job):
    """Synth's task for the :class:`~rankwise.llm.runner.Runner`: a unit is one slot (its generation call,
    then its critic call); decided slots are written in plan order as they settle. :meth:`admit` holds the
    caps: a slot starts only if the calls made, the calls the slots in flight still hold and its own stay
    within ``max_calls`` (and their estimated cost within ``max_cost``); once one is refused, the run
    starts no more and ends the calls in flight, so every call made decides a sample."""

    stopped, interrupted = SynthStopped, SynthInterrupted

    def __init__(self, run: _SynthRun, runner: Runner, todo: list[Slot]) -> None:
        self.run, self.runner, self.units = run, runner, todo
        self.summary = run.summary
        self.outcome = {s.index: _Outcome() for s in todo}
        self.messages = {s.index: render_slot(s, run.prompts, run.corpus) for s in todo}
        self.keys = {i: run.key("generation", m, run.settings.max_tokens) for i, m in self.messages.items()}
        hits = runner.cache.get_many(list(self.keys.values())) if runner.cache is not None else {}
        # a reply that was no answer (cached by an older rankwise) is asked again, not reused
        self.hits = {k: hits[k] for s in todo if (k := self.keys[s.index]) in hits
                     and unusable_reply(hits[k].reason, s.style) is None}
        self.held: dict[int, int] = {}  # calls reserved by each slot in flight
        self.decided: dict[int, _Decision] = {}
        self.order = [s.index for s in todo]
        self.by_index = {s.index: s for s in todo}
        self.next = 0
        self.cached_calls = 0
        self.exhausted = False  # max_calls ran out under a retry: start no more slots
        self.in_flight = 0  # calls sent, their reply (and its cost) not had yet

    def outcomes(self) -> Iterable[_Outcome]:
        return self.outcome.values()

    def admit(self, slot: Slot) -> str | None:
        run = self.run
        need = int(self.keys[slot.index] not in self.hits) + int(run.settings.critic)
        held = sum(self.held.values())
        if self.exhausted or (need and run.max_calls is not None
                              and self.runner.requests_sent() + held + need > run.max_calls):
            return f"max calls reached ({run.max_calls} calls)"
        if need and run.max_cost is not None:
            spent = self.runner.spent() or 0.0
            planned = run.cfg.prices.cost(estimate_prompt_tokens(self.messages[slot.index]),
                                          OUTPUT_TOKENS[slot.style]) or 0.0
            per_call = max(planned, spent / self.summary.calls if self.summary.calls else 0.0)
            if spent + per_call * (held + self.in_flight + need) > run.max_cost:
                return f"max cost reached (${spent:.4f} spent of ${run.max_cost:g})"
        self.held[slot.index] = need
        return None

    def settle_rest(self, unit: Slot, status: str, error: str) -> None:
        o = self.outcome[unit.index]
        if o.status == "missing" and unit.index not in self.decided:
            o.status, o.error = status, error
            if status == "failed":  # a defect: no answer, like a failed call; a rerun asks again
                self.decided[unit.index] = (None, "call_failed", error[:200], None)
                self._commit()

    async def do(self, unit: Slot) -> None:
        try:
            decision = await self._decide(unit)
        finally:
            self.held.pop(unit.index, None)
        if decision is not None:
            o = self.outcome[unit.index]
            o.status, o.error = ("failed", decision[2]) if decision[1] == "call_failed" else ("ok", None)
            self.decided[unit.index] = decision
        self._commit()

    async def _call(self, slot: Slot, kind: str, messages: list[dict], max_tokens: int) -> str | None:
        """One reply: from the cache, else from the endpoint (stored in the cache as it arrives, unless it is
        no answer: :func:`unusable_reply`, :func:`unusable_critic`; a rerun asks that one again)."""
        run = self.run
        key = run.key(kind, messages, max_tokens)
        unusable = (lambda c: unusable_reply(c, slot.style)) if kind == "generation" else unusable_critic
        hit = self.hits.get(key) if kind == "generation" else self.runner.cache.get(key)  # type: ignore[union-attr]
        if hit is not None and unusable(hit.reason) is not None:
            hit = None
        reserved = kind == "critic" or hit is None
        if hit is not None:
            self.cached_calls += 1
            self.outcome[slot.index].cached = True
            if reserved:
                self.held[slot.index] -= 1
            return hit.reason
        self.held[slot.index] -= 1  # counted from here on by the requests sent (no await in between)
        self.in_flight += 1  # and, until its reply is priced, as a call in flight
        try:
            reply = await self.runner.chat(messages, max_tokens, ANY_OBJECT)  # every synth prompt asks for JSON
        finally:
            self.in_flight -= 1
        self.summary.calls += 1
        content = reply.content if reply.content is not None else (reply.refusal and f"REFUSAL: {reply.refusal}")
        self.runner.record(unusable(content) is None, lambda w: w.put(key, verdict=1, grade=None, reason=content, model=run.model,
                                                 mode="synth", scale=kind, prompt_version=run.version,
                                                 style="generate", call="single", prompt_tokens=reply.prompt_tokens,
                                                 completion_tokens=reply.completion_tokens), 0)
        return content

    async def _decide(self, slot: Slot) -> _Decision | None:
        """The slot's decision; None when ``max_calls`` ran out under it (undecided: a rerun goes on)."""
        run = self.run
        try:
            content = await self._call(slot, "generation", self.messages[slot.index], run.settings.max_tokens)
        except BudgetExhausted:
            self.exhausted = True
            return None
        except CallError as exc:
            return None, "call_failed", str(exc)[:200], None
        # the checks (quotes located in whole documents, BM25 rank) off the event loop: Ctrl-C is taken at once
        sample, reason, detail = await run.cpu(_checked, content, slot, run)
        question = sample["user_input"] if sample is not None else reply_question(content)
        if sample is None or not run.settings.critic:
            return sample, reason, detail, question
        messages = render_critic(run.prompts, sample["user_input"], sample["reference"],
                                 [r["text"] for r in sample["reference_contexts"]])
        try:
            verdict = await self._call(slot, "critic", messages, 120)
        except BudgetExhausted:
            self.exhausted = True
            return None
        except CallError as exc:  # no answer, not a rejection: a rerun asks again
            return None, "call_failed", f"critic call: {str(exc)[:200]}", question
        return (*_criticised(sample, verdict, run.settings.critic_min), question)

    def _commit(self) -> None:
        """Write the decided slots in plan order, up to the first one not decided yet."""
        before = self.next
        while self.next < len(self.order) and self.order[self.next] in self.decided:
            index = self.order[self.next]
            self.run.write(self.by_index[index], *self.decided.pop(index))
            self.next += 1
        if self.next > before:
            self.run.show(self.next - before, self.runner.spent())

    def result(self) -> SynthSummary:
        self._commit()
        s = self.summary
        s.cached = self.cached_calls
        if s.stopped is None:
            s.stopped = self.runner.capped or (f"max calls reached ({self.run.max_calls} calls)"
                                               if self.exhausted else None)
        return s


def _checked(content: str | None, slot: Slot,
             run: _SynthRun) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """:func:`check_reply`, and an accepted sample's BM25 rank (``bm25_rank``: the one thing :meth:`_SynthRun.write`
    does that takes time)."""
    sample, reason, detail = check_reply(content, slot, run.corpus, run.settings, run.norms)
    if sample is not None:
        sample["bm25_rank"] = _bm25_rank(run.bm25, run.passage_by_id, sample)
    return sample, reason, detail


class _Background:
    """One daemon thread for a run's CPU-bound steps (quotes located in whole documents, BM25 ranks), so the
    event loop stays free to take Ctrl-C at once: a step still running when the run stops is abandoned (its
    sample decided nothing; its reply is in the cache), and the process does not wait for it to end."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="rankwise-synth-checks", daemon=True).start()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, args, loop, future = item
            if future.cancelled():
                continue
            try:
                result, failed = fn(*args), False
            except Exception as exc:  # noqa: BLE001 - raised in the awaiting task, as if called there
                result, failed = exc, True
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run has ended
                loop.call_soon_threadsafe(_settle, future, result, failed)

    async def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((fn, args, loop, future))
        return await future

    def close(self) -> None:
        self._queue.put(None)


def _settle(future: asyncio.Future, result: Any, failed: bool) -> None:
    if not future.done():
        future.set_exception(result) if failed else future.set_result(result)


def _criticised(sample: dict[str, Any], verdict: str | None,
                minimum: int) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """The sample with the critic's score, rejected (``critic``) for a low score, or (``bad_reply``) for a
    reply without one."""
    from rankwise.llm.parse import extract_json

    problem = unusable_critic(verdict)
    if problem is not None:  # no score: decided nothing, a rerun asks the critic again
        return None, *problem
    obj = extract_json(verdict)
    score = obj["score"]
    sample["critic"] = {"score": score, "reason": str(obj.get("reason") or "")[:300]}
    if score < minimum:
        return None, "critic", f"score {score}: {obj.get('reason')}"
    return sample, None, None


def _bm25_rank(bm25: Any, by_id: dict[str, Chunk], sample: dict[str, Any]) -> int | None:
    """Rank (1-based, within the top 10) of the first passage overlapping a reference span, else None."""
    run = bm25.search({"q": sample["user_input"]}, k=10)
    for rank, chunk_id in enumerate(run.ranking("q"), 1):
        c = by_id[chunk_id]
        for r in sample["reference_contexts"]:
            if r["doc_id"] == c.doc_id and r["start"] < c.end and c.start < r["end"]:
                return rank
    return None


def estimate_lines(est: SynthEstimate, url: str, model: str) -> list[str]:
    """The ``--dry-run`` report: one line per phase, then the total."""
    lines = [f"dry run: {est.samples} samples planned ({est.already_done} already done), model {model} at {url}"]
    total_cost: float | None = None
    for name, p in est.phases.items():
        extra = f", {p['cached']} cached" if p.get("cached") else ""
        bound = " (at most: only samples that pass the checks)" if p.get("upper_bound") else ""
        money = f", ${p['cost']:.4f}" if p.get("cost") is not None else ""
        lines.append(f"  {name:16} {p['calls']:6d} calls{extra}, ~{p['prompt_tokens']:,} prompt + "
                     f"~{p['completion_tokens']:,} completion tokens{money}{bound}")
        if p.get("cost") is not None:
            total_cost = (total_cost or 0.0) + p["cost"]
    money = f", ~${total_cost:.4f}" if total_cost is not None else " (give --price-in/--price-out for money)"
    lines.append(f"  {'total':16} {est.calls:6d} calls{money}")
    return lines


def summary_lines(s: SynthSummary) -> list[str]:
    """The end-of-run report: kept, rejected by reason, duplicates, difficulty, calls and money."""
    rejected = sum(s.rejected.values())
    lines = [f"synth: {s.accepted} samples kept of {s.planned} planned, {rejected} rejected"
             + (f" ({s.resumed} decided by an earlier run)" if s.resumed else "")]
    for reason, n in sorted(s.rejected.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  rejected {n:5d}  {reason}: {REASONS.get(reason, reason)}")
    lines.append(f"  near-duplicates removed: {s.rejected.get('duplicate', 0)}")
    lines.append("  difficulty (BM25 round trip): " + ", ".join(
        f"{k} {s.difficulty.get(k, 0)}" for k in ("easy", "hard", "unretrieved")))
    lines.append("  styles: " + ", ".join(f"{k} {v}" for k, v in sorted(s.styles.items()))
                 + "; languages: " + ", ".join(f"{k} {v}" for k, v in sorted(s.languages.items())))
    lines.append(f"  documents: {s.documents}, at most {s.max_per_document} planned samples from one document")
    if s.requested > s.planned:
        lines.append(f"  planned {s.planned} of the {s.requested} asked for: each document gives at most its share "
                     f"of passages; a smaller --passage-chars gives more")
    money = f", ${s.cost:.4f}" if s.cost is not None else ""
    lines.append(f"  calls: {s.calls} made ({s.requests} requests with retries), {s.cached} from the cache; "
                 f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion tokens{money}")
    if s.stopped:
        cap = "--max-calls" if s.stopped.startswith("max calls") else "--max-cost"
        lines.append(f"  stopped: {s.stopped}; rerun the same command (with a higher {cap}) to go on")
    lines.append(f"test set: {s.out}; rejected samples: {s.rejected_out}")
    return lines
