"""trec_eval 10.0's preference measures (``-m all_prefs`` with ``-R prefs`` or ``-R qrels_prefs``).

A judgement group (JG) is one user's preferences for a query; inside it, each judgement sub-group
(JSG) says that a document with a higher level is preferred to one with a lower level. trec_eval's
``form_prefs_counts.c`` turns the judgements and a ranking into counts, per JG, of the preferences
A > B that the ranking

- fulfils with both retrieved (A above B), or fails with both retrieved (``_ret``);
- fulfils by implication (A retrieved, B not) or fails (B retrieved, A not) (``_imp``);
- leaves open (neither retrieved: counted as possible, never fulfilled).

Each measure below is a ratio of these counts, computed with trec_eval's operations in its order
(``m_prefs_*.c``), so the doubles agree to the last bit. Documents are identified by a "docid rank":
the judged retrieved documents 0.. in rank order (ties broken by docno *ascending* here, unlike the
other measures), then the judged unretrieved ones in docno order. A JG with one sub-group is held as
equivalence classes of equal level; a JG with several is a preference array closed under
transitivity. Definitions: docs/trec-measures.md ("Preference measures").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby

import numpy as np

from rankwise.data.prefs import PrefLine, Prefs
from rankwise.data.run import Run
from rankwise.errors import InputError
from rankwise.metrics._names import PREFS_MEASURES, PREFS_NICKNAMES

__all__ = ["PREFS_NICKNAMES", "MEASURES", "JudgementGroup", "QueryPrefs", "PrefsInput", "form_prefs_counts",
           "prefs_input", "query_summary", "check_measures", "evaluate_prefs", "num_prefs_poss", "num_prefs_ful",
           "num_prefs_ful_ret"]

# trec_eval's measure nicknames (measures.c) and the measures' descriptions live in _names.py (the
# registry reads them without importing this module)


@dataclass
class JudgementGroup:
    """One JG's preferences and its counts (trec_eval's ``JG``).

    ``ecs``: for a single-sub-group JG, ``(level, docid ranks ascending)`` per level, highest level
    first; empty when ``prefs_array`` (a (n, n) bool matrix, ``[i, j]``: i preferred to j) is used
    instead, with ``rel_array`` each document's level in this JG (-1: not judged in it).
    """

    ecs: list[tuple[float, np.ndarray]] = field(default_factory=list)
    last_ec_start: int = 0  # where the last class's ranks begin in the query's ``rank_pool``
    prefs_array: np.ndarray | None = None
    rel_array: np.ndarray | None = None
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    notoccur: int = 0
    num_rel: int = 0
    num_rel_ret: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0


@dataclass
class QueryPrefs:
    """A query's judgement groups, ``num_judged`` (documents in any JG), ``num_judged_ret`` (of
    those, retrieved) and ``counts``: (n, n) uint16, the JGs preferring docid i to docid j.
    ``rank_pool``: the classes' docid ranks of every single-sub-group JG, end to end, as trec_eval
    lays them out in memory (``*_Rnonrel`` may read past a JG's last class into the next JG's)."""

    jgs: list[JudgementGroup]
    num_judged: int
    num_judged_ret: int
    counts: np.ndarray
    rank_pool: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _sorted_ranking(run: Run, qid: str) -> list[str]:
    """The run's documents for ``qid`` as ``form_prefs_counts.c`` ranks them: score descending, ties
    by docno ascending (the other measures break ties descending)."""
    docs = run.ranking(qid)
    if run.scores is None:
        return docs
    i = run.queries.index(qid)
    scores = run.scores[int(run.offsets[i]):int(run.offsets[i + 1])].tolist()
    return [d for _, d in sorted(zip(scores, docs, strict=True), key=lambda sd: (-sd[0], sd[1]))]


def _error(line: PrefLine, source: str, problem: str) -> InputError:
    return InputError(problem, source=source, line=line.line or None, field="rel_level")


def form_prefs_counts(lines: Sequence[PrefLine], ranking: Sequence[str], source: str = "<prefs>") -> QueryPrefs:
    """Count the preferences of one query's judgements fulfilled by ``ranking``
    (``form_prefs_counts.c``).

    Example:
        >>> lines = [
        ...     PrefLine("u", "s", "a", 2.0),
        ...     PrefLine("u", "s", "b", 1.0),
        ...     PrefLine("u", "s", "c", 0.0),
        ... ]
        >>> q = form_prefs_counts(lines, ["b", "a", "x"])
        >>> g = q.jgs[0]
        >>> (g.ful_ret, g.poss_ret, g.ful_imp, g.poss_imp, g.notoccur)
        (0, 1, 2, 2, 0)
    """
    judged = {line.doc_id for line in lines}
    retrieved = [d for d in ranking if d in judged]
    njr = len(retrieved)
    rank = {d: i for i, d in enumerate(retrieved)}
    for d in sorted(judged - set(retrieved)):
        rank[d] = len(rank)
    n = len(rank)
    counts = np.zeros((n, n), dtype=np.uint16)
    ordered = sorted(lines, key=lambda p: (p.jg, p.jsg, -p.level, rank[p.doc_id]))
    jgs, pool = [], []
    for _, group in groupby(ordered, key=lambda p: p.jg):
        entries = list(group)
        if len({p.jsg for p in entries}) > 1:
            jgs.append(_form_jg_pa(entries, rank, n, njr, counts, source))
        else:
            jg = _form_jg_ec(entries, rank, njr, counts, source)
            jg.last_ec_start = sum(len(r) for r in pool) + sum(len(r) for _, r in jg.ecs[:-1])
            pool += [r for _, r in jg.ecs]
            jgs.append(jg)
    rank_pool = np.concatenate(pool) if pool else np.zeros(0, dtype=np.int64)
    return QueryPrefs(jgs, n, njr, counts, rank_pool)


def _form_jg_ec(entries: list[PrefLine], rank: dict[str, int], njr: int, counts: np.ndarray,
                source: str) -> JudgementGroup:
    """One sub-group: equivalence classes by level; every pair of classes gives preferences."""
    jg = JudgementGroup()
    classes = [(level, list(ps)) for level, ps in groupby(entries, key=lambda p: p.level)]
    jg.ecs = [(level, np.array([rank[p.doc_id] for p in ps], dtype=np.int64)) for level, ps in classes]
    for a, (level, r1) in enumerate(jg.ecs):
        ret = int(np.count_nonzero(r1 < njr))
        if level > 0.0:
            jg.num_rel_ret += ret
            jg.num_rel += len(r1)
        else:
            jg.num_nonrel_ret += ret
            jg.num_nonrel += len(r1)
        for b in range(a + 1, len(jg.ecs)):
            r2 = jg.ecs[b][1]
            p1, p2 = r1[:, None], r2[None, :]
            same = np.flatnonzero((p1 == p2).any(axis=0))
            if len(same):
                line = classes[b][1][int(same[0])]
                raise _error(line, source, f"document {line.doc_id!r} has two levels in judgement group "
                                           f"{line.jg!r}, sub-group {line.jsg!r}")
            if len(np.unique(r1)) == len(r1) and len(np.unique(r2)) == len(r2):
                counts[np.ix_(r1, r2)] += np.uint16(1)
            else:  # a document listed twice at one level: each copy counts, as in trec_eval
                i1, i2 = np.broadcast_arrays(p1, p2)
                np.add.at(counts, (i1, i2), np.uint16(1))
            ful = p1 < p2
            jg.ful_ret += int(np.count_nonzero(ful & (p2 < njr)))
            jg.ful_imp += int(np.count_nonzero(ful & (p2 >= njr) & (p1 < njr)))
            jg.notoccur += int(np.count_nonzero(ful & (p1 >= njr)))
            jg.poss_ret += int(np.count_nonzero(~ful & (p1 < njr)))
            jg.poss_imp += int(np.count_nonzero(~ful & (p1 >= njr) & (p2 < njr)))
            jg.notoccur += int(np.count_nonzero(~ful & (p2 >= njr)))
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp
    return jg


def _form_jg_pa(entries: list[PrefLine], rank: dict[str, int], n: int, njr: int, counts: np.ndarray,
                source: str) -> JudgementGroup:
    """Several sub-groups: a preference array, closed under transitivity; it must stay consistent.
    """
    a = np.zeros((n, n), dtype=bool)
    rel = np.full(n, -1.0)
    for i, p in enumerate(entries):
        r = rank[p.doc_id]
        if (rel[r] > 0.0 and p.level == 0.0) or (rel[r] == 0.0 and p.level > 0.0):
            raise _error(p, source, f"document {p.doc_id!r} has both level 0 and a level above 0 in judgement "
                                    f"group {p.jg!r}")
        rel[r] = p.level
        lower = [rank[q.doc_id] for q in entries[i + 1:] if q.jsg == p.jsg and q.level != p.level]
        a[r, lower] = True
    # transitive closure, as trec_eval's repeated products with the diagonal set; only this JG's
    # documents have preferences, so the products run over their rows and columns alone
    idx = np.unique([rank[p.doc_id] for p in entries])
    sub = a[np.ix_(idx, idx)]
    np.fill_diagonal(sub, True)
    base = sub.astype(np.float32)
    closed = sub
    while True:
        step = (base @ closed.astype(np.float32)) > 0
        if np.array_equal(step, closed):
            break
        closed = step
    closed = closed.copy()
    np.fill_diagonal(closed, False)
    a[np.ix_(idx, idx)] = closed
    conflict = np.argwhere(closed & closed.T)
    if len(conflict):
        i, j = (int(idx[x]) for x in conflict[0])
        docs = {v: k for k, v in rank.items()}
        raise _error(entries[0], source, f"preferences conflict in judgement group {entries[0].jg!r}: "
                                         f"{docs[i]!r} and {docs[j]!r} are each preferred to the other")
    jg = JudgementGroup(prefs_array=a, rel_array=rel)
    jg.num_rel_ret = int(np.count_nonzero(rel[:njr] > 0.0))
    jg.num_nonrel_ret = int(np.count_nonzero(rel[:njr] == 0.0))
    jg.num_rel = int(np.count_nonzero(rel > 0.0))
    jg.num_nonrel = int(np.count_nonzero(rel == 0.0))
    counts += a.astype(np.uint16)
    top = a[:njr, :njr]
    jg.ful_ret = int(np.count_nonzero(np.triu(top, 1)))
    jg.poss_ret = int(np.count_nonzero(np.tril(top, -1))) + jg.ful_ret
    jg.ful_imp = int(np.count_nonzero(a[:njr, njr:]))
    jg.poss_imp = int(np.count_nonzero(a[njr:, :njr])) + jg.ful_imp
    jg.notoccur = int(np.count_nonzero(a[njr:, njr:]))
    return jg


@dataclass(frozen=True, eq=False)
class PrefsInput:
    """What the preference measures compute on: per query (``query_ids``, byte order) its counts.

    Built by :func:`prefs_input`; the registry's measures take it where the others take a
    :class:`~rankwise.metrics.matrix.RelevanceMatrix`.
    """

    query_ids: list[str]
    queries: list[QueryPrefs]

    def has(self, what: str) -> bool:
        return what == "prefs"


def prefs_input(prefs: Prefs, run: Run, *, missing: str = "zero", depth: int | None = None
                ) -> tuple[PrefsInput, dict]:
    """Join preference judgements with a run, per query of the judgements (``missing="zero"``: a
    query the run lacks is scored on an empty ranking, trec_eval ``-c``; ``"skip"``: left out); and
    a summary. ``depth`` keeps the top ``depth`` documents of each ranking (trec_eval ``-M``), cut
    after this module's ranking (ties by docno ascending)."""
    in_run = set(run.queries)
    qids = [q for q in prefs.queries if missing == "zero" or q in in_run]
    queries = [form_prefs_counts(prefs.lines(q), _sorted_ranking(run, q)[:depth] if q in in_run else [],
                                 prefs.source)
               for q in qids]
    return PrefsInput(qids, queries), query_summary(prefs.queries, run, missing, len(qids))


