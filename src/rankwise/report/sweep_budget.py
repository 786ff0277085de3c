"""A sweep's quality against context budget: one text table per budget metric, the best
configuration at each budget and the Pareto front; and the same as a PNG plot.

Example:
    >>> from types import SimpleNamespace
    >>> summary = {
    ...     "recall": {
    ...         "curves": {"a": {"500": 0.4, "1000": 0.7}, "b": {"500": 0.5, "1000": 0.6}},
    ...         "best": {"500": {"config": "b", "mean": 0.5}, "1000": {"config": "a", "mean": 0.7}},
    ...         "pareto": [
    ...             {"config": "b", "budget": 500, "value": 0.5},
    ...             {"config": "a", "budget": 1000, "value": 0.7},
    ...         ],
    ...     }
    ... }
    >>> print("\\n".join(budget_lines(summary, "c")))
    recall at a context budget (characters); [f] on the Pareto front
    config      500c   1000c
    a        0.4000  0.7000f
    b        0.5000f 0.6000
    front: b at 500c (0.5000), a at 1000c (0.7000): the cheapest prompt for each quality
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["budget_lines", "write_budget_plot"]

_UNITS = {"c": "characters", "t": "tokens"}


def budget_lines(summary: dict[str, Any], unit: str) -> list[str]:
    """The console text of :meth:`~rankwise.workflows.sweep_run.SweepResult.budget_summary`."""
    lines: list[str] = []
    for metric, part in summary.items():
        curves = part["curves"]
        budgets = sorted({int(b) for c in curves.values() for b in c})
        on_front = {(p["config"], int(p["budget"])) for p in part["pareto"]}
        width = max(len("config"), *(len(lab) for lab in curves)) + 2
        lines.append(f"{metric} at a context budget ({_UNITS[unit]}); [f] on the Pareto front")
        lines.append("config".ljust(width) + "".join(f"{b}{unit}".rjust(8) for b in budgets))
        for lab, curve in curves.items():
            cells = "".join((f"{curve[str(b)]:.4f}" + ("f" if (lab, b) in on_front else " ")).rjust(8)
                            for b in budgets)
            lines.append((lab.ljust(width) + cells).rstrip())
        front = ", ".join(f"{p['config']} at {p['budget']}{unit} ({p['value']:.4f})" for p in part["pareto"])
        lines.append(f"front: {front}: the cheapest prompt for each quality")
    shown = next(iter(summary.values()), {}).get("short_lists") or {}
    for lab, counts in shown.items():
        where = ", ".join(f"{n} at {b}{unit}" for b, n in counts.items())
        lines.append(f"note: {lab}: questions whose retrieved list holds less than the budget ({where}): the rest "
                     "of their budget is empty; a deeper --depth fills it")
    return lines


def write_budget_plot(summary: dict[str, Any], unit: str, path: str | Path) -> Path:
    """Quality against budget, one line per configuration and one panel per metric, the front's
    points ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(summary)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = summary[metric]
        for lab, curve in part["curves"].items():
            xs = sorted(int(b) for b in curve)
            ax.plot(xs, [curve[str(b)] for b in xs], marker="o", label=lab)
        ax.scatter([p["budget"] for p in part["pareto"]], [p["value"] for p in part["pareto"]], s=160,
                   facecolors="none", edgecolors="black", label="Pareto front")
        ax.set_xlabel(f"context budget ({_UNITS[unit]})")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
