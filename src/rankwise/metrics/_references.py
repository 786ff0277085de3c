"""Formula and citation of every registered metric (as ranx documents each metric): shown by
``rankwise metrics NAME`` and in docs/metrics.md, checked complete by tests/metrics/test_registry.py.

Notation: ``rel_i`` 1 if the item at rank i is relevant (grade >= the relevance level), ``g_i`` its grade,
``R`` the number of relevant judgements, ``k`` the cutoff, ``|ret|`` the items retrieved.

Example:
    >>> formula, reference = REFERENCES["ndcg"]
    >>> reference.split(",")[0]
    'Järvelin & Kekäläinen'
"""

from __future__ import annotations

_TREC = "trec_eval 10.0 (NIST, Buckley et al.), its measure's source file"
_TREC_BOOK = "Voorhees & Harman, TREC: Experiment and Evaluation in Information Retrieval, MIT Press 2005"
_JK = "Järvelin & Kekäläinen, Cumulated gain-based evaluation of IR techniques, ACM TOIS 20(4), 2002"
_BURGES = "Burges et al., Learning to rank using gradient descent, ICML 2005"
_BV = "Buckley & Voorhees, Retrieval evaluation with incomplete information, SIGIR 2004"
_RBP = "Moffat & Zobel, Rank-biased precision for measurement of retrieval effectiveness, ACM TOIS 27(1), 2008"
_ERR = "Chapelle, Metzler, Zhang & Grinspan, Expected reciprocal rank for graded relevance, CIKM 2009"
_NERR = ("Azzopardi, Mackenzie & Moffat, ERR is not C/W/L: exploring the relationship between expected "
         "reciprocal rank and other metrics, ICTIR 2021")
_RAGAS = "Es et al., Ragas: automated evaluation of retrieval augmented generation, EACL 2024 (context precision)"
_RANKWISE = "rankwise, docs/context-metrics.md"
_PREFS = ("Carterette & Bennett, Evaluation measures for preference judgments, SIGIR 2008; trec_eval's "
          "m_prefs_*.c")
_JG = "trec_eval 10.0, judgement groups (qrels_jg), m_*_avgjg.c"
_YILMAZ = "Yilmaz & Aslam, Estimating average precision with incomplete and imperfect judgments, CIKM 2006"
_SAKAI = "Sakai, Alternatives to bpref, SIGIR 2007 (relative precision; the set-based variants of trec_eval)"
_YAAP = "Robertson, A new interpretation of average precision, SIGIR 2008; trec_eval m_yaap.c"
_MANNING = "Manning, Raghavan & Schütze, Introduction to Information Retrieval, CUP 2008, ch. 8"
_CALLS = ("rankwise, docs/metrics.md \"Several retrieval calls\" (multi-hop recall as asked in kibana #290921, "
          "Double-Bench #5, gfm-rag #4; no prior definition)")
_KANTOR = "Kantor & Voorhees, The TREC-5 confusion track, Information Retrieval 2(2-3), 2000 (reciprocal rank)"