def query_summary(judged: list[str], run: Run, missing: str, evaluated: int) -> dict:
    """The query sets' summary, with the keys :func:`~rankwise.metrics.matrix.join` gives."""
    in_run, in_judged = set(run.queries), set(judged)
    absent = [q for q in judged if q not in in_run]
    ignored = [q for q in run.queries if q not in in_judged]
    return {"queries_in_qrels": len(judged), "queries_in_run": run.n_queries, "evaluated": evaluated,
            "missing_from_run": len(absent), "ignored_not_in_qrels": len(ignored), "missing_queries": absent,
            "ignored_queries": ignored, "missing": missing}


# ------------------------------------------------------------------------------------------
# measures
def _div(a: float, b: float) -> float:
    """C's double division where 0/0 is NaN (it then fails ``sum > 0`` and the measure stays 0)."""
    return a / b if b else float("nan")


def _per_query(fn):
    def measure(inp: PrefsInput, k: int | None = None) -> np.ndarray:
        return np.array([fn(q) for q in inp.queries], dtype=np.float64)

    measure.__doc__ = fn.__doc__
    measure.__name__ = fn.__name__
    return measure


def _ful(g: JudgementGroup) -> int:
    return g.ful_ret + g.ful_imp


def _poss(g: JudgementGroup) -> int:
    return g.poss_ret + g.poss_imp + g.notoccur


