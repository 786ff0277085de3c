"""The judge under a hostile endpoint: malformed 200 replies, connection resets, an endpoint that
dies midway, credentials in the URL. Each test runs the real `rankwise judge` (a process of its own,
forked from this one, tests/_forked.py, so a hang is a timeout, not a stuck test run) against the
loopback server (tests/llm_server.py) and asserts that it ends within a time bound, with the right
counts, and with every verdict had on disk (cache and records).
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from _forked import cli_popen, cli_run
from llm_server import ENVELOPES, judge_text, start_server
from rankwise.cli import main
from rankwise.data.records import load_records
from rankwise.llm.cache import ResponseCache
from rankwise.llm.client import CallPolicy, Endpoint
from rankwise.relevance.llm_judge import Judge, JudgeCase, JudgeStopped, PromptSettings

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
TEXTS = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
         "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]
KINDS = [*ENVELOPES, "reset"]


def _testset(path: Path, chunks_per_case: list[list[str]]) -> Path:
    with open(path, "w") as fh:
        for i, texts in enumerate(chunks_per_case):
            fh.write(json.dumps({"id": f"q{i + 1}", "user_input": QUESTION, "reference": REFERENCE,
                                 "retrieved_contexts": [{"id": f"q{i + 1}c{j + 1}", "text": t}
                                                        for j, t in enumerate(texts)]}) + "\n")
    return path


def _plain_testset(path: Path, n_cases: int) -> Path:
    return _testset(path, [[f"{t} (case {i})" for t in TEXTS] for i in range(n_cases)])


def _judge(base_url, ts, tmp_path, *extra, limit=90.0, env=None):
    """`rankwise judge` as a subprocess; returns (returncode, stdout, stderr, seconds)."""
    cmd = ["judge", str(ts), "--model", "judge-test", "--base-url",
           base_url, "--cache", str(tmp_path / "c.sqlite"), "--records", str(tmp_path / "out.jsonl"), "--quiet",
           *map(str, extra)]
    t = time.monotonic()
    try:
        proc = cli_run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rankwise judge did not finish within {limit} s")
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t


def _cached(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(str(cache)) as db:
            return db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    except sqlite3.OperationalError:  # created, schema not written yet
        return 0


def _outcomes(out: Path) -> dict[str, tuple[str, int | None, str | None, str]]:
    """chunk id -> (status, verdict, error, text) from a records file."""
    return {c.id: (c.verdicts["llm"].status, c.verdicts["llm"].verdict, c.verdicts["llm"].error, c.text)
            for rec in load_records(out) for c in rec.chunks}


def _expected(text: str) -> int:
    return judge_text(REFERENCE, text, False)["verdict"]


def _check_on_disk(tmp_path: Path, outcomes: dict) -> int:
    """Every ok verdict is the server's verdict and is in the cache; returns the ok count."""
    ok = [(v, text) for status, v, _, text in outcomes.values() if status == "ok"]
    assert all(v == _expected(text) for v, text in ok)
    assert _cached(tmp_path / "c.sqlite") == len(ok)
    return len(ok)


# --------------------------------------------------------------------------------- one envelope at
# a time


MESSAGES = {
    "notjson": "bad reply: the body is not JSON (JSONDecodeError",
    "plaintext": "bad reply: the body is a string, not a JSON object: 'OK'",
    "arraybody": "bad reply: the body is an array, not a JSON object",
    "nochoices": "bad reply: no choices",
    "choicesobj": "bad reply: choices is an object, not a list",
    "emptychoices": "bad reply: choices is empty",
    "nomessage": "bad reply: choices[0] has no message",
    "messagestr": "bad reply: choices[0].message is a string, not an object",
    "contentnum": "bad reply: message.content is a number ('42'), not text",
    "usagestr": "bad reply: usage is a string ('lots'), not an object",
    "tokensstr": "bad reply: usage.prompt_tokens is a string ('many'), not a token count",
    "tokensnan": "bad reply: usage.prompt_tokens is nan, not a token count",
    "reset": "connection error: ",
}


