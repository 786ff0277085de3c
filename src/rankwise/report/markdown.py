"""Markdown tables of comparisons and k-sweeps (for pull-request comments and notebooks).

Example:
    >>> from rankwise.analysis.compare import compare
    >>> r = compare({"q": {"a": 1}}, [{"q": ["a"]}, {"q": ["x", "a"]}], "mrr", names=["A", "B"])
    >>> print(comparison_markdown(r).splitlines()[2])
    | mrr | A (baseline) | 1.0000 |  |  |  |  |  |  |
"""

from __future__ import annotations

from rankwise.analysis.compare import ComparisonResult
from rankwise.analysis.ksweep import KSweep
from rankwise.report.labels import comparison_caption, fmt_p, signed

__all__ = ["comparison_markdown", "ksweep_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def comparison_markdown(result: ComparisonResult, *, digits: int = 4) -> str:
    """A GitHub-flavoured table (significant deltas in bold) followed by how it was computed."""
    conf = f"{result.settings['confidence']:.0%} CI"
    lines = [f"| metric | system | mean | delta | {conf} | p | p adj | d | W/T/L |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for metric in result.metrics:
        for system in result.systems:
            mean = f"{result.means[system][metric]:.{digits}f}"
            if system == result.baseline:
                lines.append(f"| {_cell(metric)} | {_cell(system)} (baseline) | {mean} |  |  |  |  |  |  |")
                continue
            c = result.comparison(system, metric)
            delta = signed(c.delta, digits)
            if c.significant:
                delta = f"**{delta}**\\*"
            d = "-" if c.effect_size is None else f"{c.effect_size:+.2f}"
            lines.append(f"| {_cell(metric)} | {_cell(system)} | {mean} | {delta} | "
                         f"[{signed(c.ci_low, digits)}, {signed(c.ci_high, digits)}] | {fmt_p(c.p_value)} | "
                         f"{fmt_p(c.p_adjusted)} | {d} | {c.wins}/{c.ties}/{c.losses} |")
    return "\n".join(lines) + "\n\n" + comparison_caption(result) + "\n"


def ksweep_markdown(sweep: KSweep, *, digits: int = 4) -> str:
    """K in rows, systems in columns."""
    lines = ["| K | " + " | ".join(_cell(s) for s in sweep.systems) + " |",
             "|---:|" + "---:|" * len(sweep.systems)]
    for i, k in enumerate(sweep.ks):
        lines.append(f"| {k} | " + " | ".join(f"{sweep.values[s][i]:.{digits}f}" for s in sweep.systems) + " |")
    return f"**{sweep.metric}** at K = 1..{sweep.ks[-1]}\n\n" + "\n".join(lines) + "\n"
