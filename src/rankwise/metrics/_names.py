"""What the registry must know of trec_eval's measures before any of them is computed: the
measure-set nicknames (``official``, ``all_trec``, ``all_prefs``, ``qrels_jg`` ...), the preference
measures' one-line descriptions and aggregates, and the error a malformed measure parameter raises.

Kept apart from ``trec.py``, ``prefs.py`` and ``jg.py`` (which re-export these names) so that
parsing metric names, and ``rankwise eval`` of the common measures, imports none of those modules.

Example:
    >>> "P.5,10,15,20,30,100,200,500,1000" in TREC_NICKNAMES["official"]
    True
"""

from __future__ import annotations

from rankwise.errors import MeasureParamError

__all__ = ["TREC_NICKNAMES", "PREFS_NICKNAMES", "JG_NICKNAMES", "PREFS_MEASURES", "MeasureParamError"]


_CUTS = "5,10,15,20,30,100,200,500,1000"
# trec_eval's measure nicknames (measures.c), spelled out with its default parameters
TREC_NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", f"P.{_CUTS}"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P",
            "set_map", "set_F"),
}
TREC_NICKNAMES["all_trec"] = (
    *TREC_NICKNAMES["official"], "relstring", f"recall.{_CUTS}", "unj.5,10,20", "rbp", "rbp_resid", "infAP",
    "gm_bpref", "utility", "11pt_avg", "ndcg", f"relative_P.{_CUTS}",
    "Rprec_mult.0.2,0.4,0.6,0.8,1.0,1.2,1.4,1.6,1.8,2.0", "success.1,5,10", f"map_cut.{_CUTS}", f"ndcg_cut.{_CUTS}",
    "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F",
    "num_nonrel_judged_ret",
)

# the preference measures (metrics/prefs.py): name -> (one-line formula, aggregate), in trec_eval's
# order
PREFS_MEASURES: dict[str, tuple[str, str]] = {
    "prefs_num_prefs_poss": ("preferences possible (both documents retrieved or not)", "sum"),
    "prefs_num_prefs_ful": ("preferences fulfilled, implied ones (only A retrieved) included", "sum"),
    "prefs_num_prefs_ful_ret": ("preferences fulfilled with both documents retrieved", "sum"),
    "prefs_simp": ("fulfilled / possible preferences, over all JGs", "mean"),
    "prefs_pair": ("mean over document pairs of the JGs' fulfilled share", "mean"),
    "prefs_avgjg": ("fulfilled / possible per JG, averaged over JGs", "mean"),
    "prefs_avgjg_Rnonrel": ("prefs_avgjg with each JG's non-relevant documents set to R", "mean"),
    "prefs_simp_ret": ("prefs_simp over pairs with both documents retrieved", "mean"),
    "prefs_pair_ret": ("prefs_pair over pairs with both documents retrieved", "mean"),
    "prefs_avgjg_ret": ("prefs_avgjg over pairs with both documents retrieved", "mean"),
    "prefs_avgjg_Rnonrel_ret": ("prefs_avgjg_Rnonrel over retrieved documents", "mean"),
    "prefs_simp_imp": ("prefs_simp ignoring pairs with neither document retrieved", "mean"),
    "prefs_pair_imp": ("prefs_pair ignoring pairs with neither document retrieved", "mean"),
    "prefs_avgjg_imp": ("prefs_avgjg ignoring pairs with neither document retrieved", "mean"),
}
_ALL = tuple(PREFS_MEASURES)
PREFS_NICKNAMES: dict[str, tuple[str, ...]] = {
    "all_prefs": ("runid", "num_q", *_ALL),
    "prefs": ("runid", "num_q", *_ALL[:6]),
}
JG_NICKNAMES: dict[str, tuple[str, ...]] = {
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg.5,10,15,20,30,100,200,500,1000",
                 "Rprec_mult_avgjg.0.2,0.4,0.6,0.8,1.0,1.2,1.4,1.6,1.8,2.0"),
}
