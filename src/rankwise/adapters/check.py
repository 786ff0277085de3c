"""Check an adapter before trusting its numbers: run the retriever twice and report chunk ids that
changed; rerank any retriever's output with a cross-encoder (top n in, top k out)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from rankwise._words import count
from rankwise.adapters.run import AdapterRun, build_retriever, run_retriever
from rankwise.data.ids import text_id
from rankwise.data.records import CaseRecord

__all__ = ["AdapterCheck", "check_adapter", "rerank_records"]


@dataclass
class AdapterCheck:
    """What :func:`check_adapter` found.

    Attributes:
        changed_ids: chunks retrieved at the same rank with the same text but a different id on the
            second run (ids that will not survive a rerun), as ``(case id, rank, first id, second
            id)``.
        changed_order: cases whose ranking (by text) differs between the runs (ties broken by
            insertion order, approximate search: a non-deterministic retriever).
        ``stable``: no id changed; ``deterministic``: no ranking changed.
        first, second: the two :class:`~rankwise.adapters.run.AdapterRun`.
    """

    changed_ids: list[tuple[str, int, str | None, str | None]] = field(default_factory=list)
    changed_order: list[str] = field(default_factory=list)
    first: AdapterRun | None = None
    second: AdapterRun | None = None

    @property
    def stable(self) -> bool:
        """No chunk changed id between the runs."""
        return not self.changed_ids

    @property
    def deterministic(self) -> bool:
        """Every case ranked the same chunks in the same order on both runs."""
        return not self.changed_order

    def lines(self) -> list[str]:
        """A short human-readable report."""
        s = self.first.summary if self.first else {}
        out = [f"retriever: {s.get('retriever')}; {count(s.get('cases') or 0, 'case')}, {count(s.get('chunks') or 0, 'chunk')} per run; "
               f"id rules used: {s.get('id_strategy')}; duplicates in one result list: {s.get('duplicates')}; "
               f"failed queries: {s.get('failed')}"]
        n = sum(len(r.chunks) for r in self.first.records) if self.first else 0
        out.append(f"ids changed between two runs: {len(self.changed_ids)} of {n}")
        for cid, rank, a, b in self.changed_ids[:5]:
            out.append(f"  case {cid} rank {rank}: {a} -> {b}")
        out.append(f"cases ranked differently between two runs: {len(self.changed_order)}"
                   + (f" (e.g. {', '.join(self.changed_order[:5])})" if self.changed_order else ""))
        if self.first:
            out.extend(f"warning: {w}" for w in self.first.warnings)
        out.append("ids are stable across reruns" if self.stable else
                   "ids NOT stable: fix the ids (see the warnings) before comparing runs by id")
        if self.changed_order:
            out.append(f"rankings NOT deterministic: {count(len(self.changed_order), 'case')} ranked differently (ties "
                       "broken by insertion order, approximate search, or a retriever that changes): metrics "
                       "of these cases may move between runs")
        return out


def check_adapter(retriever: Any, testset: Any, k: int | None = None, *, factory: bool = False,
                  **options: Any) -> AdapterCheck:
    """Run ``retriever`` twice over ``testset`` (options as :func:`run_retriever`) and compare chunk
    ids.

    With ``factory``, ``retriever`` is a function of no argument that builds the retriever (index
    and all): it is called once per run, so ids that change when the index is rebuilt (uuid node
    ids) show up.

    Example:
        >>> import uuid
        >>> check_adapter(lambda q: [{"id": str(uuid.uuid4()), "text": "t"}], {"q": "x"},
        ...               id_strategy="id").changed_ids[0][:2]
        ('q', 1)
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = run_retriever(build_retriever(retriever) if factory else retriever, testset, k, **options)
        second = run_retriever(build_retriever(retriever) if factory else retriever, testset, k, **options)
    out = AdapterCheck(first=first, second=second)
    for a, b in zip(first.records, second.records, strict=True):
        texts_a = [text_id(c.text or "") for c in a.chunks]
        texts_b = [text_id(c.text or "") for c in b.chunks]
        if texts_a != texts_b:
            out.changed_order.append(a.id)
        for ca, cb in zip(a.chunks, b.chunks, strict=False):
            if text_id(ca.text or "") == text_id(cb.text or "") and ca.id != cb.id:
                out.changed_ids.append((a.id, ca.rank, ca.id, cb.id))
    return out


def rerank_records(records: list[CaseRecord] | AdapterRun, scorer: Any, *, top_n: int = 10, keep: int = 5,
                   **model_kwargs: Any) -> list[CaseRecord]:
    """Rerank each case's top ``top_n`` chunks by ``scorer`` (a cross-encoder name/folder or a
    callable ``(query, text) -> float``) and keep the best ``keep``; chunk scores become the
    reranker's.

    The input is left as it is; verdicts and scores of the copies are cleared (score them anew).

    Example:
        >>> from rankwise.data.records import ChunkRecord
        >>> r = CaseRecord(
        ...     "q",
        ...     question="?",
        ...     chunks=[
        ...         ChunkRecord(rank=1, id="a", text="x"),
        ...         ChunkRecord(rank=2, id="b", text="xxx"),
        ...     ],
        ... )
        >>> [c.id for c in rerank_records([r], lambda q, t: len(t), top_n=2, keep=1)[0].chunks]
        ['b']
    """
    from rankwise.retrieval.reranking import checked_scores, make_scorer

    if isinstance(records, AdapterRun):
        records = records.records
    from rankwise.errors import InputError

    if keep < 1 or top_n < 1 or keep > top_n:
        raise InputError(f"need 1 <= keep <= top_n, got keep {keep}, top_n {top_n}", field="keep")
    scorer = make_scorer(scorer, **model_kwargs)
    out = []
    for rec in records:
        new = copy.deepcopy(rec)
        head = new.chunks[:top_n]
        scores = checked_scores(scorer, [(rec.question or "", c.text or "") for c in head]) if head else []
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))[:keep]
        new.chunks = []
        for rank, i in enumerate(order, start=1):
            c = copy.deepcopy(head[i])
            c.rank, c.score, c.verdicts = rank, scores[i], {}
            new.chunks.append(c)
        new.passages_found, new.scores, new.status = {}, {}, {}
        info = new.extra.get("retrieval")
        if isinstance(info, dict) and isinstance(info.get("items"), list):
            info["items"] = [info["items"][i] for i in order if i < len(info["items"])]
            info["reranked"] = {"top_n": top_n, "keep": keep, "from_ranks": [i + 1 for i in order]}
        out.append(new)
    return out
