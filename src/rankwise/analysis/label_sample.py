"""Which cases to label for PPI (docs/ppi.md): a seeded random sample, stratified by the judge's
verdicts.

The sampling unit is a question: a PPI labelled case needs a human verdict on every chunk of its
list, and a paired comparison needs the same question labelled in every system. Questions are
grouped into strata by the judge's case verdict in every system (``hit``: some chunk judged
relevant, ``miss``, ``incomplete``), and each stratum gives its share of the sample (proportional
allocation, largest remainders). Every question thus has (nearly) the same chance of being drawn,
which the PPI formulas assume, while the sample cannot by chance miss the rare judge verdicts.

The labelling sheet is a CSV with one row per (system, question, rank): ``system, query_id, rank,
chunk_id, question, chunk_text`` to read and ``verdict, type, reason, annotator`` to fill; the
human-label reader (:func:`rankwise.relevance.human.read_labels`) takes it back as it is.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise._atomic import atomic_write
from rankwise.errors import InputError

__all__ = ["case_stratum", "sample_cases", "label_sheet_rows", "write_label_sheet", "SHEET_COLUMNS"]

SHEET_COLUMNS = ("system", "query_id", "rank", "chunk_id", "question", "chunk_text", "verdict", "type", "reason",
                 "annotator")


def case_stratum(record: Any, judge: str) -> str:
    """The judge's verdict on a whole case: ``hit``, ``miss``, ``incomplete`` (a failed/missing
    verdict) or ``empty`` (no chunk).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> case_stratum(
        ...     CaseRecord(
        ...         "q",
        ...         chunks=[
        ...             ChunkRecord(rank=1, verdicts={"llm": Verdict(0)}),
        ...             ChunkRecord(rank=2, verdicts={"llm": Verdict(1)}),
        ...         ],
        ...     ),
        ...     "llm",
        ... )
        'hit'
    """
    verdicts = record.verdicts(judge)
    if not verdicts:
        return "empty"
    if any(v is None for v in verdicts):
        return "incomplete"
    return "hit" if any(v and v > 0 for v in verdicts) else "miss"


def sample_cases(sets: Mapping[str, Sequence[Any]], n: int, *, judge: str = "llm", seed: int = 0) -> list[str]:
    """``n`` question ids drawn at random (seeded), stratified by the judge's case verdict in every
    system.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> recs = [
        ...     CaseRecord(f"q{i}", chunks=[ChunkRecord(rank=1, verdicts={"llm": Verdict(i % 2)})])
        ...     for i in range(10)
        ... ]
        >>> picked = sample_cases({"a": recs}, 4, seed=1)
        >>> (
        ...     len(picked),
        ...     sum(int(q[1:]) % 2 for q in picked),
        ...     picked == sample_cases({"a": recs}, 4, seed=1),
        ... )
        (4, 2, True)
    """
    systems = list(sets)
    if not systems:
        raise InputError("no records to sample from")
    by_sys = {s: {r.id: r for r in recs} for s, recs in sets.items()}
    ids = sorted(set().union(*(set(d) for d in by_sys.values())), key=lambda q: q.encode("utf-8"))
    if not 1 <= n <= len(ids):
        raise InputError(f"the sample size must be between 1 and the {len(ids)} questions, got {n}", field="n")
    strata: dict[tuple, list[str]] = {}
    for q in ids:
        key = tuple(case_stratum(by_sys[s][q], judge) if q in by_sys[s] else "absent" for s in systems)
        strata.setdefault(key, []).append(q)
    keys = sorted(strata)
    exact = np.array([n * len(strata[key]) / len(ids) for key in keys])
    take = np.floor(exact).astype(int)
    order = np.argsort(-(exact - take), kind="stable")
    take[order[: n - int(take.sum())]] += 1
    rng = np.random.default_rng(seed)
    picked: list[str] = []
    for key, count in zip(keys, take, strict=True):
        members = strata[key]
        picked += [members[i] for i in sorted(rng.choice(len(members), size=int(count), replace=False))]
    return sorted(picked, key=lambda q: q.encode("utf-8"))


def label_sheet_rows(sets: Mapping[str, Sequence[Any]], case_ids: Sequence[str], *,
                     fill_from: str | None = None) -> list[dict[str, Any]]:
    """One row per (system, question, rank) of the chosen questions, verdict columns empty.

    ``fill_from`` copies that source's stored verdicts into ``verdict`` (for simulations and worked
    examples; a sheet a person will label must stay empty: a pre-filled verdict anchors the
    labeller).
    """
    wanted = set(case_ids)
    rows = []
    for system, recs in sets.items():
        for r in recs:
            if r.id not in wanted:
                continue
            for c in r.chunks:
                verdict = ""
                if fill_from is not None:
                    v = c.verdicts.get(fill_from)
                    if v is None or v.status != "ok" or v.verdict is None:
                        raise InputError(f"question {r.id!r} rank {c.rank} of {system} has no {fill_from!r} verdict "
                                         "to fill the sheet from", field="fill-from")
                    verdict = int(v.verdict > 0)
                rows.append({"system": system, "query_id": r.id, "rank": c.rank, "chunk_id": c.id or "",
                             "question": r.question or "", "chunk_text": c.text or "", "verdict": verdict,
                             "type": "", "reason": "", "annotator": ""})
    return rows


def write_label_sheet(rows: Sequence[Mapping[str, Any]], path: str | PathLike) -> Path:
    """Write the labelling sheet as CSV (UTF-8, header :data:`SHEET_COLUMNS`)."""
    path = Path(path)
    with atomic_write(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(SHEET_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path
