"""Generated test sets whose labels are exact character spans, so they survive re-chunking.

The run, for ``n`` planned samples:

1. **Plan** (no calls): the corpus is cut into passages (``passage_chars``); documents are visited in a
   seeded order, round robin, one passage each per round, so no document gets more than its share
   (``ceil(n / documents)``, never more: a document with fewer passages leaves its place empty rather than
   handing it to a longer one, so fewer than ``n`` samples may be planned; a smaller ``passage_chars``
   gives more passages). Each sample gets a style from the
   ``styles`` shares (largest remainder); a ``multi`` sample gets a second passage, the BM25-nearest
   passage of another document.
2. **Generate**: one call per sample returns question, answer and supporting quotes (JSON). Every quote
   must be found in its document (exact, then normalised; :mod:`rankwise.testsets.locate`) and becomes a
   span ``{text, doc_id, start, end}`` with ``text == document[start:end]``.
3. **Check**, rejecting and counting by reason (:data:`REASONS`); optional **critic** call that sees the
   question, the answer and the quotes.
4. **Label** (not filter) difficulty by a BM25 round trip over the passages: ``easy`` (a source passage at
   rank 1), ``hard`` (in the top 10), ``unretrieved``.

Safety: every reply is stored in the SQLite cache (table ``generations``) before it is used, every
accepted sample is appended to the output and every rejected one to ``OUT.rejected.jsonl`` as soon as it
is decided (in plan order), and a rerun skips the samples already decided: a run killed at any point
resumes without repeating a call. A call that failed after its retries (``call_failed``) decided nothing:
a rerun asks it again. ``max_cost`` stops launching calls once the money spent (plus what
the calls in flight will cost) reaches it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import InputError, RankwiseError
from rankwise.retrieval.chunking import Chunk, chunk_corpus
from rankwise.retrieval.corpus import Corpus, load_corpus
from rankwise.testsets.language import detect_language, language_name
from rankwise.testsets.locate import locate, normalise

__all__ = ["STYLES", "REASONS", "SynthSettings", "Slot", "SynthSummary", "SynthEstimate", "GenerationCache",
           "SynthPrompts", "load_synth_prompts", "parse_styles", "plan_samples", "estimate_synth", "synth",
           "lexical_overlap", "shingles", "jaccard", "reply_question", "near_duplicate"]

STYLES = ("factual", "paraphrase", "multi", "conversational")
#: why a sample was rejected
REASONS = {
    "call_failed": "the call (or the critic's) failed after its retries; a rerun asks again",
    "bad_reply": "the reply was not the JSON asked for",
    "not_answerable": "the model said the passage does not answer it (or refused)",
    "quote_not_found": "a quote is not in the source document, even normalised",
    "no_quotes": "no supporting quote given",
    "multi_one_passage": "a multi-passage sample whose quotes come from one passage only",
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
OUTPUT_TOKENS = {"factual": 150, "paraphrase": 150, "multi": 220, "conversational": 260, "critic": 40}


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
        >>> load_synth_prompts().prompt_version.startswith("synth-v1+")
        True
    """
    from rankwise.llm.prompts import _load_toml

    text = resources.files("rankwise.testsets").joinpath("prompts", "synth.toml").read_text(encoding="utf-8")
    data = _load_toml(None, text)
    source = "rankwise:testsets/prompts/synth.toml"
    if path is not None:
        user = _load_toml(Path(path))
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


_PLACE = re.compile(r"\{(passage|passage2|language|title|title2|question|answer|quotes)\}")


