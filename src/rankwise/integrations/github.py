"""The GitHub Action's gate: ``python -m rankwise.integrations.github --baseline B --candidate C
...``.

It runs :func:`rankwise.gate`, writes a Markdown summary (table with significance marks, the queries
that lost most) to ``$GITHUB_STEP_SUMMARY``, the HTML report to ``--html`` (the full comparison
report when both sides are runs or RAG records; the gate's table otherwise) and ``passed``,
``exit-code``, ``failed`` and ``report`` to ``$GITHUB_OUTPUT``. Exit codes as ``rankwise gate``: 1
on a regression, 0 otherwise, 2 on bad input (the summary then says what was wrong). ``action.yml``
at the repository's root calls it.

Example:
    >>> split_list(["ndcg@10,recall@100", "P@5"]), split_list(["ndcg@10=0.4 recall@5=0.6"])
    (['ndcg@10', 'recall@100', 'P@5'], ['ndcg@10=0.4', 'recall@5=0.6'])
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._atomic import atomic_write_text
from rankwise.analysis.gate import GateResult, gate, parse_floors
from rankwise.errors import InputError, RankwiseError

__all__ = ["github_gate", "split_list", "main", "parser"]

#: the library's parameter names -> this script's flags (and the action's inputs), for error
#: messages
FLAGS = {"baseline": "--baseline", "candidate": "--candidate", "qrels": "--qrels", "metric": "--metrics",
         "metrics": "--metrics", "floors": "--floors", "alpha": "--alpha", "max_drop": "--max-drop",
         "relevance": "--relevance", "labels": "--labels", "allow_query_mismatch": "--allow-query-mismatch",
         "correction": "--correction"}


def split_list(values: Iterable[str]) -> list[str]:
    """Items given repeated, comma- or whitespace-separated (as an action input spells a list)."""
    return [item for value in values for item in re.split(r"[,\s]+", value or "") if item]


def _append(path: str | PathLike | None, text: str) -> None:
    """Append to the runner's file (its own: appended, not replaced), the signals deferred
    meanwhile."""
    if path:
        from rankwise._signals import signals_deferred

        with signals_deferred(), open(path, "a", encoding="utf-8") as fh:
            fh.write(text)


def _html_report(path: Path, result: GateResult, baseline: Any, candidate: Any, *, qrels: Any,
                 relevance: str | None, labels: Any, metrics: list[str]) -> None:
    """The comparison report when both sides are runs (with qrels) or RAG records; else the gate's
    page."""
    from rankwise.analysis.sides import input_kind

    notes = [("gate passed" if result.passed else "gate FAILED: " + ", ".join(c.metric for c in result.failed))]
    sides = (baseline, candidate)
    names = ["baseline", "candidate"]
    title = f"rankwise gate: {Path(str(candidate)).name} vs {Path(str(baseline)).name}"
    kinds = {input_kind(x, relevance=relevance).kind for x in sides}
    if "saved" not in kinds:
        from rankwise.report.html import write_html_report

        if "rag" in kinds:
            from rankwise.analysis.compare import compare_records, load_record_sets

            source = relevance or "containment"
            sets = load_record_sets(list(sides), names, source=source, labels=labels)
            cmp = compare_records(sets, source, metrics, correction="none", alpha=result.alpha)
            write_html_report(path, cmp, records=sets, title=title, notes=notes)
            return
        if qrels is not None:
            from rankwise.analysis.compare import compare
            from rankwise.data.load import load_qrels, load_run

            judged = load_qrels(qrels)
            runs = [load_run(x, name=n) for x, n in zip(sides, names, strict=True)]
            cmp = compare(judged, runs, metrics, names=names, correction="none", alpha=result.alpha)
            write_html_report(path, cmp, runs=dict(zip(names, runs, strict=True)), qrels=judged, title=title,
                              notes=notes)
            return
    from rankwise.report.gate_report import gate_html

    atomic_write_text(path, gate_html(result, title=title))


def github_gate(baseline: Any, candidate: Any, metrics: Iterable[str] | str = (), *, qrels: Any = None,
                alpha: float | str = 0.05, max_drop: float | str = 0.01, floors: Mapping[str, float] | Iterable[str] | None = None,
                relevance: str | None = None, labels: Any = None, html: str | PathLike | None = None,
                summary: str | PathLike | None = None, output: str | PathLike | None = None,
                **gate_options: Any) -> GateResult:
    """Gate ``candidate`` against ``baseline`` (as :func:`rankwise.gate`) and report it the GitHub
    way: Markdown to ``summary`` (default ``$GITHUB_STEP_SUMMARY``),
    ``passed``/``exit-code``/``failed``/``report`` to ``output`` (default ``$GITHUB_OUTPUT``), the
    HTML report to ``html``. ``floors``: a mapping, or ``METRIC=VALUE`` items (comma- or
    space-separated); ``alpha``, ``max_drop``: numbers, or their text (empty: the default). Bad
    input raises the gate's :class:`~rankwise.errors.InputError` after the summary says what was
    wrong.

    Example:
        >>> qrels = {f"q{i}": {"a": 1} for i in range(20)}
        >>> r = github_gate(
        ...     {q: ["a"] for q in qrels}, {q: ["x", "a"] for q in qrels}, "mrr", qrels=qrels
        ... )
        >>> r.exit_code
        1
    """
    from rankwise.report.gate_report import gate_markdown

    summary = os.environ.get("GITHUB_STEP_SUMMARY") if summary is None else summary
    output = os.environ.get("GITHUB_OUTPUT") if output is None else output
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    try:
        alpha = _number(alpha, 0.05, "alpha") if isinstance(alpha, str) else alpha
        max_drop = _number(max_drop, 0.01, "max_drop") if isinstance(max_drop, str) else max_drop
        if floors is not None and not isinstance(floors, Mapping):
            floors = parse_floors(split_list([floors] if isinstance(floors, str) else floors))
        if html:  # checked before any work: a directory, a dangling or looping link, /proc ... one line
            from rankwise._outputs import check_outputs

            paths = [x if isinstance(x, (str, PathLike)) else None for x in (baseline, candidate, qrels, labels)]
            check_outputs({"--html": html}, paths, force=True)
        result = gate(baseline, candidate, names, max_drop=max_drop, alpha=alpha, qrels=qrels, floors=floors,
                      relevance=relevance, labels=labels, **gate_options)
        if html:
            _html_report(Path(html), result, baseline, candidate, qrels=qrels, relevance=relevance, labels=labels,
                         metrics=[c.metric for c in result.checks])
    except RankwiseError as exc:
        from rankwise.errors import in_user_words

        _append(summary, "## ⚠️ rankwise gate: bad input\n\n```\nrankwise: error: "
                + " ".join(in_user_words(exc, FLAGS).splitlines()) + "\n```\n")
        _append(output, "passed=false\nexit-code=2\nfailed=\nreport=\n")
        raise
    _append(summary, gate_markdown(result))
    failed = ",".join(c.metric for c in result.failed)
    _append(output, f"passed={'true' if result.passed else 'false'}\nexit-code={result.exit_code}\n"
                    f"failed={failed}\nreport={html or ''}\n")
    return result


class _Parser(argparse.ArgumentParser):
    """argparse, its errors as one line (``rankwise: error: ...``) and exit 2."""

    def error(self, message: str):  # type: ignore[override]
        print(f"rankwise: error: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    """The script's flags (the action passes every input as one of them; an empty value means the
    default).

    Example:
        >>> args = parser().parse_args(
        ...     ["--baseline", "b.json", "--candidate", "c.trec", "--alpha", ""]
        ... )
        >>> args.alpha, args.html
        ('', 'rankwise-gate.html')
    """
    p = _Parser(prog="python -m rankwise.integrations.github",
                description="rankwise gate for GitHub Actions (job summary, outputs, HTML report)")
    p.add_argument("--baseline", required=True, help="baseline: run, saved result (.json) or RAG records")
    p.add_argument("--candidate", required=True, help="candidate: run, saved result (.json) or RAG records")
    p.add_argument("--qrels", default="", help="qrels, when baseline/candidate are runs")
    p.add_argument("--metrics", action="append", default=[], help="metrics to guard (comma-separated)")
    p.add_argument("--floors", action="append", default=[], help="METRIC=VALUE floors (comma-separated)")
    p.add_argument("--alpha", default="", help="significance level (default 0.05)")
    p.add_argument("--max-drop", default="", help="largest tolerated drop of a mean (default 0.01)")
    p.add_argument("--relevance", default="", help="verdict source for RAG records / test sets")
    p.add_argument("--labels", default="", help="human labels / graded qrels for --relevance human / ids")
    p.add_argument("--html", default="rankwise-gate.html", help="where to write the HTML report ('' for none)")
    return p


def _number(text: str, default: float, field: str) -> float:
    if not text.strip():
        return default
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{text!r} is not a number", field=field) from None


def main(argv: list[str] | None = None) -> int:
    """The action's entry point: parse the flags, run :func:`github_gate`, print the verdict; the
    exit code.

    Example:
        >>> import contextlib, io
        >>> with contextlib.redirect_stderr(io.StringIO()) as err:
        ...     main(["--baseline", "nosuch.trec", "--candidate", "nosuch.trec", "--html", ""])
        2
        >>> err.getvalue().startswith("rankwise: error: ")
        True
    """
    from rankwise.errors import in_user_words

    args = parser().parse_args(argv)
    try:
        result = github_gate(args.baseline, args.candidate, split_list(args.metrics), qrels=args.qrels or None,
                             alpha=args.alpha, max_drop=args.max_drop, floors=args.floors,
                             relevance=args.relevance or None, labels=args.labels or None, html=args.html or None)
    except RankwiseError as exc:
        print("rankwise: error: " + " ".join(in_user_words(exc, FLAGS).splitlines()), file=sys.stderr)
        return 2
    from rankwise.report.gate_report import how_tested, mde_sentence

    for c in result.checks:
        mde = "" if c.mde is None else f" (MDE {c.mde:.4f})"
        print(("FAIL " if c.failed else "pass ") + f"{c.metric}: {c.baseline_mean:.4f} -> {c.candidate_mean:.4f}{mde}")
    print(how_tested(result))
    if mde_sentence(result):
        print(mde_sentence(result))
    print("GATE FAILED: " + ", ".join(c.metric for c in result.failed) if result.failed else "GATE PASSED")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
