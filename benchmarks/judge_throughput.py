"""LLM-judge throughput: rankwise (per chunk, batch, cached rerun) vs Ragas 0.4.3, same loopback
server.

The server (tests/llm_server.py) waits ``--latency`` seconds (default 0.2) before every reply, like
a remote model, and answers deterministically, so both tools get the same verdicts and their context
precision must agree. 100 questions x 10 chunks by default. Each tool runs at its default settings:
rankwise ``Judge`` as ``rankwise judge`` runs it (up to 128 requests in flight), Ragas
``evaluate()`` with ``LLMContextPrecisionWithReference`` and its default ``RunConfig`` (16 workers;
each question's chunks are judged one after another).

Ragas 0.4.3 pins ``openai<2``, so it usually lives in its own virtualenv; point ``--ragas-python``
(or ``$RAGAS_PYTHON``) at that interpreter:

    python -m venv /tmp/ragas-venv
    /tmp/ragas-venv/bin/pip install "ragas==0.4.3" "langchain-community<0.4"
    python benchmarks/judge_throughput.py --ragas-python /tmp/ragas-venv/bin/python

Targets (issue 5): rankwise >= 4x Ragas' throughput; batch mode >= 5x fewer calls; rerun 0 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from llm_server import start_server  # noqa: E402

TOPICS = ["glaciers", "volcanoes", "coral", "tides", "monsoons", "deserts", "comets", "lichens", "tsunamis",
          "aurora", "geysers", "mangroves", "permafrost", "plankton", "meteors", "fjords", "savannas",
          "estuaries", "dunes", "nebulae"]
FILLER = ["The committee met on a Tuesday to discuss the budget.", "Rainfall records began in the city in 1850.",
          "The museum reopened after renovation work last spring.", "Local bakeries sell bread before dawn.",
          "A new bridge shortened the commute across the river.", "Chess clubs gathered for a regional match."]


def make_cases(n_questions: int, n_chunks: int) -> list[dict]:
    """Synthetic test set: each question has a topic word; chunks 1, 3, 4, 7 of 10 mention it."""
    rows = []
    for i in range(n_questions):
        topic = f"{TOPICS[i % len(TOPICS)]}{i}"
        question = f"What did survey {i} find about {topic}?"
        reference = f"Survey {i} found that {topic} shrink every decade."
        chunks = []
        for j in range(n_chunks):
            if j in (0, 2, 3, 6):
                chunks.append(f"Report {j}: the {topic} studied here shrink every decade, says the team.")
            else:
                chunks.append(f"Report {j}: {FILLER[(i + j) % len(FILLER)]}")
        rows.append({"id": f"q{i}", "user_input": question, "reference": reference, "retrieved_contexts": chunks})
    return rows


def acp(verdicts: list[int]) -> float:
    hits, total = 0, 0.0
    for i, v in enumerate(verdicts, 1):
        if v:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


def run_rankwise(server, rows, *, batch: bool, cache: Path) -> dict:
    import openai  # noqa: F401  (imported before the clock starts, as the Ragas script imports its stack)

    from rankwise.llm.cache import ResponseCache
    from rankwise.llm.client import Endpoint
    from rankwise.relevance.llm_judge import Judge, JudgeCase, PromptSettings

    cases = [JudgeCase(r["id"], r["user_input"], r["retrieved_contexts"], r["reference"]) for r in rows]
    server.reset()
    with ResponseCache(cache) as store:
        judge = Judge(Endpoint("judge-test", server.base_url, "unused"), PromptSettings(batch=batch), cache=store)
        t = time.perf_counter()
        result = judge.run(cases)
        seconds = time.perf_counter() - t
    s = result.summary
    scores = {cid: acp([v.verdict or 0 for v in vs]) for cid, vs in result.verdicts.items()}
    return {"seconds": seconds, "calls": server.stats()["requests"], "ok": s.ok, "failed": s.failed,
            "cached": s.cached, "scores": scores}


RAGAS_SCRIPT = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
base_url, data_path = sys.argv[1], sys.argv[2]
from langchain_openai import ChatOpenAI
from ragas import EvaluationDataset, evaluate
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import LLMContextPrecisionWithReference
rows = json.load(open(data_path))
dataset = EvaluationDataset.from_list([{k: r[k] for k in ("user_input", "reference", "retrieved_contexts")}
                                       for r in rows])
llm = LangchainLLMWrapper(ChatOpenAI(model="judge-test", base_url=base_url, api_key="unused"))
t = time.perf_counter()
result = evaluate(dataset, metrics=[LLMContextPrecisionWithReference()], llm=llm, show_progress=False)
seconds = time.perf_counter() - t
scores = [float(x) for x in result.to_pandas()["llm_context_precision_with_reference"]]
print("RESULT " + json.dumps({"seconds": seconds, "scores": scores}))
"""


