"""Render calibration results and position curves: a console table, one sentence, PNG plots."""

from __future__ import annotations

import math
from os import PathLike
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rankwise._outputs import PNG_SOFTWARE
from rankwise.analysis.calibrate import CalibrationResult
from rankwise.analysis.position import PositionFit
from rankwise.report.console import make_console
from rankwise.report.plots import _pyplot
from rankwise.report.svg import color_of

__all__ = ["print_calibration", "plot_calibration", "print_position_fit", "plot_position_fit"]


def _f(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def print_calibration(result: CalibrationResult, *, top: int = 15, console: Console | None = None) -> None:
    """The best candidates (training and held-out statistic, interval, system agreement) and the
    sentence."""
    console = console or make_console()
    stat = "Kendall tau-b" if result.statistic == "kendall_tau_b" else "AUC"
    table = Table(title=f"Which metric predicts the answer score ({stat}; {result.train_cases} training / "
                        f"{result.held_out_cases} held-out cases, verdicts: {result.source})",
                  title_justify="left")
    for col in ("rank", "metric", "train", "held out", "interval"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    several = len(result.systems) > 1
    if several:
        table.add_column("system tau", justify="right")
    for i, c in enumerate(result.candidates[:top], start=1):
        ci = "-" if c.ci_low is None else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
        row = [str(i), c.name, _f(c.train), _f(c.held_out), ci]
        if several:
            row.append(_f(c.system_tau))
        table.add_row(*row)
    console.print(table)
    console.print(result.sentence(), highlight=False)
    if result.summary.get("cases_without_answer_score"):
        console.print(f"{result.summary['cases_without_answer_score']} cases had no answer score and were left out",
                      style="dim", highlight=False)


def plot_calibration(result: CalibrationResult, path: str | PathLike, *, top: int = 15, dpi: int = 120) -> Path:
    """Horizontal bars of the held-out statistic of the best candidates, with their intervals."""
    plt = _pyplot()
    shown = [c for c in result.candidates[:top] if not math.isnan(c.held_out)][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(4, len(shown)) + 1.2))
    ys = range(len(shown))
    ax.barh(list(ys), [c.held_out for c in shown], color=color_of(0))
    for y, c in zip(ys, shown, strict=True):
        if c.ci_low is not None:
            ax.plot([c.ci_low, c.ci_high], [y, y], color="black", linewidth=1)
    ax.set_yticks(list(ys), [c.name for c in shown], fontsize=8)
    ax.set_xlabel("held-out " + ("Kendall tau-b" if result.statistic == "kendall_tau_b" else "AUC"))
    ax.set_title(result.sentence() if len(result.sentence()) < 90 else "which metric predicts the answers",
                 fontsize=9)
    fig.tight_layout()
    out = Path(path)
    _save_png(fig, out, dpi)
    plt.close(fig)
    return out


def print_position_fit(fit: PositionFit, *, console: Console | None = None) -> None:
    """Accuracy by position with intervals, then each family's maximum-likelihood fit (lowest AIC
    first), the goodness-of-fit verdict, and the fits the data do not tell apart."""
    console = console or make_console()
    table = Table(title="Answer accuracy with the supporting chunk at each position", title_justify="left")
    for col in ("position", "answers", "accuracy", "95% interval", "best fit"):
        table.add_column(col, justify="right")
    predicted = fit.best.predict(len(fit.accuracy))
    for i, (a, n, (lo, hi)) in enumerate(zip(fit.accuracy, fit.counts, fit.intervals, strict=True)):
        table.add_row(str(i + 1), str(n), _f(a), f"[{_f(lo)}, {_f(hi)}]", _f(float(predicted[i])))
    console.print(table)
    fits = Table(title="Families fitted by maximum likelihood (lowest AIC first)", title_justify="left")
    for col in ("family", "alpha", "beta", "parameters", "log-likelihood", "AIC"):
        fits.add_column(col, justify="left" if col == "family" else "right")
    for f in fit.fits:
        fits.add_row(f.label(), _f(f.alpha), _f(f.beta), str(f.n_params), f"{f.loglik:.2f}", f"{f.aic:.2f}")
    console.print(fits)
    console.print(fit.sentence(), highlight=False)
    rivals = fit.rivals()
    if rivals and fit.fitted:
        console.print(f"within 2 AIC of it (the answers do not tell them apart): "
                      f"{', '.join(f.label() for f in rivals)}; more answers per position would", highlight=False)


def plot_position_fit(fit: PositionFit, path: str | PathLike, *, dpi: int = 120) -> Path:
    """Accuracy by position with intervals and the best fitted discount."""
    plt = _pyplot()
    k = len(fit.accuracy)
    xs = list(range(1, k + 1))
    fig, ax = plt.subplots(figsize=(7, 4))
    lows = [a - lo for a, (lo, _) in zip(fit.accuracy, fit.intervals, strict=True)]
    highs = [hi - a for a, (_, hi) in zip(fit.accuracy, fit.intervals, strict=True)]
    ax.errorbar(xs, fit.accuracy, yerr=[lows, highs], fmt="o", color=color_of(0), label="measured")
    label = f"best fit: {fit.best.label()}" if fit.fitted else f"no family fits (closest: {fit.best.label()})"
    ax.plot(xs, fit.best.predict(k), color=color_of(1), label=label, linestyle="-" if fit.fitted else ":")
    ax.set_xlabel("position of the supporting chunk")
    ax.set_ylabel("answer accuracy")
    ax.set_xticks(xs)
    ax.legend()
    fig.tight_layout()
    out = Path(path)
    _save_png(fig, out, dpi)
    plt.close(fig)
    return out


def _save_png(fig, out: Path, dpi: int) -> None:
    """The figure as a PNG tagged as ours (rewritten without --force), written whole or not at all.
    """
    from rankwise._atomic import atomic_write

    with atomic_write(out, "wb") as fh:
        fig.savefig(fh, dpi=dpi, format="png", metadata={"Software": PNG_SOFTWARE})
