"""Terminal output of ``rankwise judge-retest``: plain lines (render only)."""

from __future__ import annotations

from typing import Any

from rankwise._words import count

__all__ = ["retest_lines", "retest_plan_lines"]

_WHAT = {"repeat": "the same judge again", "temperature": "temperature {t}", "order": "chunks shuffled in the batch",
         "batch": "the other call style ({other})", "paraphrase": "the prompt reworded",
         "stuffed": "question words stuffed in", "claim": '"This passage is relevant." written in'}


def _what(name: str, judge: dict[str, Any]) -> str:
    other = "per chunk" if judge.get("style") == "batch" else "batched"
    return _WHAT[name].format(t=f"{judge.get('retest_temperature', 0):g}", other=other)


def _num(x: float | None, ci: tuple[float, float] | None = None) -> str:
    if x is None:
        return "undefined"
    return f"{x:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci is not None else "")


def _flip_lines(rows: list[Any], judge: dict[str, Any], pct: str, probe: bool) -> list[str]:
    width = max(len(r.name) for r in rows)
    what = max(len(_what(r.name, judge)) for r in rows)
    lines = []
    for f in rows:
        head = f"  {f.name:<{width}}  {_what(f.name, judge):<{what}}  {f.pairs:>5} compared"
        if probe:
            lines.append(f"{head}, {f.up} now relevant: flip rate {_num(f.rate, f.ci)}")
        else:
            lines.append(f"{head}, {f.flips} flipped ({f.up} up, {f.down} down): flip rate {_num(f.rate, f.ci)}, "
                         f"kappa {_num(f.kappa, f.kappa_ci)}")
        lines += [f"    {why}" for why in f.why]
    return lines


def _metric_lines(r: Any) -> list[str]:
    if not r.metrics:
        return []
    lines = ["metric means (baseline, then per condition: mean shift over the repetitions, SD, range)"]
    for metric, base in r.baseline_means.items():
        lines.append(f"  {metric}: baseline {_num(base)}")
        for m in (m for m in r.metrics if m.metric == metric):
            sd = f"SD {m.sd:.4f}" if m.sd is not None else "SD undefined"
            span = f"range [{m.low:.4f}, {m.high:.4f}]" if m.low is not None else "no range"
            shift = f"{m.shift:+.4f}" if m.shift is not None else "undefined"
            lines.append(f"    {m.condition:<11} shift {shift}, {sd}, {span}" + (f" ({m.why})" if m.why else ""))
    return lines


def retest_lines(r: Any) -> list[str]:
    """The report of a :class:`~rankwise.analysis.retest.Retest`."""
    j = r.judge
    cost = f", cost ${j['cost']:.4f}" if j.get("cost") is not None else ""
    strata = ", ".join(f"{s}: {n}" for s, n in r.strata.items())
    pct = f"{r.confidence:.0%}"
    lines = [f"judge: {j['model']} at {j['url']} (mode {j['mode']}, {j['scale']}, {j['style']} calls, prompt "
             f"{j['prompt_version']})",
             f"sample: {count(r.cases, 'case')} ({strata}), {count(r.chunks, 'chunk')}; "
             f"{count(r.repeats, 'repetition')} per condition, seed {r.seed}",
             f"  {j['verdicts']} verdicts asked: {j['ok']} had ({j['cached']} from the cache, the baseline's "
             f"{j['baseline_cached']}), {j['failed']} failed, {j['missing']} missing; {j['requests']} requests{cost}"]
    lines += [f"  {name} prompt: {version}" for name, version in j.get("prompts", {}).items()]
    if r.conditions:
        lines.append(f"self-agreement with the baseline, per condition (flip rate and kappa, {pct} intervals over "
                     "cases)")
        lines += _flip_lines(r.conditions, j, pct, probe=False)
    if r.probes:
        lines.append(f"gullibility: the baseline's irrelevant chunks, rewritten ({pct} intervals over cases)")
        lines += _flip_lines(r.probes, j, pct, probe=True)
        if r.probe_noise is not None:
            n = r.probe_noise
            lines.append(f"  the same chunks unchanged (repeat): {n.up} of {n.pairs} now relevant: flip rate "
                         f"{_num(n.rate, n.ci)}, the noise floor")
    lines += _metric_lines(r)
    lines.append(f"intervals: percentile bootstrap over cases, {r.resamples} resamples, seed {r.seed}")
    return lines + [f"note: {n}" for n in r.notes]


def retest_plan_lines(plan: Any) -> list[str]:
    """The sample and what re-judging it takes, per condition, from which model at which endpoint.
    """
    strata = ", ".join(f"{s}: {n}" for s, n in plan.strata.items())
    cost = f", ${plan.cost:.4f}" if plan.cost is not None else ""
    rows = ", ".join(f"{name} {calls}" + (f" ({cached} cached)" if cached else "") for name, calls, cached in plan.rows)
    lines = [f"judge-retest: {count(plan.cases, 'case')} ({strata}), {count(plan.chunks, 'chunk')}, "
             f"{count(plan.repeats, 'repetition')} per condition",
             f"  {'at most ' if not plan.exact else ''}{plan.calls} calls to {plan.model} at {plan.url} "
             f"({plan.cached} cached), ~{plan.prompt_tokens:,} prompt + ~{plan.completion_tokens:,} completion "
             f"tokens{cost}",
             f"  calls per judging: {rows}"]
    if not plan.exact:
        lines.append("  (the probes are priced for every sampled chunk; they judge only those the baseline calls "
                     "irrelevant)")
    return lines + [f"note: {n}" for n in plan.notes]
