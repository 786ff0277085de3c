"""rankwise synth against a real loopback generation server (tests/synth_server.py): verified spans,
rejections counted by reason, duplicates removed, resume after kill -9, dry-run estimates, cost cap,
language, and one generated set scoring two chunkings of the Kestrel corpus."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from _forked import cli_popen
from _inprocess import run_cli
from rankwise.data.corpus import Corpus, load_corpus
from rankwise.llm.cost import Prices
from rankwise.testsets.synth_run import SynthSettings, estimate_synth, plan_samples, synth

REPO = Path(__file__).resolve().parents[2]
KESTREL = REPO / "src" / "rankwise" / "datasets" / "kestrel" / "corpus.jsonl"
STYLES = {"factual": 0.5, "paraphrase": 0.3, "multi": 0.1, "conversational": 0.1}


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from synth_server import running_server

    with running_server() as srv:
        yield srv


@pytest.fixture
def g(gen):
    gen.reset()
    gen.configure(latency=0.0)
    return gen


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(args)  # in-process (tests/_inprocess.py); the kill -9 test below runs a process
    if check and proc.returncode != 0:
        raise AssertionError(f"rankwise {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def test_kestrel_set_has_verified_spans_and_counted_rejections(g, tmp_path):
    corpus = load_corpus(KESTREL)
    out = tmp_path / "ts.jsonl"
    settings = SynthSettings(n=90, styles=STYLES, seed=3)
    s = synth(corpus, out=out, model="gen", base_url=g.base_url, settings=settings, cache=tmp_path / "c.sqlite",
              price_in=1.0, price_out=2.0)
    stats = g.stats()
    b = Counter(stats["behaviours"])
    accepted = rows(out)
    rejected = rows(tmp_path / "ts.rejected.jsonl")
    # every planned sample is decided exactly once, in one of the two files
    assert sorted(r["provenance"]["slot"] for r in accepted + rejected) == list(range(90))
    assert s.accepted == len(accepted) and sum(s.rejected.values()) == len(rejected) == 90 - len(accepted)
    # every reference is a verified span of its document
    for r in accepted:
        assert r["reference_contexts"]
        for ref in r["reference_contexts"]:
            assert corpus[ref["doc_id"]].text[ref["start"]:ref["end"]] == ref["text"]
        prov = r["provenance"]
        assert {"model", "prompt_version", "style", "seed", "passages", "located"} <= set(prov)
        assert prov["model"] == "gen" and prov["seed"] == 3 and prov["style"] == r["style"]
        assert r["language"] == "en" and r["difficulty"] in ("easy", "hard", "unretrieved")
        assert (r["difficulty"] == "easy") == (r["bm25_rank"] == 1)
        assert 0.0 <= r["lexical_overlap"] <= 1.0
        if r["style"] == "conversational":
            assert r["history"] and r["history"][0]["question"]
        if r["style"] == "multi":
            assert len({ref["doc_id"] for ref in r["reference_contexts"]}) == 2
    # rejections by reason match what the server did, one for one
    rej = Counter(r["reason"] for r in rejected)
    assert rej == s.rejected
    assert rej["quote_not_found"] == b["wrong"] + b["paraphrased"] > 0
    assert rej["not_answerable"] == b["refusal"] + b["nosentence"] > 0
    assert rej["answer_in_question"] == b["giveaway"] > 0
    assert rej["multi_one_passage"] == b["onepassage"]
    assert rej["duplicate"] == b["duplicate"] - 1 > 0  # the first one is kept
    assert rej["call_failed"] == 0 and stats["faults"]  # 429/500 were retried
    # every rejection says why, and carries the question when the reply asked one
    assert all("question" in r and r["detail"] for r in rejected), [r for r in rejected if not r["detail"]][:2]
    asked = [r for r in rejected if r["reason"] in ("quote_not_found", "answer_in_question", "multi_one_passage",
                                                     "duplicate")]
    assert asked and all(isinstance(r["question"], str) and r["question"].strip() for r in asked)
    kept = {r["id"]: r["user_input"] for r in accepted}
    for r in rejected:
        if r["reason"] == "duplicate":  # names the accepted sample it repeats
            oid = r["detail"].split("with accepted sample ")[1].split(":")[0].strip("'")
            assert r["detail"].startswith("Jaccard ") and oid in kept
        if r["reason"] == "multi_one_passage":
            assert r["detail"].startswith("every quote comes from passage ")
    # reflowed quotes (doubled spaces, curly quotes) are found by the normalised match
    assert b["reflowed"] > 0
    assert sum(r["provenance"]["located"].count("normalised") for r in accepted) >= 1
    assert set(Counter(r["style"] for r in accepted)) == set(STYLES)
    assert sum(s.difficulty.values()) == s.accepted and s.difficulty["easy"] > 0
    # stratified: no document over its share
    assert s.max_per_document <= math.ceil(90 / len(corpus))
    assert s.calls == stats["generations"] == 90 and s.cost == pytest.approx(
        (s.prompt_tokens * 1.0 + s.completion_tokens * 2.0) / 1e6)
    # the file is a query set for `rankwise run` (which adds the retrieved contexts eval-rag scores)
    from rankwise.data.corpus import load_queries

    assert load_queries(out) == {r["id"]: r["user_input"] for r in accepted}


def test_plan_is_stratified_and_styles_follow_shares():
    corpus = load_corpus(KESTREL)
    slots = plan_samples(corpus, SynthSettings(n=76, styles=STYLES))
    per_doc = Counter(s.passages[0].doc_id for s in slots)
    assert max(per_doc.values()) == 2 and len(per_doc) == 38
    assert Counter(s.style for s in slots) == {"factual": 38, "paraphrase": 23, "multi": 8, "conversational": 7}
    for s in slots:
        if s.style == "multi":
            assert len(s.passages) == 2 and s.passages[0].doc_id != s.passages[1].doc_id
    assert [s.passages for s in slots] == [s.passages for s in plan_samples(corpus, SynthSettings(n=76, styles=STYLES))]


def test_dry_run_matches_the_real_run_within_10_percent(g, tmp_path):
    corpus = load_corpus(KESTREL)
    settings = SynthSettings(n=60, styles=STYLES, seed=1)
    est = estimate_synth(corpus, settings, model="gen", prices=Prices(1.0, 2.0), cache=tmp_path / "c.sqlite")
    s = synth(corpus, out=tmp_path / "ts.jsonl", model="gen", base_url=g.base_url, settings=settings,
              cache=tmp_path / "c.sqlite", price_in=1.0, price_out=2.0)
    requests, faults = g.stats()["requests"], sum(g.stats()["faults"].values())
    assert est.phases["generate"]["calls"] == s.calls == 60
    # the estimate is the calls exactly; the requests add one retry per 429/500 the server gave
    # (which conversations get one is a hash of the prompt: 4 to 7 of these 60)
    assert requests - faults == est.calls and faults <= 0.12 * est.calls
    est_prompt = est.phases["generate"]["prompt_tokens"]
    assert abs(est_prompt - s.prompt_tokens) <= 0.1 * s.prompt_tokens
    # the CLI prints every phase; after the run, everything is cached or done: 0 calls left
    proc = cli("synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "60", "--seed", "1",
               "--styles", "factual=0.5,paraphrase=0.3,multi=0.1,conversational=0.1", "--cache",
               str(tmp_path / "c.sqlite"), "--dry-run", "--json", "--out", str(tmp_path / "ts.jsonl"))
    plan = json.loads(proc.stdout)
    assert plan["calls"] == 0 and plan["already_done"] == 60
    proc = cli("synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "60", "--seed", "1",
               "--critic", "--styles", "factual=0.5,paraphrase=0.3,multi=0.1,conversational=0.1", "--cache",
               str(tmp_path / "other.sqlite"), "--dry-run", "--price-in", "1", "--price-out", "2")
    assert "generate" in proc.stdout and "critic" in proc.stdout and "bm25 difficulty" in proc.stdout
    assert " 120 calls" in proc.stdout


def test_killed_run_resumes_without_repeating_a_call(g, tmp_path):
    g.configure(latency=0.05)
    out = tmp_path / "ts.jsonl"
    args = ["synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "50", "--styles",
            "factual=0.6,paraphrase=0.2,multi=0.1,conversational=0.1", "--cache", str(tmp_path / "c.sqlite"),
            "--out", str(out), "--concurrency", "2", "--quiet"]
    proc = cli_popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 8):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = g.stats()
    complete = out.read_text(encoding="utf-8").split("\n")[:-1]  # a line cut by the kill is not counted
    assert 8 <= len(complete) < 50 and before["generations"] < 50
    g.configure(latency=0.0)
    done = cli(*args)
    after = g.stats()
    # only the calls in flight at the kill (at most --concurrency) are asked again; every reply the
    # killed run received was in the cache and is not paid for twice
    assert after["repeated"] <= 2
    assert after["generations"] - after["repeated"] == 50
    assert "decided by an earlier run" in done.stdout
    # the resumed set is the set an uninterrupted run writes
    g.reset()
    fresh = tmp_path / "fresh.jsonl"
    cli(*[a if a != str(out) else str(fresh) for a in args[:-1]], "--quiet")
    assert rows(out) == rows(fresh)


def test_max_cost_stops_cleanly_and_a_rerun_goes_on(g, tmp_path):
    out = tmp_path / "ts.jsonl"
    common = ["synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "40", "--cache",
              str(tmp_path / "c.sqlite"), "--out", str(out), "--price-in", "10", "--price-out", "10",
              "--concurrency", "4", "--quiet", "--json"]
    first = json.loads(cli(*common, "--max-cost", "0.05").stdout)
    # the summary's token fields as the judge's: cached prompt tokens too (this server reports none)
    assert first["cached_prompt_tokens"] == 0 and first["prompt_tokens"] > 0
    assert first["stopped"].startswith("max cost reached")
    assert first["cost"] <= 0.05 and 0 < first["calls"] < 40
    decided = len(rows(out)) + len(rows(tmp_path / "ts.rejected.jsonl"))
    assert decided == first["calls"]
    second = json.loads(cli(*common).stdout)
    assert second["stopped"] is None and second["calls"] == 40 - first["calls"]
    assert g.stats()["max_answered"] == 1


def test_max_calls_stops_cleanly_and_a_rerun_goes_on(g, tmp_path):
    """--max-calls caps the requests of a run exactly: a sample starts only while its calls fit
    beside the requests sent and the calls the samples in flight still hold (no retries here: every
    call one request)."""
    g.configure(faults=False)
    out = tmp_path / "ts.jsonl"
    common = ["synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "12", "--cache",
              str(tmp_path / "c.sqlite"), "--out", str(out), "--concurrency", "2", "--rpm", "6000", "--quiet"]
    first = json.loads(cli(*common, "--json", "--max-calls", "5").stdout)
    assert first["stopped"] == "max calls reached (5 calls)" and first["calls"] == g.stats()["requests"] == 5
    assert len(rows(out)) + len(rows(tmp_path / "ts.rejected.jsonl")) == 5  # the rest stays undone
    assert "call_failed" not in first["rejected"]
    text = cli(*common, "--max-calls", "5").stdout  # the cap is per run: 5 more
    assert "stopped: max calls reached (5 calls); rerun the same command (with a higher --max-calls)" in text
    assert g.stats()["requests"] == 10
    last = json.loads(cli(*common, "--json").stdout)
    assert last["stopped"] is None and last["calls"] == 2 and last["resumed"] == 10
    assert len(rows(out)) + len(rows(tmp_path / "ts.rejected.jsonl")) == 12 and g.stats()["requests"] == 12


def test_critic_sees_quotes_and_rejects_low_scores(g, tmp_path):
    corpus = load_corpus(KESTREL)
    s = synth(corpus, out=tmp_path / "ts.jsonl", model="gen", base_url=g.base_url, cache=tmp_path / "c.sqlite",
              settings=SynthSettings(n=40, critic=True))
    stats = g.stats()
    passed = s.accepted + s.rejected["critic"] + s.rejected["duplicate"]
    assert stats["critic"] == passed > 0 and s.rejected["critic"] > 0
    assert all(r["critic"]["score"] >= 3 for r in rows(tmp_path / "ts.jsonl"))


GERMAN = {
    "replikation.md": "# Replikation\n\nJede Änderung wird auf drei Knoten geschrieben, bevor sie bestätigt wird. "
                      "Der Anführer eines Bereichs sammelt die Bestätigungen und meldet dem Client den Erfolg "
                      "erst dann, wenn eine Mehrheit der Kopien die Änderung dauerhaft gespeichert hat.\n\n"
                      "Fällt ein Knoten aus, wählt die Gruppe nach wenigen Sekunden einen neuen Anführer, und "
                      "die Daten bleiben für alle Anwendungen ohne Eingriff eines Betreibers verfügbar.\n",
    "sicherung.md": "# Sicherung\n\nEine vollständige Sicherung kopiert alle Bereiche in einen externen Speicher "
                    "und wird in der Regel einmal am Tag gestartet. Zwischen zwei vollständigen Sicherungen "
                    "schreibt der Dienst die Änderungen fortlaufend in kleine Dateien, damit die Wiederherstellung "
                    "auf eine beliebige Sekunde möglich ist.\n\nDie Dateien werden mit einem Schlüssel "
                    "verschlüsselt, der nicht auf den Knoten selbst liegt und von der Sicherheitsabteilung "
                    "verwaltet wird.\n",
}


def test_non_english_corpus_gets_questions_in_its_language(g, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in GERMAN.items():
        (folder / name).write_text(text, encoding="utf-8")
    s = synth(folder, out=tmp_path / "de.jsonl", model="gen", base_url=g.base_url, cache=tmp_path / "c.sqlite",
              settings=SynthSettings(n=24, passage_chars=200, styles={"factual": 1}))
    behaviours = Counter(g.stats()["behaviours"])
    kept = rows(tmp_path / "de.jsonl")
    assert s.planned == 6  # one sample per passage: a small corpus is not sampled twice
    assert kept and all(r["language"] == "de" for r in kept)
    assert all("Dokumentation" in r["user_input"] for r in kept)
    assert s.rejected["wrong_language"] == behaviours["english"] > 0
    corpus = load_corpus(folder)
    for r in kept:
        for ref in r["reference_contexts"]:
            assert corpus[ref["doc_id"]].text[ref["start"]:ref["end"]] == ref["text"]


def test_one_generated_set_scores_two_chunkings(g, tmp_path):
    ts = tmp_path / "ts.jsonl"
    cli("synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "60", "--cache",
        str(tmp_path / "c.sqlite"), "--out", str(ts), "--quiet")
    n = len(rows(ts))
    scores = {}
    for size in (300, 1200):
        rag = tmp_path / f"rag{size}.jsonl"
        cli("run", "--corpus", str(KESTREL), "--queries", str(ts), "--chunk-size", str(size), "--out",
            str(tmp_path / f"run{size}.trec"), "--rag-out", str(rag), "--quiet")
        proc = cli("eval-rag", str(rag), "--relevance", "span", "--format", "json", "-k", "1,5,10")
        result = json.loads(proc.stdout)
        scores[size] = result
        cases = rows(rag)
        assert len(cases) == n
        assert all(c["reference_contexts"] == r["reference_contexts"] for c, r in zip(cases, rows(ts), strict=True))
    for size, result in scores.items():
        summary = result["summary"]
        assert summary["relevance"] == "span" and summary["evaluated"] == n and summary["unscorable"] == 0, size
        assert 0.3 < result["mean"]["recall@10"] <= 1.0 and 0.0 < result["mean"]["mrr"] <= 1.0
    # the chunkings differ, the labels are the same: different, comparable numbers
    assert scores[300]["mean"]["recall@10"] != scores[1200]["mean"]["recall@10"]


def test_cli_errors_are_one_line(tmp_path):
    proc = cli("synth", str(KESTREL), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--styles",
               "factual=0.5,riddles=0.5", "--out", str(tmp_path / "x.jsonl"), check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown style 'riddles'" in proc.stderr
    proc = cli("synth", str(KESTREL), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--max-cost", "1",
               "--out", str(tmp_path / "x.jsonl"), "--cache", str(tmp_path / "c.sqlite"), check=False)
    assert proc.returncode == 2 and "--max-cost needs prices" in proc.stderr
    proc = cli("synth", str(KESTREL), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "-n", "3",
               "--out", str(tmp_path / "gone.jsonl"), "--cache", str(tmp_path / "c.sqlite"), "--max-retries", "1", "--quiet",
               check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot reach the LLM endpoint" in proc.stderr
    assert "rerun the same command to resume" in proc.stderr
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "x", "user_input": "q", "provenance": {"plan": "zzz", "slot": 0}}) + "\n")
    proc = cli("synth", str(KESTREL), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(other),
               "--cache", str(tmp_path / "c.sqlite"), check=False)
    assert proc.returncode == 2 and "written by another synth run" in proc.stderr and str(other) in proc.stderr


def test_corpus_from_a_single_document_plans_no_multi():
    corpus = Corpus.from_dict({"only": "One sentence about ranges and copies here. " * 40})
    slots = plan_samples(corpus, SynthSettings(n=6, passage_chars=300, styles={"multi": 1}))
    assert {len(s.passages) for s in slots} == {2}
    assert all(s.passages[0].doc_id == s.passages[1].doc_id for s in slots)


def test_a_line_cut_by_a_kill_is_redone_from_the_cache(g, tmp_path):
    corpus = load_corpus(KESTREL)
    out = tmp_path / "ts.jsonl"
    kwargs = {"out": out, "model": "gen", "base_url": g.base_url, "cache": tmp_path / "c.sqlite",
              "settings": SynthSettings(n=12)}
    synth(corpus, **kwargs)
    whole = rows(out)
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")  # cut mid-line
    g.reset()
    s = synth(corpus, **kwargs)
    assert rows(out) == whole and s.calls == 0 and s.cached >= 1 and g.stats()["requests"] == 0


def test_failed_calls_are_not_answers_a_rerun_asks_them_again(g, tmp_path):
    """Calls that fail after their retries are counted (call_failed) and decide nothing: the rerun
    asks exactly those again, and the set it ends with is the set of a run that never failed."""
    out = tmp_path / "ts.jsonl"
    args = ["synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "20", "--cache",
            str(tmp_path / "c.sqlite"), "--out", str(out), "--max-retries", "0", "--quiet", "--json"]
    g.configure(fail_share=0.6)
    first = json.loads(cli(*args).stdout)
    failed = first["rejected"].get("call_failed", 0)
    faults = g.stats()["faults"]  # every fault is final with --max-retries 0
    assert faults["failing"] > 0 and failed == sum(faults.values())
    assert first["accepted"] + sum(first["rejected"].values()) == 20
    g.configure(fail_share=0.0)
    second = json.loads(cli(*args).stdout)
    assert second["calls"] == failed and second["resumed"] == 20 - failed
    assert "call_failed" not in second["rejected"]
    assert "call_failed" not in {r["reason"] for r in rows(tmp_path / "ts.rejected.jsonl")}
    g.reset()
    fresh = tmp_path / "fresh.jsonl"
    cli(*[a if a != str(out) else str(fresh) for a in args if a not in ("--max-retries", "0")])
    assert sorted(rows(out), key=lambda r: r["id"]) == sorted(rows(fresh), key=lambda r: r["id"])
    assert len(rows(out)) == second["accepted"]


def test_multi_hop_questions_have_one_span_per_hop_from_two_documents(g, tmp_path):
    """`rankwise synth --style multi-hop`: two passages of two documents, every reference a verified
    span tagged with its hop; the test set reads back with its hops and scores all_hops_covered."""
    corpus = load_corpus(KESTREL)
    out = tmp_path / "hops.jsonl"
    proc = cli("synth", str(KESTREL), "--style", "multi-hop", "-n", "24", "--seed", "5", "--model", "gen",
               "--base-url", g.base_url, "--cache", str(tmp_path / "c.sqlite"), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    accepted = rows(out)
    rejected = rows(tmp_path / "hops.rejected.jsonl")
    assert len(accepted) + len(rejected) == 24 and len(accepted) >= 10
    assert Counter(r["reason"] for r in rejected)["multi_one_passage"] == Counter(g.stats()["behaviours"])["onepassage"]
    for r in accepted:
        assert r["style"] == "multi-hop"
        passages = r["provenance"]["passages"]
        assert len(passages) == 2 and passages[0]["doc_id"] != passages[1]["doc_id"]
        assert sorted({ref["hop"] for ref in r["reference_contexts"]}) == [0, 1]
        for ref in r["reference_contexts"]:
            assert corpus[ref["doc_id"]].text[ref["start"]:ref["end"]] == ref["text"]
            hop_passage = passages[ref["hop"]]
            assert ref["doc_id"] == hop_passage["doc_id"]
            assert ref["start"] < hop_passage["end"] and hop_passage["start"] < ref["end"]
        assert [ref["hop"] for ref in r["reference_contexts"]] == sorted(ref["hop"] for ref in r["reference_contexts"])
    from rankwise.metrics.rag import evaluate_rag

    # a retriever that found only hop 0: each case retrieves exactly its hop-0 references, in one
    # call
    cases = [dict(r, calls=[{"chunks": [{k: ref[k] for k in ("text", "doc_id", "start", "end")}
                                        for ref in r["reference_contexts"] if ref["hop"] == 0]}])
             for r in accepted]
    result = evaluate_rag(cases, "span", metrics=["all_hops_covered@1", "evidence_coverage@1"])
    assert result.mean["all_hops_covered@1"] == 0.0 and 0.0 < result.mean["evidence_coverage@1"] < 1.0


def test_multi_hop_needs_two_documents_and_one_style_flag(tmp_path):
    corpus = Corpus.from_dict({"only": "One sentence about ranges and copies here. " * 40})
    slots = plan_samples(corpus, SynthSettings(n=4, passage_chars=300, styles={"multi-hop": 1}))
    assert {s.style for s in slots} == {"factual"} and {len(s.passages) for s in slots} == {1}
    proc = cli("synth", str(KESTREL), "--style", "multi-hop", "--styles", "factual=1", "--dry-run", "--model", "m",
               check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--style or --styles" in proc.stderr
    proc = cli("synth", str(KESTREL), "--style", "multi-hop", "-n", "6", "--dry-run", "--model", "m",
               "--base-url", "http://127.0.0.1:9/v1")
    assert "6 samples planned" in proc.stdout


def test_bad_replies_are_asked_again_and_good_ones_reused(g, tmp_path):
    """A reply that is no answer -- prose, JSON cut by the token limit, a refusal (text or field),
    an array, quotes that are a number, an answer that is not text, a critic reply without a score
    -- decides nothing and is not cached: the rerun asks exactly those samples again (each such
    conversation once more, and no other conversation already answered), reuses every good reply,
    and ends with the set of a run that never got a bad reply (issue 33, item 8: the rejections were
    cached as final, a rerun asked nothing)."""
    g.configure(faults=False, bad_first=0.35)
    out, rej = tmp_path / "ts.jsonl", tmp_path / "ts.rejected.jsonl"
    args = ["synth", str(KESTREL), "--model", "gen", "--base-url", g.base_url, "-n", "40", "--critic", "--styles",
            "factual=0.5,paraphrase=0.2,multi=0.1,conversational=0.2", "--cache", str(tmp_path / "c.sqlite"),
            "--out", str(out), "--quiet", "--json"]
    first = json.loads(cli(*args).stdout)
    before = g.stats()
    bad = sum(before["bad"].values())
    assert len(before["bad"]) >= 7 and bad >= 10, before["bad"]  # (nearly) every kind was served
    assert first["rejected"].get("bad_reply", 0) + first["rejected"].get("refused", 0) == bad
    assert sorted(r["reason"] for r in rows(rej) if r["reason"] in ("bad_reply", "refused")) == sorted(
        ["refused"] * (before["bad"].get("refusal", 0) + before["bad"].get("refusalfield", 0))
        + ["bad_reply"] * (bad - before["bad"].get("refusal", 0) - before["bad"].get("refusalfield", 0)))
    g.configure(bad_first=0.0)  # the endpoint answers well now
    second = json.loads(cli(*args).stdout)
    after = g.stats()
    assert second["resumed"] == 40 - bad
    assert after["repeated"] - before["repeated"] == bad  # each bad conversation asked once more ...
    # ... and nothing else that had an answer: the new requests are those, and the critic calls of
    # the samples whose generation was asked again (new conversations)
    regenerated = after["generations"] - before["generations"]
    assert regenerated == bad - before["bad"].get("noscore", 0)
    assert after["requests"] - before["requests"] == second["calls"] == bad + (after["critic"] - before["critic"]
                                                                                - before["bad"].get("noscore", 0))
    assert not {"bad_reply", "refused"} & {r["reason"] for r in rows(rej)}
    assert second["accepted"] + sum(second["rejected"].values()) == 40
    g.reset()
    fresh = tmp_path / "fresh.jsonl"
    cli(*[a if a != str(out) else str(fresh) for a in args])
    # the same samples, but for which of two near-duplicate questions is kept: a sample asked again
    # on the rerun comes after the later samples it is compared with (the first kept wins)
    a, b = {r["id"]: r for r in rows(out)}, {r["id"]: r for r in rows(fresh)}
    assert [i for i in set(a) & set(b) if a[i] != b[i]] == []
    duplicates = {r["id"] for r in rows(rej) + rows(tmp_path / "fresh.rejected.jsonl") if r["reason"] == "duplicate"}
    assert set(a) ^ set(b) <= duplicates and len(set(a) ^ set(b)) <= 2 and len(a) >= 20


def _big_corpus(path: Path, documents: int = 4, sentences: int = 10000) -> Path:
    """Documents of ~0.8 MB each: locating a quote in one (normalised once per document) takes a
    second or more."""
    words = ["range", "replica", "leader", "lease", "snapshot", "compaction", "follower", "quorum"]
    with open(path, "w", encoding="utf-8") as fh:
        for d in range(documents):
            text = " ".join(f"The {words[i % 8]} number {i} of store {d} keeps {words[(i * 3) % 8]} copies in zone "
                            f"{i % 97} of the cluster." for i in range(sentences))
            fh.write(json.dumps({"id": f"big{d}.md", "text": text}) + "\n")
    return path


def test_ctrl_c_stops_within_a_second(g, tmp_path):
    """Ctrl-C while samples are being checked (their quotes located in four documents of ~0.8 MB, a
    second or more of work each) stops synth at once: exit 130 with the decided samples kept, well
    within 1 s of the signal on an idle machine (0.2 s measured under load; issue 33, item 8: it
    took 4.5 s, and 3.3 s here before the fix: the checks held the event loop that takes the
    signal)."""
    out = tmp_path / "ts.jsonl"
    corpus = _big_corpus(tmp_path / "big.jsonl")
    g.configure(faults=False)
    args = ["synth", corpus, "--model", "gen", "--base-url", g.base_url, "-n", "8", "--styles", "factual=1",
            "--passage-chars", "4000", "--concurrency", "4", "--cache", tmp_path / "c.sqlite", "--out", out, "--quiet"]
    proc = cli_popen(args, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while g.stats()["generations"] < 4:  # the replies are in: the run is checking them, one per document
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("synth did not stop within 30 s of Ctrl-C")
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert "rankwise: interrupted; the samples decided are in" in err
    assert took < 1.5, f"synth took {took:.2f} s to stop after Ctrl-C"  # < 1 s idle; margin for a loaded machine