def test_every_malformed_envelope_fails_only_its_own_chunk(server, tmp_path):
    """Each kind of bad 200 reply (and a reset connection): always on one chunk -> that chunk fails
    after its retries, with a message saying what was wrong; once on another -> the retry saves it.
    The run ends (these used to hang forever or kill the run with a traceback), exit 0, all else on
    disk."""
    server.reset()
    assert set(MESSAGES) == set(KINDS)
    always = {f"{kind}-always": f"The tower was completed in 1889 [[{kind}]]" for kind in KINDS}
    once = {f"{kind}-once": f"Paris is the capital of France [[{kind}x1]]" for kind in KINDS}
    texts = [*always.values(), *once.values(), TEXTS[0]]
    ts = _testset(tmp_path / "ts.jsonl", [texts])
    rc, stdout, stderr, took = _judge(server.base_url, ts, tmp_path, "--max-retries", "2", "--concurrency", "8")
    assert rc == 0, stderr
    assert took < 30
    assert "Traceback" not in stderr
    n = len(KINDS)
    assert f"  verdicts: {n + 1} ok (0 from cache, {n + 1} new), {n} failed, 0 missing" in stdout
    assert f"  not had: bad reply {n - 1}, connection 1 (not cached" in stdout
    outcomes = {text: o for o in _outcomes(tmp_path / "out.jsonl").values() for text in [o[3]]}
    for kind in KINDS:
        status, verdict, error, _ = outcomes[always[f"{kind}-always"]]
        assert (status, verdict) == ("failed", None), kind
        assert error.startswith(MESSAGES[kind]) and error.endswith("(gave up after 3 attempts)"), (kind, error)
        assert outcomes[once[f"{kind}-once"]][:3] == ("ok", 0, None), kind
    assert outcomes[TEXTS[0]][:2] == ("ok", 1)
    assert _check_on_disk(tmp_path, _outcomes(tmp_path / "out.jsonl")) == n + 1
    stats = server.stats()
    assert stats["requests"] == n * 3 + n * 2 + 1
    assert stats["by_status"].get("reset") == 3 + 1


def test_every_malformed_envelope_at_25_percent_ends_with_right_counts_and_verdicts_on_disk(server, tmp_path):
    """The issue's "done when": a quarter of all replies are broken (every envelope kind and resets,
    drawn at random); with 2 retries the run ends in time, exit 0; the chunks that failed are
    exactly those whose every attempt was broken, and every verdict had is right and on disk."""
    server.reset()
    server.configure(fault_rate=0.25, fault_kinds=KINDS, seed=7)
    ts = _plain_testset(tmp_path / "ts.jsonl", 100)  # 400 chunks
    rc, stdout, stderr, took = _judge(server.base_url, ts, tmp_path, "--max-retries", "2", "--concurrency", "32")
    assert rc == 0, stderr
    assert took < 60
    stats = server.stats()
    server.configure(fault_rate=0.0)
    outcomes = _outcomes(tmp_path / "out.jsonl")
    failed = [o for o in outcomes.values() if o[0] == "failed"]
    ok = _check_on_disk(tmp_path, outcomes)
    assert ok + len(failed) == 400
    assert len(failed) == stats["given_up"]  # the client gave up exactly where the server broke all 3 tries
    assert all(e.startswith(("bad reply: ", "connection error: ")) for _, _, e, _ in failed)
    assert sum(stats["random_faults"].values()) >= 0.2 * stats["requests"]
    assert set(stats["random_faults"]) == set(KINDS)  # every kind was served
    assert f"  verdicts: {ok} ok (0 from cache, {ok} new), {len(failed)} failed, 0 missing" in stdout


def test_resets_on_60_percent_of_calls_fail_chunks_not_the_run(server, tmp_path):
    """Connection resets used to abort the whole run ("lost the LLM endpoint", no records). Now,
    with 60% of calls reset and 2 retries, about 0.6^3 = 22% of chunks fail, counted, and the run
    ends with exit 0 and every verdict on disk: an endpoint that answers now and then is not gone.
    """
    server.reset()
    server.configure(fault_rate=0.6, fault_kinds=["reset"], seed=3)
    ts = _plain_testset(tmp_path / "ts.jsonl", 40)  # 160 chunks
    rc, stdout, stderr, took = _judge(server.base_url, ts, tmp_path, "--max-retries", "2", "--concurrency", "40")
    stats = server.stats()
    server.configure(fault_rate=0.0)
    assert rc == 0, stderr
    assert took < 60
    outcomes = _outcomes(tmp_path / "out.jsonl")
    failed = [o for o in outcomes.values() if o[0] == "failed"]
    assert len(failed) == stats["given_up"] and 10 <= len(failed) <= 70
    assert all(e.startswith("connection error: ") for _, _, e, _ in failed)
    ok = _check_on_disk(tmp_path, outcomes)
    assert f"  not had: connection {len(failed)} (not cached" in stdout
    assert ok == 160 - len(failed)