def _fill(template: str, values: dict[str, str]) -> str:
    from rankwise.llm.prompts import escape_data

    return _PLACE.sub(lambda m: escape_data(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


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
    """One planned sample: its index, style, passages (one, or two for ``multi``) and language."""

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
    partner = _partners(passages, [c for c, s in zip(chosen, styles, strict=True) if s == "multi"])
    slots = []
    for i, (c, style) in enumerate(zip(chosen, styles, strict=True)):
        lang = detect_language(c.text)
        if style == "multi":
            other = partner.get(c.id)
            if other is None:  # a one-passage corpus: nothing to combine
                style = "factual"
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
    """The chat messages of one sample's generation call."""
    first = slot.passages[0]
    values = {"passage": first.text, "language": language_name(slot.language),
              "title": corpus[first.doc_id].title or first.doc_id}
    if len(slot.passages) > 1:
        second = slot.passages[1]
        values |= {"passage2": second.text, "title2": corpus[second.doc_id].title or second.doc_id}
    return [{"role": "system", "content": prompts.system},
            {"role": "user", "content": _fill(prompts.styles[slot.style], values)}]


def render_critic(prompts: SynthPrompts, question: str, answer: str, quotes: list[str]) -> list[dict]:
    """The chat messages of a critic call: question, answer and the quotes (not the whole passage)."""
    values = {"question": question, "answer": answer, "quotes": "\n".join(f"- {q}" for q in quotes)}
    return [{"role": "system", "content": prompts.critic_system},
            {"role": "user", "content": _fill(prompts.critic_user, values)}]


# ------------------------------------------------------------------------------------------------- cache


class GenerationCache:
    """Generation replies in SQLite (table ``generations``, WAL, committed one by one as they arrive); the
    file may be the judge's cache file, whose tables it leaves alone.

    Example:
        >>> import tempfile, os
        >>> with GenerationCache(os.path.join(tempfile.mkdtemp(), "c.sqlite")) as cache:
        ...     cache.put("k", content="{}", prompt_tokens=3, completion_tokens=1, model="m", version="v")
        ...     cache.get("k")["content"]
        '{}'
    """

    def __init__(self, path: str | PathLike) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                             "version TEXT NOT NULL, content TEXT, prompt_tokens INTEGER NOT NULL, "
                             "completion_tokens INTEGER NOT NULL, created REAL NOT NULL)")
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a usable rankwise cache (SQLite) file: {exc}", source=self.path) from None
        except OSError as exc:
            raise InputError(f"cannot create the cache file: {exc.strerror}", source=self.path) from None

    def __enter__(self) -> GenerationCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply (``content``, ``prompt_tokens``, ``completion_tokens``) or None."""
        row = self._db.execute("SELECT content, prompt_tokens, completion_tokens FROM generations WHERE key=?",
                               (key,)).fetchone()
        return None if row is None else {"content": row[0], "prompt_tokens": row[1], "completion_tokens": row[2]}

    def has(self, key: str) -> bool:
        return self._db.execute("SELECT 1 FROM generations WHERE key=?", (key,)).fetchone() is not None

    def put(self, key: str, *, content: str | None, prompt_tokens: int, completion_tokens: int, model: str,
            version: str) -> None:
        """Store one reply, committed at once."""
        try:
            self._db.execute("INSERT OR REPLACE INTO generations VALUES (?,?,?,?,?,?,?)",
                             (key, model, version, content, prompt_tokens, completion_tokens, time.time()))
        except sqlite3.Error as exc:
            raise RankwiseError(f"{self.path}: cannot write the generation cache ({exc}); stopping so no paid "
                                "reply is lost") from None

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]


def request_key(model: str, messages: list[dict], temperature: float | None, max_tokens: int) -> str:
    """SHA-256 of what decides a reply: model, messages, temperature and token limit."""
    blob = json.dumps({"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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


def _quote_items(obj: dict, slot: Slot) -> list[tuple[int | None, str]] | str:
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
    from rankwise.llm.parse import ParseError, extract_json, refusal_of

    if content is not None and content.startswith("REFUSAL: "):
        return None, "not_answerable", content[9:209]
    if refusal_of(content) is not None:
        return None, "not_answerable", (content or "")[:200]
    try:
        obj = extract_json(content)
    except ParseError as exc:
        return None, "bad_reply", str(exc)
    if not isinstance(obj, dict):
        return None, "bad_reply", "the reply is not a JSON object"
    question, answer = obj.get("question"), obj.get("answer")
    if question is None or (isinstance(answer, str) and _NOT_ANSWERABLE.search(answer) and len(answer) < 200):
        return None, "not_answerable", str(answer)[:200]
    if not isinstance(question, str) or not question.strip() or not isinstance(answer, str) or not answer.strip():
        return None, "bad_reply", "question and answer must be non-empty strings"
    items = _quote_items(obj, slot)
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
            if hit is not None:
                inside = [j for j, q in enumerate(slot.passages)
                          if q.doc_id == p.doc_id and hit.start < q.end and q.start < hit.end]
                used.add(inside[0] if inside else i)
                refs.append({"text": doc[hit.start:hit.end], "doc_id": p.doc_id, "start": hit.start, "end": hit.end})
                hows.append(hit.how)
                break
        if hit is None:
            return None, "quote_not_found", text[:200]
    if slot.style == "multi" and len(used) < 2:
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
    """Spans sorted, duplicates and overlaps merged (text re-cut from the merged span's pieces)."""
    out: list[dict[str, Any]] = []
    for r in sorted(refs, key=lambda r: (r["doc_id"], r["start"], r["end"])):
        if out and out[-1]["doc_id"] == r["doc_id"] and r["start"] <= out[-1]["end"]:
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


@dataclass
class SynthSummary:
    """What a run did: samples planned, accepted and rejected by reason, calls and money, labels."""

    planned: int
    requested: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    resumed: int = 0
    calls: int = 0
    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    difficulty: Counter = field(default_factory=Counter)
    styles: Counter = field(default_factory=Counter)
    languages: Counter = field(default_factory=Counter)
    max_per_document: int = 0
    documents: int = 0
    stopped: str | None = None
    out: str = ""
    rejected_out: str = ""
    model: str = ""
    prompt_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
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
    """The rejected rows without those of calls that failed (``call_failed``: no reply after the retries);
    the file is rewritten without them, so their samples are asked again, as the judge retries its
    failures: a failed call is not an answer."""
    kept = [r for r in rows if r.get("reason") != "call_failed"]
    if len(kept) < len(rows):
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
        os.replace(tmp, path)
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


def estimate_synth(corpus: Corpus, settings: SynthSettings, *, model: str, prices: Any = None,
                   cache: str | PathLike | None = None, prompts: SynthPrompts | None = None,
                   temperature: float | None = 0.0, out: str | PathLike | None = None) -> SynthEstimate:
    """The calls, tokens and money a run would spend, per phase (plan and BM25 cost no call; the critic
    phase is an upper bound: it only sees samples that passed the other checks). Calls already in the
    cache, and samples already in ``out``, are not counted.

    Example:
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 20})
        >>> est = estimate_synth(corpus, SynthSettings(n=2, passage_chars=300), model="m")
        >>> est.samples, est.phases["generate"]["calls"], est.calls
        (2, 2, 2)
    """
    from rankwise.llm.cost import estimate_prompt_tokens

    prompts = prompts or load_synth_prompts()
    slots = plan_samples(corpus, settings)
    done: set[int] = set()
    if out is not None:
        plan = _fingerprint(corpus, settings, model, prompts.prompt_version)
        for path in (Path(out), rejected_path(out)):
            done |= {int(r["provenance"]["slot"]) for r in _read_done(path, plan)}
    store = GenerationCache(cache) if cache is not None and Path(cache).exists() else None
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
            if store is not None and store.has(request_key(model, messages, temperature, settings.max_tokens)):
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


class _Stop(Exception):
    pass


def synth(corpus: Corpus | str | PathLike, *, out: str | PathLike, model: str | None = None,
          base_url: str | None = None, api_key: str | None = None, settings: SynthSettings | None = None,
          config: str | PathLike | None = None, cache: str | PathLike | None = None,
          price_in: float | None = None, price_out: float | None = None, max_cost: float | None = None,
          concurrency: int | None = None, max_retries: int | None = None, timeout: float | None = None,
          rpm: float | None = None, max_calls: int | None = None, prompt: str | PathLike | None = None,
          quiet: bool = True,
          on_progress: Callable[[SynthSummary], None] | None = None) -> SynthSummary:
    """Generate a test set from ``corpus`` into ``out`` (JSON Lines, appended sample by sample; rejected
    samples go to ``OUT.rejected.jsonl``); a rerun with the same arguments resumes. Endpoint, prices,
    cache and call policy resolve as the judge's (:func:`~rankwise.llm.config.resolve_llm_config`).

    Example::

        from rankwise.testsets import synth, SynthSettings
        summary = synth("docs/", out="testset.jsonl", model="qwen2.5:7b", base_url="http://localhost:11434/v1",
                        settings=SynthSettings(n=200, styles={"factual": 0.7, "paraphrase": 0.3}))
        print(summary.accepted, dict(summary.rejected))
    """
    from rankwise.llm.config import resolve_llm_config

    settings = settings or SynthSettings()
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    cfg = resolve_llm_config(config=config, model=model, base_url=base_url, api_key=api_key, cache=cache,
                             price_in=price_in, price_out=price_out, concurrency=concurrency,
                             max_retries=max_retries, timeout=timeout, rpm=rpm)
    if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0):
        raise InputError(f"max_calls must be a whole number >= 0, got {max_calls!r}", field="max_calls")
    if max_cost is not None and not cfg.prices.known:
        raise InputError("--max-cost needs prices: give --price-in/--price-out (per 1M tokens) or put price_in, "
                         "price_out in the [llm] table", field="max_cost")
    prompts = load_synth_prompts(prompt)
    return asyncio.run(_run(corpus, settings, cfg, prompts, Path(out), max_cost, max_calls, quiet, on_progress))


async def _run(corpus: Corpus, settings: SynthSettings, cfg: Any, prompts: SynthPrompts, out: Path,
               max_cost: float | None, max_calls: int | None, quiet: bool,
               on_progress: Callable | None) -> SynthSummary:
    from rankwise.llm.client import CallError, ChatClient
    from rankwise.llm.cost import estimate_prompt_tokens
    from rankwise.llm.parse import ParseError, extract_json
    from rankwise.progress import progress
    from rankwise.retrieval.bm25 import BM25Retriever

    model = cfg.endpoint.model
    version = prompts.prompt_version
    plan = _fingerprint(corpus, settings, model, version)
    slots = plan_samples(corpus, settings)
    rej_out = rejected_path(out)
    summary = SynthSummary(planned=len(slots), requested=settings.n, out=str(out), rejected_out=str(rej_out), model=model,
                           prompt_version=version, documents=len({s.passages[0].doc_id for s in slots}))
    summary.max_per_document = max(Counter(s.passages[0].doc_id for s in slots).values())
    accepted_rows = _read_done(out, plan)
    rejected_rows = _drop_failed_calls(rej_out, _read_done(rej_out, plan))
    done = {int(r["provenance"]["slot"]) for r in accepted_rows + rejected_rows}
    seen_questions: list[tuple[frozenset[str], str, str]] = []  # accepted: shingles, id, question
    for r in accepted_rows:
        summary.accepted += 1
        summary.difficulty[r.get("difficulty")] += 1
        summary.styles[r.get("style")] += 1
        summary.languages[r.get("language")] += 1
        seen_questions.append((shingles(r["user_input"]), str(r.get("id")), r["user_input"]))
    for r in rejected_rows:
        summary.rejected[r["reason"]] += 1
    summary.resumed = len(done)
    out.parent.mkdir(parents=True, exist_ok=True)
    _truncate_partial(out)
    _truncate_partial(rej_out)
    todo = [s for s in slots if s.index not in done]

    passages = _passages(corpus, settings)
    bm25 = BM25Retriever(quiet=True, name="bm25-difficulty")
    bm25.index(passages)
    passage_by_id = {c.id: c for c in passages}
    norms: dict[str, tuple[str, list[int]]] = {}
    temperature = cfg.policy.temperature
    store = GenerationCache(cfg.cache)
    results: dict[int, tuple[dict | None, str | None, str | None, str | None]] = {}  # + the reply's question
    next_commit = 0
    order = [s.index for s in todo]
    by_index = {s.index: s for s in todo}
    spent = {"prompt": 0, "completion": 0}

    def cost_now() -> float | None:
        return cfg.prices.cost(spent["prompt"], spent["completion"])

    async def call(client: ChatClient, messages: list[dict], max_tokens: int) -> tuple[str | None, bool]:
        key = request_key(model, messages, temperature, max_tokens)
        hit = store.get(key)
        if hit is not None:
            summary.cached += 1
            return hit["content"], True
        reply = await client.chat(messages, max_tokens=max_tokens)
        content = reply.content if reply.content is not None else (reply.refusal and f"REFUSAL: {reply.refusal}")
        store.put(key, content=content, prompt_tokens=reply.prompt_tokens,
                  completion_tokens=reply.completion_tokens, model=model, version=version)
        summary.calls += 1
        spent["prompt"] += reply.prompt_tokens
        spent["completion"] += reply.completion_tokens
        return content, False

    async def work(client: ChatClient, slot: Slot) -> None:
        try:
            content, _ = await call(client, render_slot(slot, prompts, corpus), settings.max_tokens)
        except CallError as exc:
            results[slot.index] = (None, "call_failed", str(exc)[:200], None)
            return
        sample, reason, detail = check_reply(content, slot, corpus, settings, norms)
        question = sample["user_input"] if sample is not None else reply_question(content)
        if sample is not None and settings.critic:
            messages = render_critic(prompts, sample["user_input"], sample["reference"],
                                     [r["text"] for r in sample["reference_contexts"]])
            try:
                verdict, _ = await call(client, messages, 120)
                obj = extract_json(verdict)
                score = obj.get("score") if isinstance(obj, dict) else None
                if isinstance(score, bool) or not isinstance(score, (int, float)):
                    raise ParseError("no numeric score")
                sample["critic"] = {"score": score, "reason": str(obj.get("reason") or "")[:300]}
                if score < settings.critic_min:
                    sample, reason, detail = None, "critic", f"score {score}: {obj.get('reason')}"
            except CallError as exc:  # no answer, not a rejection: a rerun asks again
                sample, reason, detail = None, "call_failed", f"critic call: {str(exc)[:200]}"
            except ParseError as exc:
                sample, reason, detail = None, "critic", f"critic gave no score: {exc}"
        results[slot.index] = (sample, reason, detail, question)

    def commit(fh_ok, fh_rej) -> None:
        nonlocal next_commit
        while next_commit < len(order) and order[next_commit] in results:
            slot = by_index[order[next_commit]]
            sample, reason, detail, question = results.pop(slot.index)
            next_commit += 1
            prov = {"model": model, "prompt_version": version, "style": slot.style, "seed": settings.seed,
                    "slot": slot.index, "plan": plan,
                    "passages": [{"doc_id": p.doc_id, "start": p.start, "end": p.end} for p in slot.passages]}
            if sample is not None:
                same = near_duplicate(sample["user_input"], seen_questions, settings.duplicate_threshold)
                if same is not None:
                    sample, reason, detail = None, "duplicate", same
            if sample is None:
                summary.rejected[reason] += 1
                fh_rej.write(json.dumps({"id": slot.id, "question": question, "reason": reason, "detail": detail,
                                         "provenance": prov}, ensure_ascii=False) + "\n")
                fh_rej.flush()
                continue
            seen_questions.append((shingles(sample["user_input"]), slot.id, sample["user_input"]))
            rank = _bm25_rank(bm25, passage_by_id, sample)
            difficulty = "easy" if rank == 1 else "hard" if rank is not None else "unretrieved"
            prov["located"] = sample.pop("located")
            row = {"id": slot.id, **sample, "style": slot.style, "language": slot.language,
                   "difficulty": difficulty, "bm25_rank": rank, "provenance": prov}
            fh_ok.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh_ok.flush()
            summary.accepted += 1
            summary.difficulty[difficulty] += 1
            summary.styles[slot.style] += 1
            summary.languages[slot.language] += 1

    from rankwise.llm.client import EndpointError

    try:
        with open(out, "a", encoding="utf-8") as fh_ok, open(rej_out, "a", encoding="utf-8") as fh_rej, \
                progress("synth", len(slots), quiet=quiet) as advance:
            advance(len(done))

            def show(n: int) -> None:
                cost = cost_now()
                money = f" ${cost:.4f}" if cost is not None else ""
                advance(n, description=f"synth: {summary.accepted} kept, {summary.calls} calls{money}")
                _report(on_progress, summary, cost)
            if todo:
                async with ChatClient(cfg.endpoint, cfg.policy) as client:
                    window = asyncio.Semaphore(max(1, cfg.policy.concurrency))
                    tasks: set[asyncio.Task] = set()

                    errors: list[BaseException] = []

                    def finished(task: asyncio.Task) -> None:
                        tasks.discard(task)
                        window.release()
                        if not task.cancelled() and task.exception() is not None:
                            errors.append(task.exception())  # type: ignore[arg-type]

                    try:
                        for slot in todo:
                            await window.acquire()
                            if errors:
                                window.release()
                                raise errors[0]
                            if max_calls is not None and (summary.calls + (len(tasks) + 1)
                                                          * (1 + int(settings.critic)) > max_calls):
                                window.release()  # like max_cost: the rest stays undone, a rerun goes on
                                summary.stopped = f"max calls reached ({max_calls} calls)"
                                break
                            if max_cost is not None:
                                spent_now = cost_now() or 0.0
                                planned = cfg.prices.cost(
                                    estimate_prompt_tokens(render_slot(slot, prompts, corpus)),
                                    OUTPUT_TOKENS[slot.style]) or 0.0
                                per_call = max(planned, spent_now / summary.calls if summary.calls else 0.0)
                                guess = per_call * (1 + int(settings.critic)) * (len(tasks) + 1)
                                if spent_now + guess > max_cost:
                                    window.release()
                                    summary.stopped = (f"max cost reached (${spent_now:.4f} spent of "
                                                       f"${max_cost:g})")
                                    break
                            task = asyncio.ensure_future(work(client, slot))
                            task.add_done_callback(finished)
                            tasks.add(task)
                            await asyncio.sleep(0)
                            before = next_commit
                            commit(fh_ok, fh_rej)
                            if next_commit > before:
                                show(next_commit - before)
                        while tasks or errors:
                            if errors:
                                raise errors[0]
                            await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
                            await asyncio.sleep(0)  # let the done callbacks run
                            before = next_commit
                            commit(fh_ok, fh_rej)
                            show(next_commit - before)
                    finally:
                        for t in tasks:
                            t.cancel()
                        if tasks:
                            await asyncio.gather(*tasks, return_exceptions=True)
                    before = next_commit
                    commit(fh_ok, fh_rej)
                    show(next_commit - before)
                    summary.requests = client.stats.requests
    except EndpointError as exc:
        raise EndpointError(f"{exc}; the {summary.accepted + sum(summary.rejected.values())} samples decided are in "
                            f"{out} and {rej_out}, every reply had is in the cache ({cfg.cache}): rerun the same "
                            f"command to resume") from None
    finally:
        store.close()
    summary.prompt_tokens, summary.completion_tokens = spent["prompt"], spent["completion"]
    summary.cost = cost_now()
    return summary


def _report(on_progress: Callable | None, summary: SynthSummary, cost: float | None) -> None:
    if on_progress is not None:
        summary.cost = cost
        on_progress(summary)


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
