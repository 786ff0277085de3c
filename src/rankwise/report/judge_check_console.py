"""Terminal output of ``rankwise judge-check``: plain lines (render only)."""

from __future__ import annotations

from typing import Any

from rankwise._words import count

__all__ = ["judge_check_lines", "judge_check_plan_lines"]


def _ci(ci: tuple[float, float] | None) -> str:
    return f"  [{ci[0]:.4f}, {ci[1]:.4f}]" if ci is not None else ""


def _value(x: float | None, ci: tuple[float, float] | None = None, signed: bool = False) -> str:
    if x is None:
        return "undefined (see the notes)"
    return (f"{x:+.4f}" if signed else f"{x:.4f}") + _ci(ci)


def _matrix(rows: list[list[int]], row_labels: list[str], col_labels: list[str], indent: str) -> list[str]:
    width = max(6, *(len(c) for c in col_labels), *(len(str(v)) for r in rows for v in r))
    head = max(len(r) for r in row_labels)
    lines = [indent + " " * head + "".join(f"  {c:>{width}}" for c in col_labels)]
    for label, row in zip(row_labels, rows, strict=True):
        lines.append(indent + f"{label:<{head}}" + "".join(f"  {v:>{width}}" for v in row))
    return lines


def _judge_lines(j: dict[str, Any]) -> list[str]:
    if not j:
        return []
    cost = f", cost ${j['cost']:.4f}" if j.get("cost") is not None else ""
    return [f"judge: {j['model']} at {j['url']} (mode {j['mode']}, {j['scale']}, prompt {j['prompt_version']})",
            f"  {count(j['pairs'], 'pair')} sent: {j['ok']} labelled ({j['cached']} from the cache), {j['failed']} "
            f"failed, {j['missing']} missing; {j['requests']} requests{cost}"]


def _label_lines(a: Any, confidence: float) -> list[str]:
    pct = f"{confidence:.0%}"
    lines = [f"label agreement over {count(a.n, 'pair')} of {count(a.topics, 'topic')} (values, {pct} intervals)",
             f"  kappa, binarised          {_value(a.kappa, a.kappa_ci)}",
             f"  kappa, grades (quadratic) {_value(a.graded_kappa, a.graded_kappa_ci)}",
             f"  leniency (judge - human)  {_value(a.leniency, a.leniency_ci, signed=True)} grade; relevant share "
             f"{a.binary_leniency:+.4f}",
             f"  relevant: human grade >= {a.human_level}, judge grade >= {a.judge_level}; confusion (rows: human, "
             "columns: judge)"]
    lines += _matrix(a.confusion, ["human 0", "human 1"], ["judge 0", "judge 1"], "    ")
    lines.append("  grades (rows: human, columns: judge)")
    grades = [str(g) for g in a.grades]
    lines += _matrix(a.graded_confusion, grades, grades, "    ")
    if a.only_human or a.only_judge:
        lines.append(f"  not compared: {a.only_human} pairs the humans label and the judge does not (not sampled, or "
                     f"failed), {a.only_judge} the judge labels and the humans do not")
    return lines


def _system_lines(s: Any, confidence: float) -> list[str]:
    pct = f"{confidence:.0%}"
    width = max(6, *(len(n) for n in s.human_means))
    lines = [f"system agreement: {s.metric} over {count(s.topics, 'topic')}, each label set on the compared pairs",
             f"  {'system':<{width}}  {'human':>7}  {'judge':>7}"]
    order = sorted(s.human_means, key=lambda n: (-s.human_means[n], n))
    for n in order:
        lines.append(f"  {n:<{width}}  {s.human_means[n]:7.4f}  {s.judge_means[n]:7.4f}")
    lines.append(f"  Kendall tau-b ({pct} interval)   {_value(s.tau, s.tau_ci)}")
    lines.append(f"  top-{s.top_k} tau ({', '.join(s.top_systems)})   {_value(s.top_k_tau, s.top_k_tau_ci)}")
    if s.pairs:
        lines.append(f"  pairwise decisions ({s.test} test, {s.correction} correction, alpha {s.alpha:g}): "
                     f"{s.flips} of {count(len(s.pairs), 'pair')} flip")
        for p in s.pairs:
            if p.flip:
                lines.append(f"    {p.a} vs {p.b}: human says {_decision(p.human)} (p {p.human_p:.4g}), judge says "
                             f"{_decision(p.judge)} (p {p.judge_p:.4g})")
    return lines


def _decision(d: str) -> str:
    return "no significant difference" if d == "none" else f"{d} is better"


def judge_check_lines(check: Any) -> list[str]:
    """The report of a :class:`~rankwise.analysis.judge_check.JudgeCheck`."""
    lines = _judge_lines(check.judge)
    lines += _label_lines(check.labels, check.confidence)
    lines += _system_lines(check.systems, check.confidence)
    lines.append(f"intervals: percentile bootstrap over topics, {check.resamples} resamples, seed {check.seed}")
    lines += [f"warning: {w}" for w in check.warnings]
    lines += [f"note: {n}" for n in check.notes]
    return lines


def judge_check_plan_lines(plan: Any, url: str) -> list[str]:
    """``--dry-run``: the sample and what judging it would take, from which model at which endpoint.
    """
    p = plan.plan
    grades = ", ".join(f"grade {g}: {n}" for g, n in plan.by_grade.items())
    cost = f", ${p.cost:.4f}" if p.cost is not None else ""
    lines = [f"dry run: {count(plan.pairs, 'pair')} sampled from {count(plan.topics, 'topic')} ({grades})",
             f"  judge: {p.calls} calls to {p.model} at {url} ({p.cached} cached), ~{p.prompt_tokens:,} prompt + ~{p.completion_tokens:,} "
             f"completion tokens{cost}"]
    return lines + [f"warning: {w}" for w in plan.warnings]
