"""rankwise: how good is the retrieval stage of your RAG pipeline, and why.

Example:
    >>> import rankwise
    >>> r = rankwise.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 0.9, "d2": 0.1}}, ["ndcg@10", "P@1"])
    >>> r.mean
    {'ndcg@10': 1.0, 'precision@1': 1.0}
"""

from __future__ import annotations

from typing import Any

from rankwise.errors import InputError, RankwiseError

__version__ = "0.1.0"

__all__ = ["EvalResult", "InputError", "Qrels", "RankwiseError", "Run", "calibrate", "compare", "evaluate",
           "evaluate_rag", "gate", "load_qrels", "load_records", "load_run", "__version__"]

# Entry points are imported on first use, so `import rankwise` (and `rankwise --help`) stays light:
# numpy and pyarrow load only when something needs them.
_LAZY = {
    "Qrels": ("rankwise.data", "Qrels"),
    "Run": ("rankwise.data", "Run"),
    "load_qrels": ("rankwise.data", "load_qrels"),
    "load_run": ("rankwise.data", "load_run"),
    "EvalResult": ("rankwise.metrics", "EvalResult"),
    "evaluate": ("rankwise.metrics", "evaluate"),
    "evaluate_rag": ("rankwise.metrics.rag", "evaluate_rag"),
    "load_records": ("rankwise.metrics.rag", "load_records"),
    "compare": ("rankwise.analysis.compare", "compare"),
    "gate": ("rankwise.analysis.gate", "gate"),
    "calibrate": ("rankwise.analysis.calibrate", "calibrate"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'rankwise' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