@_per_query
def num_prefs_poss(q: QueryPrefs) -> float:
    """Preferences possible, retrieved or not: sum over JGs."""
    return float(sum(_poss(g) for g in q.jgs))


@_per_query
def num_prefs_ful(q: QueryPrefs) -> float:
    """Preferences fulfilled, implied ones included."""
    return float(sum(_ful(g) for g in q.jgs))


@_per_query
def num_prefs_ful_ret(q: QueryPrefs) -> float:
    """Preferences fulfilled with both documents retrieved."""
    return float(sum(g.ful_ret for g in q.jgs))


def _simp(ful, poss):
    def fn(q: QueryPrefs) -> float:
        f = sum(ful(g) for g in q.jgs)
        p = sum(poss(g) for g in q.jgs)
        return f / p if p else 0.0

    return fn


def _avgjg(ful, poss):
    def fn(q: QueryPrefs) -> float:
        total = 0.0
        for g in q.jgs:
            p = poss(g)
            if p:
                total += ful(g) / p
        return total / len(q.jgs) if total > 0.0 else 0.0

    return fn


prefs_simp = _per_query(_simp(_ful, _poss))
prefs_simp_ret = _per_query(_simp(lambda g: g.ful_ret, lambda g: g.poss_ret))
prefs_simp_imp = _per_query(_simp(_ful, lambda g: g.poss_ret + g.poss_imp))
prefs_avgjg = _per_query(_avgjg(_ful, _poss))
prefs_avgjg_ret = _per_query(_avgjg(lambda g: g.ful_ret, lambda g: g.poss_ret))
prefs_avgjg_imp = _per_query(_avgjg(_ful, lambda g: g.poss_ret + g.poss_imp))


