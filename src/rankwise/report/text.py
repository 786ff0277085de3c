"""Plain-text renderings of an :class:`EvalResult`: JSON, CSV and trec_eval's layout."""

from __future__ import annotations

import csv
import io
import json

from rankwise.metrics.engine import EvalResult

__all__ = ["to_json", "to_csv", "to_trec", "indented_json"]


def to_json(result: EvalResult, *, per_query: bool = False, indent: int | None = 2) -> str:
    """``{"summary": ..., "mean": {name: value}, "per_query": {qid: {name: value}}}``."""
    obj = result.to_json(per_query=per_query)
    return json.dumps(obj) if indent is None else indented_json(obj, indent)


def indented_json(obj, indent: int = 2, level: int = 0) -> str:
    """``json.dumps(obj, indent=indent)``, the same text, with every object or array of plain
    values written by the C encoder (the indented Python encoder walks item by item: a fifth of a
    second for a summary naming 50,000 cases).

    Example:
        >>> obj = {"a": [1, 2.5, None], "b": {"c": "x", "d": {}}, "e": []}
        >>> indented_json(obj) == json.dumps(obj, indent=2)
        True
    """
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(obj, dict):
        items, opening, closing = obj.values(), "{", "}"
    elif isinstance(obj, (list, tuple)):
        items, opening, closing = obj, "[", "]"
    else:
        return json.dumps(obj)
    if not obj:
        return opening + closing
    if not any(isinstance(v, (dict, list, tuple)) for v in items):
        body = json.dumps(obj, separators=(",\n" + inner, ": "))[1:-1]
    elif isinstance(obj, dict):
        if not all(isinstance(key, str) for key in obj):  # the encoder's own key rules
            return json.dumps(obj, indent=indent).replace("\n", "\n" + pad)
        body = (",\n" + inner).join(f"{json.dumps(key)}: {indented_json(v, indent, level + 1)}" for key, v in obj.items())
    else:
        body = (",\n" + inner).join(indented_json(v, indent, level + 1) for v in obj)
    return f"{opening}\n{inner}{body}\n{pad}{closing}"


def to_csv(result: EvalResult, *, per_query: bool = False) -> str:
    """Long format: ``query_id,metric,value`` (``all`` for means)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["query_id", "metric", "value"])
    if per_query:
        for qid in result.per_query:
            for name, value in result.per_query[qid].items():
                w.writerow([qid, name, "" if value is None else repr(value)])
    for name, value in result.mean.items():
        w.writerow(["all", name, "" if value is None else repr(value)])
    return buf.getvalue()


def _trec_value(measure, value: float, z: bool = False) -> str:
    if measure.metric.aggregate == "sum" and not z:  # with -Z, trec_eval prints counts' z-scores as %6.4f
        return str(int(round(value)))
    return f"{value:6.4f}"


# trec_eval prints these only in the summary (num_q, gm_*) or only per query (relstring)
_SUMMARY_ONLY = ("num_q",)


# trec_eval 10.0's measure table (measures.c): it prints in this order, whatever the order of -m
_TREC_ORDER = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg",
    "binG", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P",
    "success", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "yaap",
    "rbp", "rbp_resid", "unj",
    # preference and judgement-group measures (metrics/prefs.py, metrics/jg.py)
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair",
    "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp", "map_avgjg", "P_avgjg",
    "Rprec_mult_avgjg",
)


def _trec_sort_key(item: tuple[int, object, str]) -> tuple:
    """(position in trec_eval's table, its parameter, asked order); names trec_eval lacks go last.
    """
    position, measure, tname = item
    base = max((b for b in _TREC_ORDER if tname == b or tname.startswith(b + "_")), key=len, default=None)
    if base is None or measure.trec_name is None:
        return (len(_TREC_ORDER), 0.0, position)
    rest = tname[len(base) + 1:]
    try:
        param = float(rest) if rest else 0.0
    except ValueError:
        param = 0.0
    return (_TREC_ORDER.index(base), param, position)


def to_trec(result: EvalResult, *, per_query: bool = False) -> str:
    """trec_eval's layout: ``%-22s\\t%s\\t%6.4f`` per line, per-query blocks first, ``all`` last.

    As trec_eval 10.0: measures in trec_eval's table order (then those it has no name for, as
    asked), ``runid`` first on the ``all`` lines when it was asked for (``result.runid``: the run
    file's tag), counts as integers, geometric means (``gm_map``, ``gm_bpref``) and ``num_q`` only
    on the ``all`` line, ``relstring`` only per query, quoted. Measures trec_eval has no name for
    keep rankwise's canonical name. A result z-scored by ``-Z`` (metrics/zscores.py) prints a ``Z``
    before each measure name (not runid's, nor relstring's texts) and its counts as ``%6.4f``, as
    trec_eval does.
    """
    z = "Z" if "zscores" in result.summary else ""
    lines = []
    ordered = sorted(((i, m, m.trec_name or m.name) for i, m in enumerate(result.measures)), key=_trec_sort_key)
    names = [(m, tname) for _, m, tname in ordered]
    if per_query:
        for i, qid in enumerate(result.per_query):
            row = result.per_query[qid]
            for m, tname in names:
                if m.metric.name in _SUMMARY_ONLY or m.metric.aggregate == "gmean":
                    continue
                if m.name in result.texts:
                    lines.append(f"{tname:<22s}\t{qid}\t'{result.texts[m.name][i]}'")
                    continue
                v = row[m.name]
                lines.append(f"{z}{tname:<22s}\t{qid}\t{'nan' if v is None else _trec_value(m, v, bool(z))}")
    if result.runid is not None:  # as trec_eval: only when asked (runid, official, set, all_trec, no -m)
        lines.append(f"{'runid':<22s}\tall\t{result.runid}")
    for m, tname in names:
        if m.name in result.texts:
            continue
        value = result.mean[m.name]
        if m.metric.name == "num_rel" and "num_rel_all_trec_eval" in result.summary:
            # trec_eval -c: num_rel's `all` counts every judgement with grade > 0, whatever -l says
            value = result.summary["num_rel_all_trec_eval"]
        lines.append(f"{z}{tname:<22s}\tall\t{_trec_value(m, value, bool(z))}")
    return "\n".join(lines) + "\n"