# ------------------------------------------------------------------------------------- endpoint
# gone


def test_endpoint_gone_midway_stops_cleanly_with_every_verdict_in_cache_and_records(tmp_path):
    """The server dies midway. The breaker (here: no reply for 1 s and 8 connection failures in a
    row) stops the run: exit 2, one line on stderr, and the verdicts had are in the cache AND the
    records."""
    srv = start_server(latency=0.05)
    try:
        ts = _plain_testset(tmp_path / "ts.jsonl", 100)  # 400 chunks, 4 at a time
        cfg = tmp_path / "rankwise.toml"
        cfg.write_text("[llm]\nbreaker_seconds = 1\nbreaker_failures = 8\n")
        cmd = ["judge", str(ts), "--model", "judge-test", "--base-url",
               srv.base_url, "--cache", str(tmp_path / "c.sqlite"), "--records", str(tmp_path / "out.jsonl"),
               "--quiet", "--concurrency", "4", "--config", str(cfg)]
        proc = cli_popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while _cached(tmp_path / "c.sqlite") < 30:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        srv.stop()
        stopped = time.monotonic()
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("judge did not stop within 30 s of losing its endpoint")
        took = time.monotonic() - stopped
    finally:
        srv.stop()
    assert proc.returncode == 2, stderr
    assert took < 15, took
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr
    outcomes = _outcomes(tmp_path / "out.jsonl")
    ok = _check_on_disk(tmp_path, outcomes)
    assert 30 <= ok < 400
    assert lines[0].startswith(f"rankwise: error: lost the LLM endpoint {srv.base_url}: ")
    assert re.search(r": \d+ connection failures in a row and no reply for \d+\.\d s \(last: ", lines[0]), lines[0]
    assert lines[0].endswith(f"; the {ok} verdicts had are in {tmp_path / 'out.jsonl'} and the cache "
                             f"({tmp_path / 'c.sqlite'}): rerun the same command to resume")
    missing = [o for o in outcomes.values() if o[0] == "missing"]
    assert missing and all(e.startswith("run stopped: lost the LLM endpoint") for _, _, e, _ in missing)
    assert f"  verdicts: {ok} ok" in stdout


def test_endpoint_gone_in_the_api_raises_judge_stopped_with_the_partial_result(tmp_path):
    srv = start_server(latency=0.05)
    cache = ResponseCache(tmp_path / "c.sqlite")
    judge = Judge(Endpoint("judge-test", srv.base_url, "unused"), PromptSettings(),
                  CallPolicy(concurrency=2, backoff_base=0.05, breaker_seconds=0.5), cache)
    cases = [JudgeCase(f"q{i}", QUESTION, [f"{t} ({i})" for t in TEXTS], REFERENCE) for i in range(100)]

    def kill_when_started():
        while _cached(tmp_path / "c.sqlite") < 10:
            time.sleep(0.02)
        srv.stop()

    import threading

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    t = time.monotonic()
    try:
        with pytest.raises(JudgeStopped, match="lost the LLM endpoint") as info:
            judge.run(cases)
    finally:
        killer.join()
        srv.stop()
    assert time.monotonic() - t < 30
    s = info.value.result.summary
    assert s.ok == len(cache) >= 10 and s.ok + s.failed + s.missing == 400
    assert s.stopped.startswith("lost the LLM endpoint")
    assert s.failures["run stopped"] == s.missing
    cache.close()


