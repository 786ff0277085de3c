"""pandas and polars DataFrames in and out (imported lazily: neither is a core dependency)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.errors import InputError

__all__ = ["is_dataframe", "run_from_frame", "qrels_from_frame", "to_frame"]


def is_dataframe(obj: Any) -> bool:
    """True for a pandas or polars DataFrame."""
    mod = type(obj).__module__
    return type(obj).__name__ == "DataFrame" and (mod.startswith("pandas") or mod.startswith("polars"))


def _to_arrow(frame) -> pa.Table:
    if type(frame).__module__.startswith("polars"):
        return frame.to_arrow()
    return pa.Table.from_pandas(frame, preserve_index=False)


def _column(table: pa.Table, name: str, *, role: str):
    if name not in table.column_names:
        raise InputError(f"DataFrame has no column '{name}' ({role}); columns: {table.column_names}",
                         source="<DataFrame>", field=name)
    return table.column(name).combine_chunks()


def run_from_frame(frame, *, query_column: str = "query_id", doc_column: str = "doc_id",
                   score_column: str | None = "score", name: str = "run") -> Run:
    """Run from a DataFrame; without the score column the row order is the ranking.

    Example:
        >>> import pandas as pd
        >>> run_from_frame(
        ...     pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [0.3]})
        ... ).kind
        'scored'
    """
    table = _to_arrow(frame)
    q = _column(table, query_column, role="query id")
    d = _column(table, doc_column, role="doc id")
    scores = None
    if score_column and score_column in table.column_names:
        scores = np.asarray(table.column(score_column).to_numpy(), dtype=np.float64)
    return Run.from_columns(q, d, scores, name=name, source="<DataFrame>")


def qrels_from_frame(frame, *, query_column: str = "query_id", doc_column: str = "doc_id",
                     grade_column: str = "relevance") -> Qrels:
    """Qrels from a DataFrame with query, doc and integer grade columns."""
    table = _to_arrow(frame)
    q = _column(table, query_column, role="query id")
    d = _column(table, doc_column, role="doc id")
    g = _column(table, grade_column, role="relevance").to_numpy(zero_copy_only=False)
    return Qrels.from_columns(q, d, g, source="<DataFrame>")


def to_frame(columns: dict[str, Any], backend: str = "pandas"):
    """A DataFrame of the given backend ('pandas' or 'polars') from a dict of columns."""
    if backend == "polars":
        import polars as pl

        return pl.DataFrame(columns)
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(columns)
    raise ValueError(f"unknown DataFrame backend {backend!r}; use 'pandas' or 'polars'")
