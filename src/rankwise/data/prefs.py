"""trec_eval's other judgement formats: preferences (``-R prefs``), qrels read as preferences
(``-R qrels_prefs``), qrels with judgement groups (``-R qrels_jg``), and the z-score table (``-Z``).

Every reader follows the TREC readers' rules (data/trec.py): UTF-8 text, a leading byte-order mark
dropped, LF/CRLF/CR line ends, fields split on runs of ASCII whitespace, a line whose first field
starts with ``#`` is a comment (trec_eval 10 skips lines starting with ``#``; a ``#`` inside a docno
is text), blank lines skipped. A malformed line is an :class:`~rankwise.errors.InputError` naming
the file, the line and the field. Formats (trec_eval 10.0's ``get_prefs.c``, ``get_qrels_prefs.c``,
``get_qrels_jg.c``, ``get_zscores.c``; docs/trec-measures.md):

- prefs: ``qid jg jsg docno rel_level``: query, judgement group (one user's information need),
  judgement sub-group, document, a level (a number; within a sub-group a higher level is preferred,
  0 means non-relevant).
- qrels_prefs: ``qid jg docno rel``: ordinary qrels, the second column the judgement group, each
  group one sub-group.
- qrels_jg: ``qid jg docno rel``: qrels whose second column is a judgement group (several
  assessors for one topic); ``rel`` an integer.
- zscores: ``qid measure mean std_dev``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rankwise.data.text import normalize_lines, parse_float, parse_int, read_bytes
from rankwise.data.trec import _iter_fields
from rankwise.errors import InputError

__all__ = ["PrefLine", "Prefs", "QrelsJG", "ZScores", "read_prefs", "read_qrels_prefs", "read_qrels_jg",
           "read_zscores"]


@dataclass(frozen=True)
class PrefLine:
    """One preference judgement: judgement group, sub-group, docno, level, and its line in the file.
    """

    jg: str
    jsg: str
    doc_id: str
    level: float
    line: int = 0


@dataclass(frozen=True)
class Prefs:
    """Preference judgements per query (query ids in byte order, as trec_eval sorts them).

    Example:
        >>> p = Prefs({"q1": (PrefLine("u1", "s1", "a", 2.0), PrefLine("u1", "s1", "b", 0.0))})
        >>> p.queries, len(p.lines("q1"))
        (['q1'], 2)
    """

    by_query: dict[str, tuple[PrefLine, ...]]
    source: str = "<prefs>"

    @property
    def queries(self) -> list[str]:
        return sorted(self.by_query)

    def lines(self, query_id: str) -> tuple[PrefLine, ...]:
        return self.by_query[query_id]


@dataclass(frozen=True)
class QrelsJG:
    """Judgements per query and judgement group: ``{qid: {jg: {docno: grade}}}``.

    Example:
        >>> j = QrelsJG({"q1": {"0": {"a": 1}, "1": {"a": 0, "b": 2}}})
        >>> j.queries, j.groups("q1")
        (['q1'], ['0', '1'])
    """

    by_query: dict[str, dict[str, dict[str, int]]]
    source: str = "<qrels_jg>"

    @property
    def queries(self) -> list[str]:
        return sorted(self.by_query)

    def groups(self, query_id: str) -> list[str]:
        return sorted(self.by_query[query_id])


@dataclass(frozen=True)
class ZScores:
    """Per query and trec_eval measure name, the ``(mean, std_dev)`` that ``-Z`` normalises with.

    Example:
        >>> ZScores({("301", "map"): (0.25, 0.5)}).get("301", "map")
        (0.25, 0.5)
    """

    table: dict[tuple[str, str], tuple[float, float]]
    source: str = "<zscores>"

    @property
    def queries(self) -> set[str]:
        return {q for q, _ in self.table}

    def get(self, query_id: str, measure: str) -> tuple[float, float] | None:
        return self.table.get((query_id, measure))


_PREFS_FIELDS = ["query_id", "jg", "jsg", "doc_id", "rel_level"]
_QRELS_JG_FIELDS = ["query_id", "jg", "doc_id", "relevance"]
_ZSCORE_FIELDS = ["query_id", "measure", "mean", "std_dev"]


def _rows(path: Path, names: list[str]):
    """``(line, fields)`` of the file's data lines; exactly ``len(names)`` fields each, else an
    error."""
    data = normalize_lines(read_bytes(path), path)
    seen = False
    for number, fields in _iter_fields(data):
        if len(fields) != len(names):
            field = names[len(fields)] if len(fields) < len(names) else "(extra)"
            raise InputError(f"expected {len(names)} fields ({' '.join(names)}), got {len(fields)}",
                             source=path, line=number, field=field)
        seen = True
        yield number, fields
    if not seen:
        raise InputError("no judgement lines (only comments or blank lines)", source=path)


def read_prefs(path: str | Path) -> Prefs:
    """Read a trec_eval prefs file: ``qid jg jsg docno rel_level`` (``-R prefs``).

    Example:
        >>> prefs = read_prefs("prefs.test")  # doctest: +SKIP
    """
    path = Path(path)
    by_query: dict[str, list[PrefLine]] = defaultdict(list)
    for number, (qid, jg, jsg, doc, level) in _rows(path, _PREFS_FIELDS):
        value = parse_float(level, source=path, line=number, field="rel_level")
        by_query[qid].append(PrefLine(jg, jsg, doc, value, number))
    return Prefs({q: tuple(v) for q, v in by_query.items()}, str(path))


def read_qrels_prefs(path: str | Path) -> Prefs:
    """Read qrels as preferences (``-R qrels_prefs``): ``qid jg docno rel``; each judgement group is
    one sub-group, so every more relevant document is preferred to every less relevant one.

    Example:
        >>> prefs = read_qrels_prefs("qrels.test")  # doctest: +SKIP
    """
    path = Path(path)
    by_query: dict[str, list[PrefLine]] = defaultdict(list)
    for number, (qid, jg, doc, rel) in _rows(path, _QRELS_JG_FIELDS):
        value = parse_float(rel, source=path, line=number, field="relevance")
        by_query[qid].append(PrefLine(jg, "0", doc, value, number))
    return Prefs({q: tuple(v) for q, v in by_query.items()}, str(path))


def read_qrels_jg(path: str | Path) -> QrelsJG:
    """Read qrels with judgement groups (``-R qrels_jg``): ``qid jg docno rel``, ``rel`` an integer.

    A docno judged twice in one group of a query is an error, as in trec_eval.

    Example:
        >>> qrels = read_qrels_jg("qrels.123")  # doctest: +SKIP
    """
    path = Path(path)
    by_query: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for number, (qid, jg, doc, rel) in _rows(path, _QRELS_JG_FIELDS):
        grade = parse_int(rel, source=path, line=number, field="relevance")
        group = by_query[qid][jg]
        if doc in group:
            raise InputError(f"document {doc!r} judged twice for query {qid!r} in judgement group {jg!r}",
                             source=path, line=number, field="doc_id")
        group[doc] = grade
    return QrelsJG({q: dict(g) for q, g in by_query.items()}, str(path))


def read_zscores(path: str | Path) -> ZScores:
    """Read a trec_eval z-score table (``-Z``): ``qid measure mean std_dev``.

    Example:
        >>> z = read_zscores("zscores_file")  # doctest: +SKIP
    """
    path = Path(path)
    table: dict[tuple[str, str], tuple[float, float]] = {}
    for number, (qid, measure, mean, std) in _rows(path, _ZSCORE_FIELDS):
        key = (qid, measure)
        if key in table:
            raise InputError(f"measure {measure!r} given twice for query {qid!r}", source=path, line=number,
                             field="measure")
        table[key] = (parse_float(mean, source=path, line=number, field="mean"),
                      parse_float(std, source=path, line=number, field="std_dev"))
    return ZScores(table, str(path))
