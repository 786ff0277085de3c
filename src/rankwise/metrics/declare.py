"""How a metric is declared: its parameters (:class:`Param`), the declaration itself
(:class:`Metric`), and the small helpers declarations share (trec_eval's printed names, measure
functions imported on first use).

The declarations live in :mod:`rankwise.metrics.catalogue`, one module per family; the registry
(:mod:`rankwise.metrics.registry`) registers them and parses names into measures.

Example:
    >>> Metric(
    ...     "share", lambda m, k=None: m, "an example", cutoff="required", value_range=RANGE_UNIT
    ... ).cutoff
    'required'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Param", "Metric", "Deferred", "deferred_module", "cut", "with_param", "rbp_name", "short", "show",
           "RANGE_UNIT", "RANGE_NONNEGATIVE", "RANGE_AT_LEAST_ONE"]

#: a declared value range: every per-query value lies in [0, 1]
RANGE_UNIT = (0.0, 1.0)
#: counts and sums of non-negative gains: never below 0
RANGE_NONNEGATIVE = (0.0, float("inf"))
#: counts of at least one (calls_to_evidence)
RANGE_AT_LEAST_ONE = (1.0, float("inf"))


@dataclass(frozen=True)
class Param:
    """One declared parameter of a metric (as ir_measures' ``SUPPORTED_PARAMS``).

    Attributes:
        name: the parameter's name in metric names (``decay`` in ``wcp(decay=linear)@5``).
        kind: ``str``, ``bool``, ``int`` or ``float``.
        default: the value when the name does not give one.
        description: one line, shown by ``rankwise metrics``.
        choices: the allowed values (empty: any value of ``kind``).
        bounds: for numbers, the open interval the value must lie in.
        applies_when: ``(other parameter, value)`` this one qualifies (``p`` applies when
            ``decay=rbp``): refused otherwise, and always spelled out in the name when it applies.
        required: the name must give it (``metric`` in ``per_call(metric=recall,call=1)@5``); always
            shown.
        nests: the value is a metric name with its own parameters allowed
            (``merged(metric=wcp(decay=linear))``).

    Example:
        >>> Param("decay", str, "log", "rank discount", ("log", "linear")).parse("linear")
        'linear'
    """

    name: str
    kind: type
    default: Any
    description: str
    choices: tuple = ()
    bounds: tuple[float, float] | None = None
    applies_when: tuple[str, Any] | None = None
    required: bool = False
    #: the value names a metric that may carry its own parameters (``metric=wcp(decay=linear)``)
    nests: bool = False

    def parse(self, raw: str) -> Any:
        """The value of ``raw`` (text from a metric name); ValueError naming the allowed values."""
        text = raw.strip()
        value: Any
        if self.kind is bool:
            lowered = text.lower()
            if lowered in ("true", "1", "yes"):
                value = True
            elif lowered in ("false", "0", "no"):
                value = False
            else:
                raise ValueError(f"{self.name} must be true or false, not {text!r}")
        elif self.kind in (int, float):
            try:
                value = self.kind(text)
            except ValueError:
                raise ValueError(f"{self.name} must be a number ({self.kind.__name__}), "
                                 f"not {text!r}") from None
        else:
            value = text
        base = value.split("(", 1)[0].strip() if self.nests and isinstance(value, str) else value
        if self.choices and base not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, not {text!r}")
        if self.bounds is not None and not self.bounds[0] < value < self.bounds[1]:
            raise ValueError(f"{self.name} must be between {self.bounds[0]:g} and {self.bounds[1]:g} "
                             f"(exclusive), not {text!r}")
        return value

    def describe(self) -> str:
        allowed = "|".join(show(c) for c in self.choices) if self.choices else self.kind.__name__
        if self.bounds is not None:
            allowed += f" in ({self.bounds[0]:g}, {self.bounds[1]:g})"
        if self.required:
            example = f"{self.name}={show(self.default)}"
            return f"{self.name} (required, e.g. {example}; {allowed}): {self.description}"
        return f"{self.name}={show(self.default)} ({allowed}): {self.description}"


@dataclass(frozen=True)
class Metric:
    """A metric's declaration.

    Attributes:
        name: canonical base name (``ndcg``).
        compute: ``(matrix, k, **params) -> per-query values``.
        description: one line, shown in ``rankwise metrics`` and the docs.
        aliases: other base names (matched case-insensitively).
        cutoff: ``"optional"``, ``"required"`` or ``"none"``.
        params: declared parameters (:class:`Param`).
        trec_name: trec_eval's name for a cutoff (``lambda k: f"P_{k}"``), None if trec_eval has
            none.
        aggregate: ``"mean"``, ``"sum"`` (counts) or ``"gmean"`` (geometric mean) over queries.
        undefined_is_nan: the metric returns NaN for queries where it is undefined (id-set metrics).
        requires: what the relevance matrix must carry (``"char_spans"``), checked before computing.
        trec_param: the parameter trec_eval's dotted list fills (``iprec_at_recall.0.1,0.2``); None:
            the list gives cutoffs (``P.5,10``).
        trec_as_written: trec_eval prints the parameter as it was written (``set_F.0.50`` prints
            ``set_F_0.50``), not formatted from its value.
        formula: the definition in one line (notation in :mod:`rankwise.metrics._references`).
        reference: where the metric is defined (paper, or the tool whose behaviour it follows).
        trec_reset: trec_eval resets the value of queries missing from the run (``-c``) only under
            the bare name; ``compute`` takes ``bare`` (False when ``trec_param`` is written out,
            even at its default: ``utility.1,-1,0,0`` prints ``utility_1,-1,0,0`` and keeps the
            placeholder's value).
        undefined_when: when ``undefined_is_nan``, the sentence saying when a case has no value
            (summaries).
        value_range: the closed interval every per-query value lies in at the default parameters, on
            any input and under every verdict source (None: unbounded, or bounded only for some
            gains); tests/conformance/test_rag_invariants.py holds each declared range on random
            records (:data:`RANGE_UNIT`, :data:`RANGE_NONNEGATIVE`, :data:`RANGE_AT_LEAST_ONE`).
    """

    name: str
    compute: Callable[..., np.ndarray]
    description: str
    aliases: tuple[str, ...] = ()
    cutoff: str = "optional"
    params: tuple[Param, ...] = ()
    trec_name: Callable[..., str | None] | None = None
    aggregate: str = "mean"
    undefined_is_nan: bool = False
    requires: tuple[str, ...] = ()
    trec_param: str | None = None
    trec_as_written: bool = False
    formula: str = ""
    reference: str = ""
    trec_reset: bool = False
    undefined_when: str = ""
    value_range: tuple[float, float] | None = None

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


def show(v: Any) -> str:
    """A parameter value as a metric name spells it (``true``, ``log``, ``0.5``)."""
    if isinstance(v, bool):
        return str(v).lower()
    return getattr(v, "__name__", str(v))


def cut(fmt_k: str, fmt_all: str | None = None):
    """trec_eval's printed name at cutoff k (``P_{k}``), and without one (``fmt_all``)."""
    def name(k):
        if k is None:
            return fmt_all
        return fmt_k.format(k=k)

    return name


def with_param(base: str, param: str, fmt: str | Callable[[Any], str] = "{}"):
    """trec_eval's printed name: ``base`` alone at the default, ``base_<value>`` otherwise."""
    def name(k, **params):
        value = params.get(param)
        if value in (None, ""):
            return base
        return f"{base}_{fmt(value) if callable(fmt) else fmt.format(value)}"

    return name


def rbp_name(base: str):
    """trec_eval's printed name of rbp and rbp_resid: ``base``, or ``base_p=...,gains`` when given.
    """
    def name(k, p=None, gains=""):
        spec = ",".join(x for x in ((f"p={p}" if p is not None else ""), gains) if x)
        return base if not spec else f"{base}_{spec}"

    return name


def short(value: float) -> str:
    """A float as one would write it in a name: 2.0 -> 2, 0.5 -> 0.5."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


class Deferred:
    """A measure function imported on its first call: trec_eval's less common measures
    (``metrics/trec.py``), the preference (``prefs.py``) and judgement-group (``jg.py``) ones are
    declared in the catalogue without importing their modules, so ``rankwise eval`` of the common
    measures starts without them."""

    __slots__ = ("module", "attr", "key", "_fn")

    def __init__(self, module: str, attr: str, key: str | None = None):
        self.module, self.attr, self.key, self._fn = module, attr, key, None

    def resolve(self) -> Callable[..., Any]:
        if self._fn is None:
            found = getattr(importlib.import_module(self.module), self.attr)
            self._fn = found if self.key is None else found[self.key][0]
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<measure {self.module}.{self.key or self.attr}>"


def deferred_module(module: str) -> Any:
    """``deferred_module("rankwise.metrics.trec").iprec_at_recall``: a :class:`Deferred` of that
    function.

    Example:
        >>> deferred_module("math").sqrt(9.0)
        3.0
    """
    return _DeferredModule(module)


class _DeferredModule:
    """Attribute access gives a :class:`Deferred` of the module's function of that name."""

    def __init__(self, module: str):
        self._module = module

    def __getattr__(self, attr: str) -> Deferred:
        return Deferred(self._module, attr)
