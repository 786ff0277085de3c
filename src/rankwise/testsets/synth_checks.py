"""The checks a synthesised sample must pass (quotes found, not given away, language, paraphrase
overlap, near-duplicates), each rejection counted by reason (:data:`REASONS`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from rankwise.data.corpus import Corpus
from rankwise.data.locate import locate, normalise
from rankwise.llm.prompts import NEUTRAL_LT
from rankwise.testsets.language import detect_language
from rankwise.testsets.synth_plan import TWO_PASSAGES, Slot, SynthSettings

__all__ = ["REASONS", "ASKED_AGAIN", "lexical_overlap", "shingles", "jaccard", "check_reply", "unusable_reply",
           "unusable_critic", "reply_question", "near_duplicate"]


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


#: rejections that decided nothing (no usable reply): not cached, and asked again by a rerun, as the
#: judge asks its failures again
ASKED_AGAIN = frozenset({"call_failed", "bad_reply", "refused"})


def lexical_overlap(question: str, passage: str) -> float:
    """Share of the question's content words (stemmed, stopwords out) that occur in the passage.

    Example:
        >>> lexical_overlap(
        ...     "How many copies are kept?", "Kestrel keeps three copies of each range."
        ... )
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
    if slot.style in TWO_PASSAGES and len(used) < 2:
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
    """``(reason, detail)`` when a generation reply is no answer -- a refusal (``refused``) or not
    the JSON asked for (``bad_reply``: no object, question or answer not text, quotes not a list of
    texts or ``{passage, text}`` objects, a conversational sample without its earlier turn) -- else
    None (an answer, ``{"question": null}`` included). Such a reply is not cached and decides
    nothing: a rerun asks again (:data:`ASKED_AGAIN`), as the judge asks its failures again.

    Example:
        >>> (
        ...     unusable_reply("I'm sorry, but I can't help with that.")[0],
        ...     unusable_reply('{"question": null}'),
        ... )
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
    """``("bad_reply", detail)`` when a critic reply holds no numeric score (or is a refusal), else
    None: not cached, asked again by a rerun.

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
        >>> (
        ...     reply_question('{"question": "How many copies?", "answer": "3"}'),
        ...     reply_question("not json"),
        ... )
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
    """Why ``question`` is a near-duplicate of an accepted one (``seen``: shingles, id, question),
    else None.

    Example:
        >>> seen = [
        ...     (
        ...         shingles("How many copies does Kestrel keep?"),
        ...         "s1",
        ...         "How many copies does Kestrel keep?",
        ...     )
        ... ]
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
    """Spans sorted (by hop first, when they carry one), duplicates and overlaps of one hop merged
    (text re-cut from the merged span's pieces)."""
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