def find_ragas_python(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("RAGAS_PYTHON"), sys.executable):
        if not candidate:
            continue
        ok = subprocess.run([candidate, "-c", "import ragas, langchain_openai"], capture_output=True).returncode == 0
        if ok:
            return candidate
    return None


def run_ragas(server, rows, python: str, workdir: Path) -> dict:
    data = workdir / "ragas_rows.json"
    data.write_text(json.dumps(rows))
    script = workdir / "ragas_run.py"
    script.write_text(RAGAS_SCRIPT)
    server.reset()
    proc = subprocess.run([python, str(script), server.base_url, str(data)], capture_output=True, text=True,
                          env=os.environ | {"RAGAS_DO_NOT_TRACK": "true"}, timeout=3600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"Ragas run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(line[len("RESULT "):])
    out["calls"] = server.stats()["requests"]
    return out


def median_of(repeat: int, run) -> dict:
    """Run ``repeat`` times; the run with the median wall time (all wall times kept in ``runs``)."""
    outs = sorted((run(i) for i in range(repeat)), key=lambda r: r["seconds"])
    best = dict(outs[len(outs) // 2])
    best["runs"] = [round(r["seconds"], 3) for r in outs]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2, help="server seconds per call")
    parser.add_argument("--ragas-python", help="interpreter with ragas==0.4.3 installed (or $RAGAS_PYTHON)")
    parser.add_argument("--skip-ragas", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the median is shown")
    parser.add_argument("--json", dest="json_out", help="also write the figures here")
    args = parser.parse_args()

    rows = make_cases(args.questions, args.chunks)
    n_chunks = args.questions * args.chunks
    workdir = Path(tempfile.mkdtemp(prefix="judge-bench-"))
    server = start_server(latency=args.latency)
    results: dict[str, dict] = {}
    try:
        results["rankwise per-chunk"] = median_of(args.repeat, lambda i: run_rankwise(
            server, rows, batch=False, cache=workdir / f"single{i}.sqlite"))
        results["rankwise rerun (cached)"] = median_of(args.repeat, lambda i: run_rankwise(
            server, rows, batch=False, cache=workdir / f"single{args.repeat - 1}.sqlite"))
        results["rankwise batch"] = median_of(args.repeat, lambda i: run_rankwise(
            server, rows, batch=True, cache=workdir / f"batch{i}.sqlite"))
        python = None if args.skip_ragas else find_ragas_python(args.ragas_python)
        if python:
            results["ragas 0.4.3"] = median_of(args.repeat, lambda i: run_ragas(server, rows, python, workdir))
        elif not args.skip_ragas:
            print("Ragas not found: pass --ragas-python (an interpreter with ragas==0.4.3 and "
                  "langchain-community<0.4 installed); skipping it", file=sys.stderr)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    ragas = results.get("ragas 0.4.3")
    print(f"judge throughput: {args.questions} questions x {args.chunks} chunks = {n_chunks} chunks, "
          f"server latency {args.latency * 1000:.0f} ms per call, median of {args.repeat} run(s)")
    print(f"{'run':<26}{'calls':>7}{'wall s':>9}{'chunks/s':>10}{'vs ragas':>10}")
    for name, r in results.items():
        speed = n_chunks / r["seconds"] if r["seconds"] > 0 else float("inf")
        ratio = f"{ragas['seconds'] / r['seconds']:.1f}x" if ragas and r is not ragas and r["seconds"] > 0 else ""
        print(f"{name:<26}{r['calls']:>7}{r['seconds']:>9.2f}{speed:>10.0f}{ratio:>10}")
    single, batch, rerun = (results["rankwise per-chunk"], results["rankwise batch"],
                            results["rankwise rerun (cached)"])
    print(f"batch mode: {single['calls'] / max(1, batch['calls']):.1f}x fewer calls; "
          f"rerun: {rerun['calls']} calls")
    ours = [single["scores"][r["id"]] for r in rows]
    if ragas:
        diff = max(abs(a - b) for a, b in zip(ours, ragas["scores"], strict=True))
        print(f"context precision, rankwise vs Ragas: max |difference| over {len(rows)} questions = {diff:.1e}")
        print(f"targets: >= 4x Ragas throughput: {ragas['seconds'] / single['seconds']:.1f}x per-chunk, "
              f"{ragas['seconds'] / batch['seconds']:.1f}x batch")
    if args.json_out:
        slim = {k: {kk: vv for kk, vv in v.items() if kk != "scores"} for k, v in results.items()}
        Path(args.json_out).write_text(json.dumps(slim, indent=2))


if __name__ == "__main__":
    main()