REFERENCES: dict[str, tuple[str, str]] = {
    "hit_rate": ("1 if sum_{i<=k} rel_i > 0 else 0", _MANNING),
    "precision": ("sum_{i<=k} rel_i / k", _MANNING),
    "recall": ("sum_{i<=k} rel_i / R", _MANNING),
    "f1": ("2 P@k R@k / (P@k + R@k)", "van Rijsbergen, Information Retrieval, 2nd ed., Butterworths 1979"),
    "mrr": ("1 / min{i <= k : rel_i = 1} (0 if none)", _KANTOR),
    "map": ("sum_{i<=k} rel_i P@i / R", _TREC_BOOK),
    "r_precision": ("sum_{i<=R} rel_i / R", _TREC_BOOK),
    "ndcg": ("sum_{i<=k} g_i / log2(i+1) / IDCG@k", _JK),
    "ndcg_exp": ("sum_{i<=k} (2^g_i - 1) / log2(i+1) / IDCG@k", _BURGES),
    "bpref": ("1/R sum_{relevant r} (1 - min(|judged non-rel above r|, R) / min(R, N))", _BV),
    "set_P": ("sum_{i<=|ret|} rel_i / |ret|", _TREC),
    "set_recall": ("sum_{i<=|ret|} rel_i / R", _TREC),
    "set_F": ("(beta^2 + 1) P R / (beta^2 P + R) over the whole list", "van Rijsbergen 1979; " + _TREC),
    "wcp": ("sum_{i<=k} w_i rel_i / sum_{i<=k} w_i, w_i the decay (log 1/log2(i+1), linear 1/i, rbp p^(i-1), "
            "power i^-a, flat, curve)", _RANKWISE),
    "acp": ("sum_{i<=k} P@i rel_i / sum_{i<=k} rel_i (ragas_compat=true: + 1e-10 in the denominator)", _RAGAS),
    "context_recall": ("reference passages found in the top k / reference passages", _RAGAS + "; " + _RANKWISE),
    "char_recall": ("|reference characters covered by the top-k spans| / |reference characters|", _RANKWISE),
    "f1_wcp": ("2 wcp@k CR@k / (wcp@k + CR@k)", _RANKWISE),
    "f1_acp": ("2 acp@k CR@k / (acp@k + CR@k)", _RANKWISE),
    "id_precision": ("|distinct relevant ids retrieved| / |distinct ids retrieved|",
                     "DeepEval / Ragas id-based context precision; " + _RANKWISE),
    "id_recall": ("|gold ids retrieved| / |gold ids|", "Ragas IDBasedContextRecall; " + _RANKWISE),
    "num_q": ("number of queries evaluated", _TREC),
    "num_ret": ("|ret|", _TREC),
    "num_rel": ("R", _TREC),
    "num_rel_ret": ("sum_{i<=|ret|} rel_i", _TREC),
    "iprec_at_recall": ("max_{i : recall@i >= r} P@i", _TREC_BOOK),
    "11pt_avg": ("1/11 sum_{r in 0, 0.1, ..., 1} iprec_at_recall(r)", _TREC_BOOK),
    "gm_map": ("exp(mean_q log(max(AP_q, 1e-5)))",
               "Robertson, On GMAP: and other transformations, CIKM 2006; " + _TREC),
    "gm_bpref": ("exp(mean_q log(max(bpref_q, 1e-5)))", _BV + "; " + _TREC),
    "inf_ap": ("E[AP] estimated from a uniform sample of the judged pool", _YILMAZ),
    "Rprec_mult": ("sum_{i<=m R} rel_i / (m R)", _TREC),
    "set_map": ("(sum_{i<=|ret|} rel_i)^2 / (|ret| R)", _TREC),
    "set_relative_P": ("sum_{i<=|ret|} rel_i / min(|ret|, R)", _SAKAI),
    "relative_P": ("sum_{i<=k} rel_i / min(k, R)", _SAKAI),
    "utility": ("a relret + b nonrelret + c relmissed + d nonrelmissed",
                "Hull & Robertson, The TREC-8 filtering track final report, TREC 1999; " + _TREC),
    "num_nonrel_judged_ret": ("judged non-relevant items retrieved", _TREC),
    "ndcg_gains": ("nDCG over the whole list with gains from a map of grades", _JK + "; " + _TREC),
    "ndcg_rel": ("mean over relevant ranks r of nDCG@r", _TREC),
    "Rndcg": ("mean of nDCG at the ends of the ideal ranking's grade levels", _TREC),
    "ndcg_p": ("sum_i g_i / max(1, log2 i) / IDCG, the original discount", _JK),
    "dcg": ("sum_i g_i / log2(i+1)", _JK),
    "ideal_dcg": ("DCG of the grades sorted descending", _JK),
    "G": ("normalized gain: sum_i g_i / sum_i ideal g_i up to the list's length", _TREC),
    "binG": ("1/R sum_{relevant r} 1 / log2(2 + non-relevant above r)", _TREC),
    "rbp": ("(1 - p) sum_i g_i p^(i-1)", _RBP),
    "rbp_resid": ("(1 - p) sum_{unjudged i} p^(i-1) + p^|ret|", _RBP),
    "unj": ("unjudged items in the top k / k", _TREC),
    "judged": ("judged items in the top k / k", "ir_measures Judged@k (MacAvaney et al., ECIR 2022)"),
    "yaap": ("log((1 + S) / (1 + R - S)), S = sum_{relevant r} P@r / ... (trec_eval m_yaap.c)", _YAAP),
    "relstring": ("the grades of the first N items as text", _TREC),
    "err": ("sum_i 1/i R_i prod_{j<i} (1 - R_j), R_i = (2^g_i - 1) / 2^g_max", _ERR),
    "nerr8": ("ERR normalised as in eq. 8, truncated at k", _NERR),
    "nerr9": ("ERR normalised as in eq. 9, rank-discounted, truncated at k", _NERR),
    "prefs_num_prefs_poss": ("preferences possible", _PREFS),
    "prefs_num_prefs_ful": ("preferences fulfilled (implied ones included)", _PREFS),
    "prefs_num_prefs_ful_ret": ("preferences fulfilled, both documents retrieved", _PREFS),
    "prefs_simp": ("fulfilled / possible preferences over all judgement groups", _PREFS),
    "prefs_pair": ("mean over document pairs of the fulfilled share", _PREFS),
    "prefs_avgjg": ("mean over judgement groups of fulfilled / possible", _PREFS),
    "prefs_avgjg_Rnonrel": ("prefs_avgjg with non-relevant documents counted as R", _PREFS),
    "prefs_simp_ret": ("prefs_simp over pairs with both documents retrieved", _PREFS),
    "prefs_pair_ret": ("prefs_pair over pairs with both documents retrieved", _PREFS),
    "prefs_avgjg_ret": ("prefs_avgjg over pairs with both documents retrieved", _PREFS),
    "prefs_avgjg_Rnonrel_ret": ("prefs_avgjg_Rnonrel over retrieved documents", _PREFS),
    "prefs_simp_imp": ("prefs_simp without pairs where neither document is retrieved", _PREFS),
    "prefs_pair_imp": ("prefs_pair without pairs where neither document is retrieved", _PREFS),
    "prefs_avgjg_imp": ("prefs_avgjg without pairs where neither document is retrieved", _PREFS),
    "map_avgjg": ("mean over judgement groups of AP", _JG),
    "P_avgjg": ("mean over judgement groups of P@k", _JG),
    "Rprec_mult_avgjg": ("mean over judgement groups of Rprec_mult", _JG),
    "per_call": ("M@k on call c's ranked list alone (undefined when the case made fewer than c + 1 calls)", _CALLS),
    "call_mean": ("(1 / n_calls) sum_c M@k(call c)", _CALLS),
    "merged": ("M@k on merge(calls, order, dedup): interleave = rank 1 of every call, then rank 2, ...; "
               "score = by score; duplicates (same id, or overlapping span) kept once", _CALLS),
    "evidence_coverage": ("|union_c found(call c, top k)| / R", _CALLS),
    "all_hops_covered": ("prod_h [some reference passage of hop h in union_c found(call c, top k)]", _CALLS),
    "calls_to_evidence": ("min{n : |union_{c<n} found(call c, top k)| = R} (undefined if never, or R = 0)",
                          _CALLS),
    "call_redundancy": ("sum_c |{chunks of call c's top k seen in calls < c}| / sum_c |top k of call c|",
                        _CALLS),
}
