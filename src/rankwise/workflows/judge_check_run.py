"""``rankwise judge-check`` as one call: sample judged pairs from the systems' pool, have an LLM
judge them (or read a judge's labels), and compare with the human qrels
(:func:`rankwise.analysis.judge_check.judge_check`).

The sample: the pool is the union of each run's top ``depth`` documents per topic; the candidates
are the pool's documents the human qrels judge (grade >= 0). ``topics`` topics are drawn (seeded)
among those with a candidate, and within each topic up to ``per_grade`` documents of every human
grade (stratified, seeded), so rare grades are not drowned by the common ones. Each sampled pair is
sent to the judge as a question-mode prompt (the query and the document's title and text), through
the judge's runner and cache (reruns are free); its grade (``graded``) or verdict becomes the
judge's label. Pairs the judge failed on are counted and left out of the comparison.

With ``judge_labels`` (any qrels file a judge wrote) no model is called: the labels are compared as
    they are.

Example (a planted judge given as labels: it calls every document relevant):
    >>> human = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1, "d": 0}, "q3": {"e": 1, "f": 0}}
    >>> lenient = {q: {d: 1 for d in docs} for q, docs in human.items()}
    >>> runs = {
    ...     "good": {"q1": ["a"], "q2": ["c"], "q3": ["e"]},
    ...     "bad": {"q1": ["b"], "q2": ["d"], "q3": ["f"]},
    ...     "mixed": {"q1": ["a"], "q2": ["d"], "q3": ["f"]},
    ... }
    >>> c = run_judge_check(human, runs, judge_labels=lenient, metric="P@1", resamples=100)
    >>> c.labels.binary_leniency, c.labels.kappa, c.systems.tau
    (0.5, 0.0, None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np

from rankwise.errors import InputError

__all__ = ["JudgeCheckPlan", "sample_pairs", "run_judge_check"]


@dataclass
class JudgeCheckPlan:
    """``dry_run``: the sample drawn and what judging it would take (the judge's plan)."""

    topics: int
    pairs: int
    by_grade: dict[int, int]
    plan: Any = None
    warnings: list[str] = field(default_factory=list)


def sample_pairs(human: Mapping[str, Mapping[str, int]], runs: Mapping[str, Any], *, depth: int = 10,
                 topics: int | None = None, per_grade: int = 3, seed: int = 42) -> dict[str, list[str]]:
    """The (query, doc) pairs to judge: per drawn topic, up to ``per_grade`` pooled, human-judged
    documents of each human grade (see the module doc); ``{topic: [doc, ...]}``, sorted.

    Example:
        >>> human = {"q1": {"a": 2, "b": 1, "c": 1, "z": 0}, "q2": {"x": 1}}
        >>> sample_pairs(
        ...     human, {"s": {"q1": ["a", "b", "c", "y"], "q2": ["w"]}}, per_grade=1, seed=0
        ... )
        {'q1': ['a', 'b']}
    """
    from rankwise.data.load import load_run

    if depth < 1 or per_grade < 1 or (topics is not None and topics < 1):
        bad = "depth" if depth < 1 else "per_grade" if per_grade < 1 else "topics"
        raise InputError(f"{bad} must be >= 1", field=bad)
    loaded = [load_run(r) for r in runs.values()]
    candidates: dict[str, list[str]] = {}
    for q in sorted(human):
        pool = {d for run in loaded for d in run.ranking(q)[:depth]}
        docs = sorted(d for d in pool if d in human[q] and human[q][d] >= 0)
        if docs:
            candidates[q] = docs
    if not candidates:
        raise InputError(f"no document in the runs' top {depth} is judged by the qrels: nothing to sample "
                         "(are they for the same collection?)", field="qrels")
    rng = np.random.default_rng(seed)
    chosen = sorted(candidates)
    if topics is not None and topics < len(chosen):
        chosen = sorted(rng.choice(chosen, size=topics, replace=False).tolist())
    out = {}
    for q in chosen:
        picked = []
        for g in sorted({human[q][d] for d in candidates[q]}):
            docs = [d for d in candidates[q] if human[q][d] == g]
            picked += [docs[i] for i in rng.permutation(len(docs))[:per_grade]]
        out[q] = sorted(picked)
    return out


def _texts(sample: dict[str, list[str]], corpus: Any, queries: Any) -> tuple[dict[str, str], Any]:
    from rankwise.data.corpus import load_corpus, load_queries

    docs = load_corpus(corpus)
    texts = load_queries(queries) if isinstance(queries, (str, PathLike)) else dict(queries)
    for q, ids in sample.items():
        if q not in texts:
            raise InputError(f"query {q!r} of the qrels is not in the queries", source=str(queries), field="id")
        for d in ids:
            if d not in docs:
                raise InputError(f"document {d!r} of the qrels is not in the corpus", source=docs.source, field="id")
    return texts, docs


def _judge_sample(sample: dict[str, list[str]], texts: dict[str, str], docs: Any, config: Any, *, quiet: bool,
                  max_cost: float | None, dry_run: bool) -> tuple[dict[str, dict[str, int]], Any]:
    """The judge's labels of the sampled pairs (grade, or verdict), and its summary (or plan,
    ``dry_run``)."""
    from rankwise.llm.cache import ResponseCache
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import Judge, JudgeCase

    def text(d: Any) -> str:
        return f"{d.title}. {d.text}" if d.title and not d.text.startswith(d.title) else d.text

    cases = [JudgeCase(q, texts[q], [text(docs[d]) for d in ids]) for q, ids in sample.items()]
    with ResponseCache(config.cache) as store:
        judge = Judge.from_config(config, store, max_cost=max_cost)
        if dry_run:
            return {}, judge.plan(cases)
        with progress("judge-check: judging", sum(len(c.chunks) for c in cases), quiet=quiet, transient=True,
                      eta=True) as advance:
            result = judge.run(cases, advance)
    labels: dict[str, dict[str, int]] = {}
    for q, ids in sample.items():
        for d, v in zip(ids, result.verdicts[q], strict=True):
            if v.status == "ok":
                labels.setdefault(q, {})[d] = int(v.grade if v.grade is not None else v.verdict)
    return labels, result.summary


def run_judge_check(qrels: Any, runs: Mapping[str, Any] | Sequence[Any], *, names: Sequence[str] | None = None,
                    judge_labels: Any = None, config: Any = None, corpus: Any = None, queries: Any = None,
                    depth: int = 10, topics: int | None = None, per_grade: int = 3, seed: int = 42,
                    metric: str = "ndcg@10", human_level: int = 1, judge_level: int | None = None,
                    reranked_by: Mapping[str, str] | None = None, judge_qrels_out: str | PathLike | None = None,
                    max_cost: float | None = None, dry_run: bool = False, quiet: bool = True,
                    **analysis: Any) -> Any:
    """Judge a sample of ``qrels``' pairs with the LLM of ``config`` (an
    :class:`~rankwise.llm.config.LLMConfig`; documents from ``corpus``, queries from ``queries``),
    or take ``judge_labels``, and compare with ``qrels`` over ``runs`` (paths, or name -> run);
    returns a :class:`~rankwise.analysis.judge_check.JudgeCheck` (a :class:`JudgeCheckPlan` when
    ``dry_run``). ``judge_qrels_out``: write the judge's labels there (TREC qrels). ``analysis``:
    the other keywords of :func:`~rankwise.analysis.judge_check.judge_check` (``top_k``,
    ``resamples``, ``test``, ``alpha`` ...).
    """
    from rankwise.analysis.compare import system_names
    from rankwise.analysis.judge_check import circularity_warnings, judge_check
    from rankwise.data.load import load_qrels, load_run

    if isinstance(runs, Mapping):
        labels, inputs = list(runs), list(runs.values())
    else:
        inputs = list(runs)
        labels = system_names(inputs, names)
    loaded = {n: load_run(r, name=n) for n, r in zip(labels, inputs, strict=True)}
    tags = {n: r.tag for n, r in loaded.items()}
    human = load_qrels(qrels).to_dict()
    if (judge_labels is None) == (config is None):
        raise InputError("give the judge's labels (--labels) or a judge model (--model), one of them", field="model")
    model = None
    summary = None
    if judge_labels is not None:
        judge = load_qrels(judge_labels).to_dict()
    else:
        if corpus is None or queries is None:
            raise InputError("a judge model needs the documents and the queries (--corpus and --queries, or --beir)",
                             field="corpus")
        model = config.endpoint.model
        sample = sample_pairs(human, loaded, depth=depth, topics=topics, per_grade=per_grade, seed=seed)
        texts, docs = _texts(sample, corpus, queries)
        judge, summary = _judge_sample(sample, texts, docs, config, quiet=quiet, max_cost=max_cost, dry_run=dry_run)
        if dry_run:
            grades: dict[int, int] = {}
            for q, ids in sample.items():
                for d in ids:
                    grades[human[q][d]] = grades.get(human[q][d], 0) + 1
            return JudgeCheckPlan(len(sample), sum(map(len, sample.values())), dict(sorted(grades.items())), summary,
                                  circularity_warnings(model, tags, reranked_by))
        if judge_level is None and config.settings.graded:
            judge_level = config.settings.relevant_from
        if judge_qrels_out is not None:
            _write_labels(judge, judge_qrels_out)
    check = judge_check(human, judge, loaded, metric=metric, human_level=human_level, judge_level=judge_level,
                        seed=seed, judge_model=model, reranked_by=reranked_by, tags=tags, **analysis)
    if summary is not None:
        check.judge = {"model": summary.model, "mode": summary.mode, "scale": summary.scale,
                       "prompt_version": summary.prompt_version, "pairs": summary.chunks, "ok": summary.ok,
                       "cached": summary.cached, "failed": summary.failed, "missing": summary.missing,
                       "requests": summary.requests, "cost": summary.cost, "url": config.endpoint.url}
        if summary.failed or summary.missing:
            check.notes.append(f"{summary.failed + summary.missing} sampled pairs have no judge label (failed or "
                               "missing) and are not compared; rerun to try them again")
    return check


def _write_labels(labels: dict[str, dict[str, int]], path: str | PathLike) -> None:
    from rankwise._atomic import atomic_write

    with atomic_write(path) as fh:
        for q in sorted(labels):
            for d in sorted(labels[q]):
                fh.write(f"{q} 0 {d} {labels[q][d]}\n")