def test_never_reachable_endpoint_still_fails_fast(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ts = _plain_testset(tmp_path / "ts.jsonl", 2)
    rc, stdout, stderr, took = _judge(f"http://127.0.0.1:{port}/v1", ts, tmp_path, limit=30)
    assert rc == 2 and took < 10
    assert stderr.startswith(f"rankwise: error: cannot reach the LLM endpoint http://127.0.0.1:{port}/v1: ")
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.jsonl").exists()  # nothing was had, so no records file


# ------------------------------------------------------------------------------- credentials in the
# URL


def test_credentials_in_the_base_url_go_into_an_authorization_header(srv, tmp_path):
    """http://user:password@host/v1 used to end in a ValueError traceback (aiohttp will not combine
    the SDK's Authorization header with URL credentials). Now they are sent as Basic auth, and the
    password is masked in everything printed or written."""
    ts = _plain_testset(tmp_path / "ts.jsonl", 1)
    url = srv.base_url.replace("http://", "http://ann:s3cret%21@")
    r = CliRunner().invoke(main, ["judge", str(ts), "--model", "judge-test", "--base-url", url, "--cache",
                                  str(tmp_path / "c.sqlite"), "--records", str(tmp_path / "out.jsonl"), "--quiet"])
    assert r.exit_code == 0, r.output
    assert srv.stats()["authorization"] == "Basic " + base64.b64encode(b"ann:s3cret!").decode()
    masked = srv.base_url.replace("http://", "http://ann:***@")
    assert r.stdout.splitlines()[0].startswith(f"judged 4 chunks of 1 case with judge-test at {masked} ")
    assert "s3cret" not in r.output and "s3cret" not in (tmp_path / "out.jsonl").read_text()
    assert [rec.verdicts("llm") for rec in load_records(tmp_path / "out.jsonl")] == [[1, 0, 0, 1]]

    r = CliRunner().invoke(main, ["judge", str(ts), "--model", "judge-test", "--base-url", url, "--api-key", "k",
                                  "--records", str(tmp_path / "o2.jsonl"), "--cache", str(tmp_path / "c.sqlite")])
    assert r.exit_code == 2
    assert r.stderr == (f"rankwise: error: --api-key: the base URL {masked} holds credentials "
                        "(user:password@) and an API key is given too; an endpoint takes one Authorization "
                        "header: drop one\n")


@pytest.mark.parametrize("url, problem", [
    ("ftp://host/v1", "is not an http(s) URL"),
    ("localhost:8000/v1", "is not an http(s) URL"),
    ("http://host:99999/v1", "has a bad port"),
])
def test_bad_base_urls_are_one_line_errors(tmp_path, url, problem):
    ts = _plain_testset(tmp_path / "ts.jsonl", 1)
    r = CliRunner().invoke(main, ["judge", str(ts), "--model", "m", "--base-url", url, "--records",
                                  str(tmp_path / "o.jsonl"), "--cache", str(tmp_path / "c.sqlite")])
    assert r.exit_code == 2
    assert problem in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


SECRET = "Zq7SECRETpw"


def _no_secret_anywhere(result, folder: Path) -> None:
    """The secret is in no output: stdout, stderr, nor any file written under ``folder``."""
    assert SECRET not in result.stdout and SECRET not in result.stderr
    for f in folder.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("url, problem", [
    (f"http://ann:{SECRET}@127.0.0.1:abc/v1", "has a bad port"),
    (f"http://ann:{SECRET}@127.0.0.1:99999/v1", "has a bad port"),
    ("http://127.0.0.1:abc/v1", "has a bad port"),
    ("http://[::1/v1", "is not a valid URL"),
    (f"http://ann:{SECRET}@[::1/v1", "is not a valid URL"),
    (f"http://ann:{SECRET}@/v1", "has no host"),
    (f"ann:{SECRET}@127.0.0.1:8000/v1", "is not an http(s) URL"),
    (f"//ann:{SECRET}@127.0.0.1:8000/v1", "is not an http(s) URL"),
])
@pytest.mark.parametrize("batch", [False, True])
def test_bad_base_urls_are_refused_at_start_without_a_traceback_or_the_secret(tmp_path, url, problem, batch):
    ts = _plain_testset(tmp_path / "ts.jsonl", 1)
    r = CliRunner().invoke(main, ["judge", str(ts), "--model", "m", "--base-url", url, "--records",
                                  str(tmp_path / "o.jsonl"), "--cache", str(tmp_path / "c.sqlite"),
                                  *(["--batch-api"] if batch else [])])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("rankwise: error: ") and "rankwise: error: --base-url: base URL " in r.stderr
    assert problem in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output
    if SECRET in url:
        assert "ann:***@" in r.stderr
    _no_secret_anywhere(r, tmp_path)
    assert not (tmp_path / "o.jsonl").exists()





def test_an_unwritable_records_path_fails_before_any_call(srv, tmp_path):
    ts = _plain_testset(tmp_path / "ts.jsonl", 1)
    for out in (tmp_path / "no-such-folder" / "out.jsonl", tmp_path):
        r = CliRunner().invoke(main, ["judge", str(ts), "--model", "judge-test", "--base-url", srv.base_url,
                                      "--cache", str(tmp_path / "c.sqlite"), "--records", str(out)])
        # refused by the output check (a folder) or the judge (a folder that does not exist), before
        # any call
        assert r.exit_code == 2
        assert r.stderr.startswith((f"rankwise: error: {out}: field ", f"rankwise: error: {out}: option --records: "))
        assert "records" in r.stderr and ("cannot write" in r.stderr or "is a directory" in r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert srv.stats()["requests"] == 0


def test_unreadable_quoting_and_injected_replies_end_right_on_disk(server, tmp_path):
    """Items 5 and 6 end to end: a reply still unreadable after the repair gets one fresh call
    (which saves `malformedx2`); a reply quoting an object before its answer is read by its answer;
    chunk text that closes its tag and instructs takes over no verdict. Ends in time, exit 0,
    verdicts on disk."""
    from relevance.test_judge_injection import SINGLE_ATTACKS

    server.reset()
    texts = ["The tower was completed in 1889 [[malformedx2]]", "Paris is the capital [[malformed]]",
             "The tower was completed in 1889 [[quoteobj]]", "Paris is the capital [[quoteobj]]",
             *[t for _, t in SINGLE_ATTACKS]]
    ts = _testset(tmp_path / "ts.jsonl", [texts])
    rc, stdout, stderr, took = _judge(server.base_url, ts, tmp_path, "--concurrency", "4")
    assert rc == 0, stderr
    assert took < 30
    outcomes = {o[3]: o for o in _outcomes(tmp_path / "out.jsonl").values()}
    assert outcomes[texts[0]][:2] == ("ok", 1)
    assert outcomes[texts[1]][0] == "failed"
    assert outcomes[texts[1]][2].startswith("unparseable reply after one repair and one fresh call: ")
    assert outcomes[texts[2]][:2] == ("ok", 1) and outcomes[texts[3]][:2] == ("ok", 0)
    for _, text in SINGLE_ATTACKS:
        assert outcomes[text][:2] == ("ok", _expected(text)), text
    assert _check_on_disk(tmp_path, _outcomes(tmp_path / "out.jsonl")) == len(texts) - 1
    assert f"  verdicts: {len(texts) - 1} ok (0 from cache, {len(texts) - 1} new), 1 failed, 0 missing" in stdout
    assert server.stats()["requests"] == len(texts) + 2 * 2  # a repair and a fresh call for each malformed one


def test_a_cache_that_cannot_be_written_stops_the_run_with_the_verdicts_in_the_records(server, tmp_path):
    """The disk fills up mid-run (a 48 KB file-size limit on the judge process): the judge stops
    paying for verdicts it cannot keep, writes the verdicts had into the records, and says so in one
    line."""
    import resource
    import signal

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (48_000, 48_000))

    server.reset()
    ts = _plain_testset(tmp_path / "ts.jsonl", 15)  # 60 chunks; their records fit in 48 KB, the WAL does not
    out = tmp_path / "out.jsonl"
    cmd = ["judge", str(ts), "--model", "judge-test", "--base-url",
           server.base_url, "--cache", str(tmp_path / "c.sqlite"), "--records", str(out), "--quiet",
           "--concurrency", "1"]
    proc = cli_run(cmd, capture_output=True, text=True, timeout=60, preexec_fn=small_disk)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    outcomes = _outcomes(out)
    ok = sum(o[0] == "ok" for o in outcomes.values())
    assert 0 < ok < 60 and all(o[1] == _expected(o[3]) for o in outcomes.values() if o[0] == "ok")
    assert lines[0].startswith(f"rankwise: error: cannot write the verdict cache {tmp_path / 'c.sqlite'}: ")
    assert lines[0].endswith(f"; the {ok} verdicts had are in {out}: rerun the same command to resume")
    assert _cached(tmp_path / "c.sqlite") <= ok
    assert server.stats()["requests"] <= ok + 2  # it stopped calling as soon as the cache failed


def test_each_failure_carries_its_kind_and_the_summary_counts_by_it(server, tmp_path):
    """The kind a failure is counted under travels with it (``CallError.kind`` -> the outcome's
    ``kind``); the summary counts outcomes by that attribute, not by reading their text (issue 35
    item 1)."""
    server.reset()
    judge = Judge(Endpoint("judge-test", server.base_url, "k"), PromptSettings(mode="question"),
                  CallPolicy(concurrency=4, max_retries=1), ResponseCache(tmp_path / "c.sqlite"))
    chunks = [f"The tower was completed in 1889 [[{kind}]]" for kind in KINDS]
    result = judge.run([JudgeCase("q1", "When was the tower completed?", chunks)])
    kinds = [v.kind for v in result.verdicts["q1"]]
    assert kinds == ["connection" if k == "reset" else "bad reply" for k in KINDS]
    assert all(v.status == "failed" and v.error for v in result.verdicts["q1"])
    assert result.summary.failures == {"bad reply": len(KINDS) - 1, "connection": 1}
