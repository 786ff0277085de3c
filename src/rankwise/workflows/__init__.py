"""Workflows: compositions of the layers below, each run from a small spec — the chunking x
retriever ``sweep`` (:func:`rankwise.sweep`), the bundled ``demo``, ``answer`` runs (the generator's
answers and their scores) and the ``position_run`` (accuracy by the rank of the evidence).

Example:
    >>> from rankwise.workflows import sweep_metrics
    >>> sweep_metrics(10)[:2]
    ['hit_rate@1', 'mrr']
"""

from __future__ import annotations

from rankwise._lazy import lazy_exports

__all__ = ["SweepConfig", "SweepResult", "SweepSpec", "run_sweep", "sweep", "sweep_metrics", "DemoResult", "run_demo", "answer_records",
           "utility_verdicts", "run_position_curve", "plant_contexts"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "SweepConfig": ".sweep_run", "SweepResult": ".sweep_run", "SweepSpec": ".sweep_run", "run_sweep": ".sweep_run", "sweep": ".sweep_run",
    "sweep_metrics": ".sweep_run",
    "DemoResult": ".demo", "run_demo": ".demo", "answer_records": ".answer_run",
    "utility_verdicts": ".answer_run", "run_position_curve": ".position_run", "plant_contexts": ".position_run",
}, globals())
