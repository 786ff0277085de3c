"""Metrics: the vectorised engine, the registry of names, IR and RAG context metrics."""

from rankwise.metrics.context import (
    average_context_precision,
    harmonic_mean,
    set_precision,
    set_recall,
    weighted_context_precision,
)
from rankwise.metrics.engine import DEFAULT_METRICS, EvalResult, PerQuery, evaluate, evaluate_matrix
from rankwise.metrics.matrix import RelevanceMatrix, join
from rankwise.metrics.registry import METRICS, Measure, Metric, known_names, parse_measure, parse_measures

__all__ = [
    "DEFAULT_METRICS", "EvalResult", "METRICS", "Measure", "Metric", "PerQuery", "RelevanceMatrix",
    "average_context_precision", "evaluate", "evaluate_matrix", "harmonic_mean", "join", "known_names",
    "parse_measure", "parse_measures", "set_precision", "set_recall", "weighted_context_precision",
]
