"""Finding a quoted text in a source document and returning its exact character span.

Three steps, first hit wins: **exact** (``str.find``), **normalised** (Unicode NFKC, curly quotes
and dashes made plain, case folded, every run of whitespace one space; an offset map turns the match
back into a span of the *original* text), and, only when asked, **fuzzy** (rapidfuzz's best
partial-ratio alignment, for imported test sets whose contexts were re-joined by a splitter). The
span returned always satisfies ``text[start:end]`` being the located passage of the original
document.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ["Located", "normalise", "locate", "locate_in"]

_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
                        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
                        "\u00a0": " ", "\u2026": "..."})


@dataclass(frozen=True)
class Located:
    """Where a quote sits: ``start``/``end`` index the original text; ``how`` is exact, normalised
    or fuzzy; ``score`` is 100 unless fuzzy."""

    start: int
    end: int
    how: str
    score: float = 100.0


def normalise(text: str) -> tuple[str, list[int]]:
    """``text`` normalised for matching, and for each of its characters the index in ``text`` it
    came from.

    Example:
        >>> normalise("Caf\\u00e9  \\u201cHi\\u201d")
        ('café "hi"', [0, 1, 2, 3, 4, 6, 7, 8, 9])
    """
    out: list[str] = []
    where: list[int] = []
    space = True  # drop leading whitespace
    for i, ch in enumerate(text):
        piece = unicodedata.normalize("NFKC", ch).translate(_PLAIN).casefold()
        for c in piece:
            if c.isspace():
                if space:
                    continue
                c, space = " ", True
            else:
                space = False
            out.append(c)
            where.append(i)
    while out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), where


def locate(quote: str, text: str, *, fuzzy: float | None = None, window: tuple[int, int] | None = None,
           _norm: tuple[str, list[int]] | None = None) -> Located | None:
    """The span of ``quote`` in ``text`` (exact, then normalised, then fuzzy if ``fuzzy`` is a 0-100
    threshold), searching ``window`` = (start, end) first when given; None when it is not there.

    Example:
        >>> doc = "Kestrel keeps  three\\ncopies of every range."
        >>> locate("three copies", doc)
        Located(start=15, end=27, how='normalised', score=100.0)
        >>> doc[15:27]
        'three\\ncopies'
    """
    quote = quote.strip()
    if not quote:
        return None
    if window is not None:
        a, b = window
        hit = text.find(quote, a, b)
        if hit >= 0:
            return Located(hit, hit + len(quote), "exact")
    hit = text.find(quote)
    if hit >= 0:
        return Located(hit, hit + len(quote), "exact")
    norm_text, where = _norm or normalise(text)
    norm_quote, _ = normalise(quote)
    if not norm_quote:
        return None
    starts = []
    pos = norm_text.find(norm_quote)
    while pos >= 0:
        starts.append(pos)
        pos = norm_text.find(norm_quote, pos + 1)
    if starts:
        if window is not None:
            starts.sort(key=lambda p: not (window[0] <= where[p] < window[1]))
        p = starts[0]
        return Located(where[p], where[p + len(norm_quote) - 1] + 1, "normalised")
    if fuzzy is None or len(norm_quote) < 8:
        return None
    from rapidfuzz import fuzz

    found = fuzz.partial_ratio_alignment(norm_quote, norm_text, score_cutoff=fuzzy)
    if found is None or found.dest_end <= found.dest_start:
        return None
    return Located(where[found.dest_start], where[found.dest_end - 1] + 1, "fuzzy", round(found.score, 2))


def locate_in(quote: str, docs: dict[str, str], *, fuzzy: float | None = None,
              prefer: str | None = None) -> tuple[str, Located] | None:
    """``(doc_id, Located)`` of ``quote`` in the first document (``prefer`` first) that holds it:
    every document is tried exactly, then normalised, and only then fuzzily.

    Example:
        >>> locate_in("beta", {"d1": "alpha", "d2": "alpha beta"})
        ('d2', Located(start=6, end=10, how='exact', score=100.0))
    """
    order = ([prefer] if prefer in docs else []) + [d for d in docs if d != prefer]
    for step in (None, "fuzzy"):
        if step == "fuzzy" and fuzzy is None:
            break
        best: tuple[str, Located] | None = None
        for doc_id in order:
            hit = locate(quote, docs[doc_id], fuzzy=fuzzy if step else None)
            if hit is None:
                continue
            if step is None:
                return doc_id, hit
            if best is None or hit.score > best[1].score:
                best = (doc_id, hit)
        if best is not None:
            return best
    return None
