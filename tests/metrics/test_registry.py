"""The metric registry: canonical names, aliases, cutoffs, parameters, trec_eval names, suggestions.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.metrics import METRICS, RelevanceMatrix, known_names, parse_measure, parse_measures


@pytest.mark.parametrize(("name", "canonical", "k", "trec"), [
    ("ndcg@10", "ndcg@10", 10, "ndcg_cut_10"),
    ("ndcg_cut_10", "ndcg@10", 10, "ndcg_cut_10"),
    ("ndcg_cut.10", "ndcg@10", 10, "ndcg_cut_10"),
    ("nDCG@10", "ndcg@10", 10, "ndcg_cut_10"),
    ("ndcg", "ndcg", None, "ndcg"),
    ("P_5", "precision@5", 5, "P_5"),
    ("P@5", "precision@5", 5, "P_5"),
    ("precision@5", "precision@5", 5, "P_5"),
    ("recall_100", "recall@100", 100, "recall_100"),
    ("R@100", "recall@100", 100, "recall_100"),
    ("success_3", "hit_rate@3", 3, "success_3"),
    ("hit_rate@3", "hit_rate@3", 3, "success_3"),
    ("recip_rank", "mrr", None, "recip_rank"),
    ("mrr@10", "mrr@10", 10, "recip_rank_10"),
    ("map", "map", None, "map"),
    ("AP", "map", None, "map"),
    ("map_cut_100", "map@100", 100, "map_cut_100"),
    ("map@100", "map@100", 100, "map_cut_100"),
    ("Rprec", "r_precision", None, "Rprec"),
    ("bpref", "bpref", None, "bpref"),
    ("f1@5", "f1@5", 5, "f1_5"),
    ("ndcg_exp@10", "ndcg_exp@10", 10, None),
    ("num_rel_ret", "num_rel_ret", None, "num_rel_ret"),
    ("wcp(decay=linear)@3", "wcp(decay=linear)@3", 3, None),
    ("wcp(decay=log)@3", "wcp@3", 3, None),  # default parameter values are not spelled out
    ("acp(ragas_compat=true)@5", "acp(ragas_compat=true)@5", 5, None),
])
def test_names(name, canonical, k, trec):
    m = parse_measure(name)
    assert (m.name, m.k, m.trec_name) == (canonical, k, trec)
    assert parse_measure(m.name).name == canonical  # canonical names parse to themselves


@pytest.mark.parametrize(("bad", "expected_hint"), [
    ("ndgc@10", "ndcg@10"),
    ("presicion@5", "precision@5"),
    ("recal", "recall"),
    ("mmr", "mrr"),
])
def test_unknown_names_suggest(bad, expected_hint):
    with pytest.raises(InputError) as err:
        parse_measure(bad)
    assert f"unknown metric {bad!r}" in str(err.value)
    assert expected_hint in str(err.value).split("did you mean", 1)[1]
    assert err.value.field == "metric"


def test_unknown_name_without_close_match_has_no_hint():
    with pytest.raises(InputError) as err:
        parse_measure("zzzzzz")
    assert "did you mean" not in str(err.value)


@pytest.mark.parametrize(("bad", "message"), [
    ("bpref@5", "takes no cutoff"),
    ("Rprec@5", "takes no cutoff"),
    ("P@0", "cutoff must be >= 1"),
    ("wcp(decay=cubic)@3", "decay must be one of"),
    ("wcp(speed=1)@3", "has no parameter 'speed'"),
    ("ndcg(decay=log)@3", "has no parameter 'decay'"),
])
def test_invalid_forms(bad, message):
    with pytest.raises(InputError, match=message):
        parse_measure(bad)


def test_parse_measures_dedupes_aliases_keeping_order():
    names = [m.name for m in parse_measures(["P_5", "ndcg@10", "P@5", "map", "ndcg_cut_10", "AP"])]
    assert names == ["precision@5", "ndcg@10", "map"]


def test_measure_computes_on_matrix():
    m = RelevanceMatrix.from_verdicts([[0, 1, 1], [1, 0, 0]])
    assert parse_measure("P@2")(m).tolist() == [0.5, 0.5]
    assert parse_measure("success_1")(m).tolist() == [0.0, 1.0]
    assert parse_measure("num_rel_ret")(m).tolist() == [2.0, 1.0]


def test_every_metric_declared_with_description():
    for name, metric in METRICS.items():
        assert metric.name == name
        assert metric.description and len(metric.description) < 120
        assert metric.cutoff in ("optional", "required", "none")
        assert metric.aggregate in ("mean", "sum", "gmean")
    assert {"hit_rate", "precision", "recall", "f1", "mrr", "map", "r_precision", "ndcg", "ndcg_exp",
            "bpref"} <= set(METRICS)


def test_known_names_cover_aliases():
    names = known_names()
    for alias in ("recip_rank", "success", "rprec", "ap", "ndcg_cut", "P_5", "ndcg@10"):
        assert alias in names


def test_metrics_command_lists_everything():
    res = CliRunner().invoke(main, ["metrics"])
    assert res.exit_code == 0
    for name in ("hit_rate", "ndcg_exp", "bpref", "recip_rank"):
        assert name in res.output


def test_runid_is_asked_as_trec_eval_asks_it():
    from rankwise.metrics.registry import asks_runid

    assert asks_runid(None) and asks_runid([]) and asks_runid("runid") and asks_runid(["official"])
    assert asks_runid("map,set") and asks_runid(["P.5", "all_trec"]) and asks_runid(iter(["runid"]))
    assert not asks_runid(["map", "P.5,10"]) and not asks_runid(iter(["map"]))
    assert parse_measures(["runid", "map"])[0].name == "map"  # a line of the output, no metric


def test_set_F_beta_param():
    m = parse_measure("set_F.0.5")
    assert (m.name, m.trec_name, m.all_params) == ("set_F(beta=0.5)", "set_F_0.5", {"beta": 0.5})
    assert parse_measure("set_F.1.0").trec_name == "set_F_1.0"  # trec_eval prints the parameter as written
    assert parse_measure("set_F(beta=2)").trec_name == "set_F_2"
    assert parse_measure("set_F_0.25").name == "set_F(beta=0.25)"
    assert [x.name for x in parse_measures(["set_F.0.5,2"])] == ["set_F(beta=0.5)", "set_F(beta=2.0)"]
    for bad in ("set_F.0", "set_F.-1", "set_F(beta=inf)", "set_F(beta=x)"):
        with pytest.raises(InputError, match="beta must be"):
            parse_measure(bad)


def test_every_metric_has_formula_and_reference():
    """Each registered metric carries its formula and a citation (shown by `rankwise metrics NAME`).
    """
    from rankwise.metrics.registry import METRICS

    missing = [n for n, m in METRICS.items() if not (m.formula and m.reference)]
    assert missing == []
    assert METRICS["ndcg"].reference.startswith("Järvelin & Kekäläinen")
    assert METRICS["rbp"].reference.startswith("Moffat & Zobel")
    assert METRICS["err"].reference.startswith("Chapelle")
    assert "Ragas" in METRICS["acp"].reference


def test_metrics_name_shows_formula_and_citation():
    """`rankwise metrics NAME` (any spelling a command accepts) shows the formula and the citation.
    """
    from click.testing import CliRunner

    from rankwise.cli import main

    r = CliRunner().invoke(main, ["--width", "200", "metrics", "nDCG@10"])
    assert r.exit_code == 0, r.output
    assert "rankwise metric ndcg" in r.output
    assert "sum_{i<=k} g_i / log2(i+1) / IDCG@k" in r.output
    assert "Järvelin & Kekäläinen" in r.output
    r = CliRunner().invoke(main, ["metrics", "ndgc"])
    assert r.exit_code == 2 and "did you mean" in r.output


def test_metric_cards_print_the_registry_text_as_is():
    """`rankwise metrics NAME` shows each formula and reference verbatim (brackets are not console
    markup), cites nothing an installed user lacks, and acp's formula is rankwise's default (no eps
    unless ragas_compat)."""
    import re

    from _inprocess import run_cli
    from rankwise.metrics.registry import lookup_metric

    for name in ("all_hops_covered", "acp", "wcp", "ndcg"):
        m = lookup_metric(name)
        out = run_cli(["metrics", name], overrides={"RANKWISE_WIDTH": "400"})
        assert out.returncode == 0, out.stderr
        flat = re.sub(r"\s+", " ", re.sub(r"[│┃]", " ", out.stdout))
        assert m.formula in flat, (name, m.formula)
        assert m.reference in flat and "shared/SPEC" not in flat
    assert "prod_h [some reference passage of hop h" in lookup_metric("all_hops_covered").formula
    assert "eps" not in lookup_metric("acp").formula


def test_the_catalogue_holds_every_declaration_and_the_registry_none():
    """metrics/registry.py is machinery only; each built-in metric is declared once, in a catalogue
    module, with its formula, citation and (for bounded metrics) range in the declaration itself."""
    import ast
    import importlib
    from pathlib import Path

    import rankwise.metrics.registry as registry
    from rankwise.metrics.catalogue import CATALOGUE

    source = Path(registry.__file__).read_text(encoding="utf-8")
    calls = [n for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Metric"]
    assert calls == []
    assert [m.name for m in CATALOGUE] == list(registry.METRICS)[:len(CATALOGUE)]
    families = ["ir", "context", "trec", "preferences", "calls"]
    owner: dict[str, str] = {}
    for family in families:
        module = importlib.import_module(f"rankwise.metrics.catalogue.{family}")
        for name in module.__all__:
            for m in getattr(module, name):
                if hasattr(m, "compute"):
                    assert m.name not in owner, (m.name, owner.get(m.name), family)
                    owner[m.name] = family
    assert sorted(owner) == sorted(m.name for m in CATALOGUE)
    assert all(m.formula and m.reference for m in CATALOGUE)
    assert {"ndcg", "wcp", "acp", "per_call"} <= registry.UNIT_RANGE and "dcg" in registry.NONNEGATIVE
    assert registry.METRICS["calls_to_evidence"].value_range == (1.0, float("inf"))