def _pair(areas: str):
    """Mean over document pairs with a preference of (JGs preferring the higher ranked) / (JGs with
    a preference); ``areas``: which of retrieved-retrieved (r), retrieved-unretrieved (i) and
    unretrieved-unretrieved (n, counted, never fulfilled) enter."""

    def fn(q: QueryPrefs) -> float:
        c, njr = q.counts, q.num_judged_ret
        parts, num_pairs = [], 0
        if "r" in areas:
            up = c[:njr, :njr].astype(np.int64)
            both = up + up.T
            mask = np.triu(both > 0, 1)
            parts.append(up[mask] / both[mask])
        if "i" in areas:
            ahead = c[:njr, njr:].astype(np.int64)
            both = ahead + c[njr:, :njr].T
            mask = both > 0
            parts.append(ahead[mask] / both[mask])
        if "n" in areas:
            rest = c[njr:, njr:] > 0
            num_pairs += int(np.count_nonzero(np.triu(rest | rest.T, 1)))
        values = np.concatenate(parts) if parts else np.zeros(0)
        num_pairs += len(values)
        if not num_pairs:
            return 0.0
        total = float(np.add.accumulate(values)[-1]) if len(values) else 0.0  # left to right, as the C loops
        return total / num_pairs

    return fn


prefs_pair = _per_query(_pair("rin"))
prefs_pair_ret = _per_query(_pair("r"))
prefs_pair_imp = _per_query(_pair("ri"))


