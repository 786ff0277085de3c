"""Words shared by every report format: test and correction names, p-values, the comparison caption.

Example:
    >>> fmt_p(0.01234), TEST_LABELS["t"]
    ('0.0123', 'paired t-test')
"""

from __future__ import annotations

import math

from rankwise.analysis.compare import ComparisonResult

__all__ = ["TEST_LABELS", "CORRECTION_LABELS", "fmt_p", "p_phrase", "signed", "comparison_caption"]

TEST_LABELS = {"randomization": "randomization test", "t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank"}
CORRECTION_LABELS = {"holm": "Holm-Bonferroni", "bonferroni": "Bonferroni", "none": "no"}


def fmt_p(p: float | None) -> str:
    """A p-value for people: 4 decimals, ``<0.0001`` below that, ``-`` when undefined.

    Example:
        >>> fmt_p(0.01234), fmt_p(1e-7), fmt_p(float("nan"))
        ('0.0123', '<0.0001', '-')
    """
    if p is None or math.isnan(p):
        return "-"
    return "<0.0001" if p < 0.0001 else f"{p:.4f}"


def p_phrase(p: float | None) -> str:
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def signed(x: float | None, digits: int = 4) -> str:
    """A difference with its sign; one that rounds to zero is plain ``0.0000`` (never ``-0.0000``).

    Example:
        >>> signed(0.01234), signed(-0.5), signed(-0.0), signed(-1e-17), signed(None)
        ('+0.0123', '-0.5000', '0.0000', '0.0000', '-')
    """
    if x is None or math.isnan(x):
        return "-"
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def comparison_caption(result: ComparisonResult) -> str:
    """What was tested, how, and over how many queries: one paragraph."""
    s = result.settings
    test = TEST_LABELS[result.test]
    if result.test == "randomization":
        test += f" ({s['permutations']:,} sign flips, seed {s['seed']})"
    extra = [TEST_LABELS[t] for t in s["tests"][1:]]
    unit = "cases" if result.summary.get("source") else "queries"
    parts = [f"{result.summary.get('queries', len(result.query_ids))} paired {unit}; baseline "
             f"{result.baseline}; p = two-sided {test}"]
    if extra:
        parts.append("also " + ", ".join(extra))
    parts.append(f"{CORRECTION_LABELS[s['correction']]} correction over {s['comparisons']} comparisons")
    parts.append(f"* = significant at alpha {s['alpha']} after correction")
    parts.append(f"CI = {s['confidence']:.0%} bootstrap interval of the mean difference ({s['resamples']:,} "
                 "resamples)")
    parts.append(f"d = Cohen's d of the paired differences; W/T/L = {unit} better/equal/worse than baseline")
    left = result.summary.get("left_out_not_in_every_run") or result.summary.get("left_out_not_in_every_set")
    if left:
        parts.append("left out (not in every system): "
                     + ", ".join(f"{k} {v}" for k, v in left.items() if v))
    why = result.summary.get("undefined_why") or {}
    for system, per_metric in (result.summary.get("undefined") or {}).items():
        parts.append(f"{system}: undefined values left out of " +
                     ", ".join(f"{m} ({n}: {why.get(m, 'an empty denominator')})" for m, n in per_metric.items()))
    return "; ".join(parts)
