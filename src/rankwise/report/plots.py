"""PNG plots for terminal users (matplotlib, Agg backend, imported only here and only when called).

Example:
    >>> from rankwise.analysis.ksweep import ksweep
    >>> import tempfile, os
    >>> s = ksweep({"q": {"a": 1}}, [{"q": ["x", "a"]}], "recall", max_k=2)
    >>> path = plot_report(os.path.join(tempfile.mkdtemp(), "p.png"), sweeps=[s])
    >>> open(path, "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from rankwise._outputs import PNG_SOFTWARE
from rankwise.analysis.compare import ComparisonResult
from rankwise.analysis.ksweep import KSweep
from rankwise.errors import InputError
from rankwise.report.labels import signed
from rankwise.report.svg import GAIN, LOSS, color_of

__all__ = ["plot_report"]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'rankwise[report]'", field="plot") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_report(path: str | PathLike, *, comparison: ComparisonResult | None = None,
                sweeps: Sequence[KSweep] = (), metric: str | None = None, dpi: int = 120) -> Path:
    """Write one PNG: a metric-vs-K panel per sweep, then a sorted per-query delta panel per
    candidate.

    Args:
        path: the PNG to write.
        comparison: gives the per-query deltas (of ``metric``, default its first metric).
        sweeps: k-sweeps to draw.
    """
    panels: list[tuple[str, object]] = [("sweep", s) for s in sweeps]
    if comparison is not None:
        metric = metric or comparison.metrics[0]
        panels += [("delta", s) for s in comparison.candidates]
    if not panels:
        raise InputError("nothing to plot: give a comparison or a k-sweep", field="plot")
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.4 * len(panels)), squeeze=False)
    try:
        for ax, (kind, item) in zip(axes[:, 0], panels, strict=True):
            if kind == "sweep":
                _sweep_panel(ax, item)
            else:
                _delta_panel(ax, comparison, item, metric)
        fig.tight_layout()
        out = Path(path)
        try:
            from rankwise._atomic import atomic_write

            with atomic_write(out, "wb") as fh:
                fig.savefig(fh, dpi=dpi, format="png", metadata={"Software": PNG_SOFTWARE})
        except OSError as exc:
            raise InputError(f"cannot write the plot: {exc.strerror}", source=out) from None
    finally:
        plt.close(fig)
    return out


def _sweep_panel(ax, sweep: KSweep) -> None:
    for i, s in enumerate(sweep.systems):
        ax.plot(sweep.ks, sweep.values[s], marker="o", markersize=3, color=color_of(i), label=s)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("K")
    ax.set_ylabel(sweep.metric)
    ax.set_title(f"{sweep.metric} at K = 1..{sweep.ks[-1]}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)


def _delta_panel(ax, comparison: ComparisonResult, system: str, metric: str) -> None:
    d = comparison.deltas(system, metric)
    d = np.sort(d[~np.isnan(d)])[::-1]
    colors = [GAIN if v > 0 else LOSS for v in d]
    ax.bar(np.arange(len(d)), d, width=0.9, color=colors)
    ax.axhline(0, color="#333", linewidth=0.8)
    c = comparison.comparison(system, metric)
    mark = " *" if c.significant else ""
    ax.set_title(f"{metric}: {system} - {comparison.baseline} per query (mean {signed(c.delta)}{mark}, "
                 f"W/T/L {c.wins}/{c.ties}/{c.losses})", fontsize=10)
    ax.set_xlabel("queries, sorted by delta")
    ax.set_ylabel("delta")
    ax.set_xticks([])
    ax.grid(axis="y", alpha=0.3)