def _prefix_below(ranks: np.ndarray, njr: int) -> np.ndarray:
    """The ranks up to the first unretrieved one (trec_eval's ``ptr < end && *ptr <
    num_judged_ret``)."""
    past = np.flatnonzero(ranks >= njr)
    return ranks[: past[0]] if len(past) else ranks


def _recalc_ec(q: QueryPrefs, g: JudgementGroup, keep: int, retrieved_only: bool) -> tuple[int, int]:
    """``recalculate`` of m_prefs_avgjg_Rnonrel(_ret).c, equivalence classes: the "non-relevant"
    class is the ``keep`` ranks from the start of the last class, read on into the next JG's classes
    when the last class is shorter, as trec_eval reads its memory (past the query's last class it
    would read what an earlier query left there; we stop at the end); pairs are counted as trec_eval
    counts them (the last class against its cut too)."""
    njr = q.num_judged_ret
    ful = poss = 0
    ecs = [_prefix_below(r, njr) if retrieved_only else r for _, r in g.ecs]
    last = q.rank_pool[g.last_ec_start:g.last_ec_start + keep]
    if retrieved_only:
        last = _prefix_below(last, njr)

    def count(r1: np.ndarray, r2: np.ndarray) -> None:
        nonlocal ful, poss
        p1, p2 = r1[:, None], r2[None, :]
        f = (p1 < p2) if retrieved_only else (p1 < p2) & (p1 < njr)
        hits = int(np.count_nonzero(f))
        ful += hits
        poss += f.size - hits

    for a in range(len(ecs)):
        for b in range(a + 1, len(ecs) - 1):
            count(ecs[a], ecs[b])
    for a in range(len(ecs)):
        count(ecs[a], last)
    return ful, poss + ful


def _recalc_pa(g: JudgementGroup, njr: int, retrieved_only: bool) -> tuple[int, int]:
    """``recalculate``, preference array: the non-relevant documents past the first ``num_rel`` left
    out."""
    a, rel = g.prefs_array, g.rel_array
    assert a is not None and rel is not None
    n = len(rel)
    scan = rel[:njr] if retrieved_only else rel
    zero = np.flatnonzero(scan == 0.0)
    first_discarded = int(zero[g.num_rel]) if len(zero) > g.num_rel else len(scan)
    keep = ~((np.arange(n) >= first_discarded) & (rel == 0.0))
    kept = a & keep[:, None] & keep[None, :]
    top = kept[:njr, :njr]
    ful = int(np.count_nonzero(np.triu(top, 1)))
    poss = int(np.count_nonzero(np.tril(top, -1)))
    if not retrieved_only:
        ful += int(np.count_nonzero(kept[:njr, njr:]))
        poss += int(np.count_nonzero(kept[njr:, :njr])) + int(np.count_nonzero(kept[njr:, njr:]))
    return ful, poss + ful


def _rnonrel(retrieved_only: bool):
    """Each JG's ratio with its non-relevant documents set to R (added as fulfilled when fewer, the
    first R in rank order kept when more), averaged over JGs."""

    def fn(q: QueryPrefs) -> float:
        total = 0.0
        for g in q.jgs:
            r, n = (g.num_rel_ret, g.num_nonrel_ret) if retrieved_only else (g.num_rel, g.num_nonrel)
            if r >= n:
                if retrieved_only:
                    ful, poss = g.ful_ret, g.poss_ret
                else:
                    ful, poss = _ful(g), _poss(g)
                ful += g.num_rel_ret * (r - n)
                poss += g.num_rel * (r - n)
            elif g.ecs:
                ful, poss = _recalc_ec(q, g, g.num_rel_ret if retrieved_only else g.num_rel, retrieved_only)
            else:
                ful, poss = _recalc_pa(g, q.num_judged_ret, retrieved_only)
            total += _div(ful, poss)
        return total / len(q.jgs) if total > 0.0 else 0.0

    return fn


