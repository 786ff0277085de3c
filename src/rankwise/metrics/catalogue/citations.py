"""Where each metric is defined: the works the catalogue's declarations cite (as ranx documents each
metric).

Notation of the formulas: ``rel_i`` 1 if the item at rank i is relevant (grade >= the relevance
level), ``g_i`` its grade, ``R`` the number of relevant judgements, ``k`` the cutoff, ``|ret|`` the
items retrieved.

Example:
    >>> JK.split(",")[0]
    'Järvelin & Kekäläinen'
"""

from __future__ import annotations

TREC = "trec_eval 10.0 (NIST, Buckley et al.), its measure's source file"
TREC_BOOK = "Voorhees & Harman, TREC: Experiment and Evaluation in Information Retrieval, MIT Press 2005"
JK = "Järvelin & Kekäläinen, Cumulated gain-based evaluation of IR techniques, ACM TOIS 20(4), 2002"
BURGES = "Burges et al., Learning to rank using gradient descent, ICML 2005"
BV = "Buckley & Voorhees, Retrieval evaluation with incomplete information, SIGIR 2004"
RBP = "Moffat & Zobel, Rank-biased precision for measurement of retrieval effectiveness, ACM TOIS 27(1), 2008"
ERR = "Chapelle, Metzler, Zhang & Grinspan, Expected reciprocal rank for graded relevance, CIKM 2009"
NERR = ("Azzopardi, Mackenzie & Moffat, ERR is not C/W/L: exploring the relationship between expected "
        "reciprocal rank and other metrics, ICTIR 2021")
RAGAS = ("Es et al., Ragas: automated evaluation of retrieval augmented generation, EACL 2024 "
         "(context precision)")
RANKWISE = "rankwise, docs/context-metrics.md"
PREFS = ("Carterette & Bennett, Evaluation measures for preference judgments, SIGIR 2008; trec_eval's "
         "m_prefs_*.c")
JG = "trec_eval 10.0, judgement groups (qrels_jg), m_*_avgjg.c"
YILMAZ = "Yilmaz & Aslam, Estimating average precision with incomplete and imperfect judgments, CIKM 2006"
SAKAI = "Sakai, Alternatives to bpref, SIGIR 2007 (relative precision; the set-based variants of trec_eval)"
YAAP = "Robertson, A new interpretation of average precision, SIGIR 2008; trec_eval m_yaap.c"
MANNING = "Manning, Raghavan & Schütze, Introduction to Information Retrieval, CUP 2008, ch. 8"
CALLS = ("rankwise, docs/metrics.md \"Several retrieval calls\" (multi-hop recall as asked in "
         "kibana #290921, Double-Bench #5, gfm-rag #4; no prior definition)")
KANTOR = "Kantor & Voorhees, The TREC-5 confusion track, Information Retrieval 2(2-3), 2000 (reciprocal rank)"
