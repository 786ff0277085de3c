"""The LLM judge's entry point over a test set: what ``rankwise judge`` does, callable from Python.

One call checks the outputs before any paid call, picks this worker's shard, plans (``dry_run``),
sends the calls online or through the provider's Batch API, and writes the records with Ctrl-C and
SIGTERM held off — also when the run was interrupted or stopped, so a rerun of the same call resumes
from the cache. The command line only parses its options, calls :func:`judge_testset` and prints the
lines of the :class:`JudgeRun` it returns.

With an endpoint up, ``judge_testset("testset.jsonl", cfg, records_out="judged.jsonl",
shard="1/4")`` judges this worker's quarter of the cases and writes them; ``run.result.summary.ok``
counts the verdicts. The example of :func:`judge_testset` plans such a run offline (``dry_run``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import InputError, JudgeInterrupted, RankwiseError
from rankwise.llm.config import LLMConfig

__all__ = ["JudgeRun", "judge_testset"]


@dataclass
class JudgeRun:
    """What :func:`judge_testset` did: the plan (``dry_run``), the Batch-API plan or report, the
    result (verdicts and summary), the records written and where."""

    records: list[Any]
    records_out: str | None
    source: str
    url: str
    cache_path: str
    plan: Any = None
    batch_plan: Any = None
    batch_report: Any = None
    result: Any = None
    cached: int = 0
    lines: list[str] = field(default_factory=list)


def _check_outputs(testset: Any, config: LLMConfig, records_out: Any, inputs: Sequence[Any], *, dry_run: bool,
                   force: bool) -> None:
    from rankwise._outputs import check_outputs

    inputs = [testset if isinstance(testset, (str, PathLike)) else None, *inputs]
    check_outputs({"--records": None if dry_run else records_out}, inputs, force=force)
    check_outputs({"--cache": config.cache}, [*inputs, records_out], force=True)  # read and written
    if records_out:  # before any paid call: the folder must take the file
        folder = Path(records_out).resolve().parent
        if Path(records_out).is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            raise InputError("cannot write the records here (a folder, or a folder that does not exist or is "
                             "not writable)", source=str(records_out), field="records")


def _records(testset: Any, shard: str | None) -> list[Any]:
    from rankwise.relevance.llm_judge import load_for_judging

    records = load_for_judging(testset)
    if shard is not None:  # '' is an error, not "no shard"
        from rankwise.llm.shard import in_shard, parse_shard

        records = [r for r in records if in_shard(r.id, *parse_shard(shard))]
    return records


def judge_testset(testset: Any, config: LLMConfig, *, records_out: str | PathLike | None = None,
                  source: str = "llm", shard: str | None = None, batch_api: Any = None,
                  max_cost: float | None = None, dry_run: bool = False, force: bool = False,
                  inputs: Sequence[Any] = (), quiet: bool = True,
                  on_status: Callable[[str], None] | None = None) -> JudgeRun:
    """Judge every retrieved chunk of ``testset`` (a test set or records file, or loaded records)
    with the LLM of ``config`` (one :class:`~rankwise.llm.config.LLMConfig`, passed whole), and
    write the records.

    ``records_out``: where the records go (needed unless ``dry_run``; never an input, never another
    program's file unless ``force``); ``shard``: ``"I/N"``, this worker's share of the cases by id;
    ``batch_api``: a :class:`~rankwise.llm.batch_api.BatchSettings` to send the calls through the
    provider's Batch API (resumable; what fails there is retried online); ``max_cost``: no call is
    started once the run has spent this much (online calls only); ``dry_run``: plan and price, call
    nothing; ``inputs``: other files read (the config, a prompt file), which no output may replace;
    ``quiet``: no progress bar.

    Raises :class:`~rankwise.errors.JudgeInterrupted` (``result``: the :class:`JudgeRun`) on
    Ctrl-C/SIGTERM and :class:`~rankwise.relevance.llm_judge.JudgeStopped` when the endpoint or the
    cache fails, each after writing the records had (a ``JudgeStopped`` with verdicts carries the
    :class:`JudgeRun` as ``run``).

    Example (``dry_run``: the plan and its price, nothing called; without it the same call judges):
        >>> import os, shutil, tempfile
        >>> from rankwise.llm.config import resolve_llm_config
        >>> tmp = tempfile.mkdtemp()
        >>> cfg = resolve_llm_config(
        ...     model="gpt-4o-mini",
        ...     base_url="http://127.0.0.1:9/v1",
        ...     mode="question",
        ...     price_in=0.15,
        ...     price_out=0.6,
        ...     cache=os.path.join(tmp, "judge.sqlite"),
        ...     env={},
        ... )
        >>> cases = [
        ...     {
        ...         "id": "q1",
        ...         "question": "What is BM25?",
        ...         "retrieved_contexts": [
        ...             "BM25 ranks documents by term frequency.",
        ...             "Paris is in France.",
        ...         ],
        ...     }
        ... ]
        >>> run = judge_testset(cases, cfg, dry_run=True)
        >>> run.plan.cases, run.plan.chunks, run.plan.calls, run.plan.cached, run.plan.cost > 0
        (1, 2, 2, 0, True)
        >>> shutil.rmtree(tmp)
    """
    from rankwise.llm.cache import ResponseCache
    from rankwise.relevance.llm_judge import Judge, cases_from_records

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the verdicts go), or --dry-run", field="records")
    if batch_api is not None and max_cost is not None:
        raise InputError("--max-cost caps online calls; a --batch-api job is priced before it is sent: "
                         "check it with --dry-run", field="max-cost")
    _check_outputs(testset, config, records_out, inputs, dry_run=dry_run, force=force)
    records = _records(testset, shard)
    cases = cases_from_records(records)
    cache = ResponseCache(config.cache)
    run = JudgeRun(records, None if records_out is None else str(records_out), source, config.endpoint.url,
                   str(cache.path))
    try:
        judge = Judge.from_config(config, cache, max_cost=max_cost)
        judge.check(cases, source=testset if isinstance(testset, (str, PathLike)) else None)
        if dry_run:
            run.plan = judge.plan(cases)
            if batch_api is not None:
                from rankwise.llm.batch_api import plan_batches

                run.batch_plan = plan_batches(judge, cases, batch_api)
            return run
        if batch_api is not None:
            _batch_route(judge, cases, batch_api, run, quiet=quiet, on_status=on_status)
        _online(judge, cases, run, quiet=quiet)
        run.cached = len(cache)
        return run
    finally:
        cache.close()


def _batch_route(judge: Any, cases: list, settings: Any, run: JudgeRun, *, quiet: bool,
                 on_status: Callable[[str], None] | None) -> None:
    from rankwise.llm.batch_api import run_batch_job
    from rankwise.progress import progress

    try:
        with progress("batch API", None, quiet=quiet, transient=True) as advance:
            seen = [0]

            def batch_progress(done, batches, ended, requests):
                advance(ended - seen[0], description=f"batch API: {done}/{batches} batches done, "
                                                     f"{ended}/{requests} requests")
                seen[0] = ended

            run.batch_report = run_batch_job(judge, cases, settings=settings, on_progress=batch_progress,
                                             on_status=on_status or (lambda m: None))
    except KeyboardInterrupt:
        raise JudgeInterrupted(run, f"interrupted; the batch ids are kept in the cache ({run.cache_path}): rerun "
                                    "the same command to resume polling") from None


def _online(judge: Any, cases: list, run: JudgeRun, *, quiet: bool) -> None:
    """The calls not answered yet (by the cache or the Batch API), online; the records written
    after."""
    from rankwise.llm.cache import CacheWriteError
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import JudgeStopped

    total = sum(len(c.chunks) for c in cases)
    try:
        with progress("judging", total, quiet=quiet, transient=True, eta=True) as advance:
            run.result = judge.run(cases, advance)
    except JudgeInterrupted as exc:
        _save(judge, run, exc.result)
        raise JudgeInterrupted(
            run, f"interrupted; the {exc.result.summary.ok} verdicts had are in {run.records_out} and the cache "
                 f"({run.cache_path}, {len(judge.cache)} verdicts): rerun the same command to resume") from None
    except JudgeStopped as exc:
        if exc.result.summary.ok:
            _save(judge, run, exc.result)
            where = "" if isinstance(exc.cause, CacheWriteError) else f" and the cache ({run.cache_path})"
            stopped = JudgeStopped(f"{exc}; the {exc.result.summary.ok} verdicts had are in {run.records_out}"
                                   f"{where}: rerun the same command to resume", exc.result)
            stopped.run = run  # type: ignore[attr-defined]  (what was had, for the caller to report)
            raise stopped from None
        raise
    _save(judge, run, run.result)


def _save(judge: Any, run: JudgeRun, result: Any) -> None:
    """Verdicts into the records, the records to disk with Ctrl-C and SIGTERM held off meanwhile."""
    from rankwise._signals import signals_held
    from rankwise.data.records import write_records
    from rankwise.relevance.llm_judge import attach_verdicts

    run.result = result
    attach_verdicts(run.records, result, judge, run.source)
    try:
        with signals_held():
            write_records(run.records, run.records_out)
    except OSError as exc:
        raise RankwiseError(f"cannot write the records {run.records_out}: {exc.strerror or exc}; the "
                            f"{result.summary.ok} verdicts had are in the cache ({run.cache_path}): rerun the "
                            f"same command with another --records") from None