prefs_avgjg_Rnonrel = _per_query(_rnonrel(False))
prefs_avgjg_Rnonrel_ret = _per_query(_rnonrel(True))

# name -> (function, one-line formula, aggregate): the registry declares a Metric for each
_FUNCTIONS = {
    "prefs_num_prefs_poss": num_prefs_poss, "prefs_num_prefs_ful": num_prefs_ful,
    "prefs_num_prefs_ful_ret": num_prefs_ful_ret, "prefs_simp": prefs_simp, "prefs_pair": prefs_pair,
    "prefs_avgjg": prefs_avgjg, "prefs_avgjg_Rnonrel": prefs_avgjg_Rnonrel, "prefs_simp_ret": prefs_simp_ret,
    "prefs_pair_ret": prefs_pair_ret, "prefs_avgjg_ret": prefs_avgjg_ret,
    "prefs_avgjg_Rnonrel_ret": prefs_avgjg_Rnonrel_ret, "prefs_simp_imp": prefs_simp_imp,
    "prefs_pair_imp": prefs_pair_imp, "prefs_avgjg_imp": prefs_avgjg_imp,
}
MEASURES = {name: (_FUNCTIONS[name], description, aggregate)
            for name, (description, aggregate) in PREFS_MEASURES.items()}


def check_measures(measures: Iterable, need: str, flag: str) -> None:
    """InputError unless every measure computes on ``need`` input (``num_q`` always does)."""
    for m in measures:
        if m.metric.name != "num_q" and need not in m.metric.requires:
            raise InputError(f"{m.name} is not computed from {flag} judgements (with {flag}, ask for "
                             f"{'all_prefs or prefs_*' if need == 'prefs' else 'qrels_jg or *_avgjg'} measures)",
                             field="metric")


def evaluate_prefs(prefs: Prefs, run: Run, metrics: Iterable[str] | str | None = None, *,
                   missing: str = "zero", depth: int | None = None):
    """Evaluate a run against preference judgements (trec_eval ``-R prefs`` / ``-R qrels_prefs``);
    ``missing`` as in :func:`~rankwise.metrics.engine.evaluate`, ``depth`` as trec_eval's ``-M``.

    Example:
        >>> from rankwise.data.prefs import PrefLine, Prefs
        >>> p = Prefs({"q": (PrefLine("u", "s", "a", 2.0), PrefLine("u", "s", "b", 0.0))})
        >>> r = evaluate_prefs(
        ...     p,
        ...     Run.from_dict({"q": {"b": 2.0, "a": 1.0}}),
        ...     ["prefs_simp", "prefs_num_prefs_poss"],
        ... )
        >>> r.mean
        {'prefs_simp': 0.0, 'prefs_num_prefs_poss': 1.0}
    """
    from rankwise.metrics.engine import evaluate_matrix
    from rankwise.metrics.registry import asks_runid, parse_measures

    measures = parse_measures(metrics or ["all_prefs"])
    check_measures(measures, "prefs", "-R prefs")
    if missing not in ("zero", "skip"):
        raise InputError(f"missing must be 'zero' or 'skip', not {missing!r}", field="missing")
    inp, summary = prefs_input(prefs, run, missing=missing, depth=depth)
    if not inp.query_ids:
        raise InputError("no query to evaluate: the run and the preference judgements share no query id",
                         field="query_id")
    result = evaluate_matrix(inp, measures, summary, run.name)  # type: ignore[arg-type]
    if asks_runid(metrics or "all_prefs"):
        result.runid = run.tag or run.name
    return result
