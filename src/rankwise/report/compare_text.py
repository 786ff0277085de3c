"""JSON and CSV renderings of comparisons, k-sweeps and gate results.

Example:
    >>> from rankwise.analysis.compare import compare
    >>> r = compare({"q": {"a": 1}}, [{"q": ["a"]}, {"q": ["x", "a"]}], "mrr", names=["A", "B"])
    >>> comparison_csv(r).splitlines()[0].split(",")[:5]
    ['metric', 'system', 'baseline', 'mean', 'delta']
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rankwise.analysis.compare import ComparisonResult
from rankwise.analysis.gate import GateResult
from rankwise.analysis.ksweep import KSweep

__all__ = ["comparison_json", "comparison_csv", "ksweep_csv", "gate_json"]

_COLUMNS = ["metric", "system", "baseline", "mean", "delta", "ci_low", "ci_high", "p_value", "p_adjusted",
            "significant", "effect_size", "wins", "ties", "losses", "n"]


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def comparison_json(result: ComparisonResult, *, per_query: bool = False, sweeps: list[KSweep] | None = None,
                    indent: int | None = 2) -> str:
    """The comparison (and any k-sweeps) as strict JSON (no NaN)."""
    data = result.to_json(per_query=per_query)
    if sweeps:
        data["sweeps"] = [s.to_json() for s in sweeps]
    return json.dumps(_clean(data), indent=indent)


def comparison_csv(result: ComparisonResult) -> str:
    """One row per (metric, system); p-values of every test as ``p_<test>`` columns."""
    rows = result.rows()
    extra = [f"p_{t}" for t in result.settings["tests"]]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_COLUMNS + extra, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def ksweep_csv(sweep: KSweep) -> str:
    """``metric,k,system,value`` rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "k", "system", "value"])
    for i, k in enumerate(sweep.ks):
        for s in sweep.systems:
            w.writerow([sweep.metric, k, s, repr(float(sweep.values[s][i]))])
    return buf.getvalue()


def gate_json(result: GateResult, *, indent: int | None = 2) -> str:
    return json.dumps(_clean(result.to_json()), indent=indent)
