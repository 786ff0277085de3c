"""NaN and infinity where JSON and MLflow cannot take them: one rule, used by every writer.

Example:
    >>> finite_json({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    >>> finite_float("0.5"), finite_float(float("nan")), finite_float(True)
    (0.5, None, None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["finite_json", "finite_float"]


def finite_json(obj: Any) -> Any:
    """``obj`` (JSON-like: mappings, lists, tuples, scalars) with every NaN/inf float as None
    (null).

    Example:
        >>> finite_json([float("-inf"), 2])
        [None, 2]
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def finite_float(x: Any) -> float | None:
    """``x`` as a finite float, else None (None, a bool, not a number, NaN, infinite or past a
    float's range).

    Example:
        >>> finite_float(3), finite_float("x"), finite_float(10**400)
        (3.0, None, None)
    """
    if x is None or isinstance(x, bool):
        return None
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None
