"""Planting the supporting chunk at each position: the contexts ``rankwise position-curve`` sends.

For every case with a reference answer and a known supporting chunk — the first retrieved chunk the
verdict source judged relevant, else the case's first reference passage text — K-1 non-relevant
chunks are drawn once per (case, repeat): the case's own retrieved chunks judged not relevant first,
then chunks sampled (seeded) from other cases, skipping any that contain one of this case's
reference passages. The supporting chunk is then planted at each position 1..K among the same
fillers, so only its position changes. The answers are scored and turned into accuracy by position
(:func:`~rankwise.analysis.position.position_accuracy`) and a fitted discount.

Example:
    >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
    >>> recs = [
    ...     CaseRecord(
    ...         f"q{i}",
    ...         question="Q?",
    ...         reference="A",
    ...         chunks=[
    ...             ChunkRecord(rank=1, text=f"gold {i}", verdicts={"s": Verdict(1)}),
    ...             ChunkRecord(rank=2, text=f"noise {i}", verdicts={"s": Verdict(0)}),
    ...         ],
    ...     )
    ...     for i in range(3)
    ... ]
    >>> plan = plant_contexts(recs, 3, source="s")
    >>> len(plan.contexts), [c.chunks.index("gold 0") + 1 for c in plan.contexts[:3]]
    (9, [1, 2, 3])
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rankwise._words import count
from rankwise.errors import InputError

__all__ = ["PlantedContext", "PositionPlan", "PositionRun", "plant_contexts", "position_requests",
           "run_position_curve"]


@dataclass(frozen=True)
class PlantedContext:
    """One context: the case, the planted position (1-based), the repeat, the chunk texts in order.
    """

    case_id: str
    position: int
    repeat: int
    chunks: list[str]
    question: str
    reference: str

    @property
    def id(self) -> str:
        return f"{self.case_id}\x1f{self.repeat}\x1f{self.position}"


@dataclass
class PositionPlan:
    """The contexts to send, the cases used, and why the others were skipped (reason -> count)."""

    k: int
    contexts: list[PlantedContext]
    cases: int
    skipped: Counter = field(default_factory=Counter)
    support_from: Counter = field(default_factory=Counter)  # "verdicts" / "reference passage" -> cases
    sampled_fillers: int = 0  # fillers taken from other cases
    repeats: int = 1

    def describe(self) -> str:
        """One line: cases x K x repeats = contexts, the cases skipped and why, where support came
        from."""
        skipped = ", ".join(f"{n} {reason}" for reason, n in self.skipped.items())
        return (f"{count(self.cases, 'case')} x {self.k} positions x {self.repeats} repeat{'s' if self.repeats != 1 else ''}"
                f" = {len(self.contexts)} contexts" + (f" ({skipped} skipped)" if skipped else "")
                + "; supporting chunk from " + ", ".join(f"{why}: {n}" for why, n in self.support_from.items()))


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def plant_contexts(records: Sequence[Any], k: int, *, source: str | None = "containment", repeats: int = 1,
                   seed: int = 0) -> PositionPlan:
    """Contexts of ``k`` chunks with each case's supporting chunk at each position, ``repeats``
    filler draws per case (``len(contexts) = cases x k x repeats``)."""
    if k < 2:
        raise InputError(f"a position curve needs -k 2 or more, got {k}", field="k")
    if repeats < 1:
        raise InputError(f"--repeats must be >= 1, got {repeats}", field="repeats")
    pool: list[tuple[str, str]] = []  # (case id, text) of every chunk and passage
    for r in records:
        for c in r.chunks:
            if c.text:
                pool.append((r.id, c.text))
        for p in r.reference_contexts:
            if p.text:
                pool.append((r.id, p.text))
    plan = PositionPlan(k, [], 0, repeats=repeats)
    for r in records:
        if not r.question:
            plan.skipped["no question"] += 1
            continue
        if not r.reference:
            plan.skipped["no reference answer"] += 1
            continue
        support = None
        if source is not None:
            support = next((c.text for c in r.chunks if c.text and (v := c.verdicts.get(source)) is not None
                            and v.ok and v.verdict == 1), None)
        if support is not None:
            plan.support_from["verdicts"] += 1
        else:
            support = next((p.text for p in r.reference_contexts if p.text), None)
            if support is None:
                plan.skipped["no supporting chunk (none judged relevant, no reference passage text)"] += 1
                continue
            plan.support_from["reference passage"] += 1
        gold = [_norm(p.text) for p in r.reference_contexts if p.text] + [_norm(support)]
        own = [c.text for c in r.chunks if c.text and source is not None
               and (v := c.verdicts.get(source)) is not None and v.ok and v.verdict == 0]
        own = list(dict.fromkeys(t for t in own if t != support))
        plan.cases += 1
        for rep in range(repeats):
            rng = random.Random(_seed(seed, r.id, rep))
            fillers = own[:]
            rng.shuffle(fillers)
            fillers = fillers[: k - 1]
            if len(fillers) < k - 1:
                candidates = [t for cid, t in pool if cid != r.id]
                rng.shuffle(candidates)
                taken = set(fillers)
                for t in candidates:
                    if len(fillers) == k - 1:
                        break
                    nt = _norm(t)
                    if t in taken or any(g and (g in nt or nt in g) for g in gold):
                        continue
                    fillers.append(t)
                    taken.add(t)
                    plan.sampled_fillers += 1
            if len(fillers) < k - 1:
                raise InputError(f"too few non-relevant chunks to fill {k} positions: {len(fillers) + 1} for "
                                 f"case {r.id!r}; use a smaller -k or more cases", field="k")
            for pos in range(1, k + 1):
                chunks = fillers[: pos - 1] + [support] + fillers[pos - 1:]
                plan.contexts.append(PlantedContext(r.id, pos, rep, chunks, r.question, r.reference))
    return plan


def position_requests(plan: PositionPlan, prompt: Any) -> list[Any]:
    """One answer request per planted context (id ``<case>\\x1f<repeat>\\x1f<position>``)."""
    from rankwise.llm.generate import GenRequest

    return [GenRequest(c.id, prompt.render_answer(c.question, c.chunks)) for c in plan.contexts]


@dataclass
class PositionRun:
    """A measured position curve: the plan, the fit, the calls made, and the contexts left unscored.
    """

    plan: PositionPlan
    fit: Any  # PositionFit
    answers: Any  # GenSummary of the answer calls
    checks: Any = None  # GenSummary of the correctness calls (score "llm")
    unscored: int = 0
    score: str = "f1"

    def to_json(self) -> dict[str, Any]:
        """The curve file's content plus the run: calls, cases, K, repeats, score method, unscored.
        """
        from rankwise.data.finite import finite_json

        return finite_json(self.fit.to_json() | {"calls": self.answers.to_dict(), "cases": self.plan.cases,
                                              "k": self.plan.k, "repeats": self.plan.repeats, "score": self.score,
                                              "unscored": self.unscored})


def run_position_curve(plan: PositionPlan, generator: Any, *, score: str = "f1", checker: Any = None,
                       progress: Any = None, check_progress: Any = None) -> PositionRun:
    """Ask ``generator`` every planted context of ``plan``, score the answers against the reference
    (``f1``, ``em``, or ``llm`` with ``checker``), and fit the discounts to accuracy by position.

    Example (offline: the planted contexts and the calls they take; ``run_position_curve(plan, gen)``
    asks them and ``run.fit.best.label()`` names the fitted discount):
        >>> from rankwise.data.records import as_records
        >>> from rankwise.llm.client import Endpoint
        >>> from rankwise.llm.generate import Generator, load_gen_prompt
        >>> records = as_records(
        ...     [
        ...         {
        ...             "id": "q1",
        ...             "question": "What does BM25 rank by?",
        ...             "reference": "Term frequency.",
        ...             "retrieved_contexts": ["BM25 ranks by term frequency."],
        ...             "reference_contexts": ["BM25 ranks by"],
        ...         },
        ...         {
        ...             "id": "q2",
        ...             "question": "What do dense models do?",
        ...             "reference": "Embed text.",
        ...             "retrieved_contexts": ["Dense models embed text."],
        ...             "reference_contexts": ["Dense models embed"],
        ...         },
        ...     ]
        ... )
        >>> plan = plant_contexts(records, 2, source="containment")
        >>> sorted((c.id.split("\x1f")[0], c.position) for c in plan.contexts)
        [('q1', 1), ('q1', 2), ('q2', 1), ('q2', 2)]
        >>> gen = Generator(
        ...     Endpoint("qwen2.5:7b", "http://127.0.0.1:9/v1"), load_gen_prompt("answer")
        ... )
        >>> gen.plan(position_requests(plan, gen.prompt)).calls
        4
    """
    from rankwise.analysis.position import fit_position_curve, position_accuracy
    from rankwise.workflows.answer_run import score_responses

    result = generator.run(position_requests(plan, generator.prompt), progress)
    by_id = {c.id: c for c in plan.contexts}
    items = [(c.id, c.question, c.reference, result.replies[c.id].text) for c in plan.contexts
             if result.replies[c.id].ok]
    scores, checks = score_responses(items, score, checker=checker, progress=check_progress)
    outcomes = [(by_id[i].position, value) for i, (value, _) in scores.items()]
    acc, counts, _ = position_accuracy(outcomes, plan.k)
    return PositionRun(plan, fit_position_curve(acc, counts), result.summary, checks,
                       len(plan.contexts) - len(outcomes), score)
