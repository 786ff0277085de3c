"""The endpoint, call and cost options of the commands that call an LLM (judge, answer, utility,
position-curve, synth, pool) are declared once (``_llm_options`` in cli.py): every command exposes
them with the same flag, type, default and help, and each resolves them the same way (flags, then
the environment, then the config file's [llm] table; ``resolve_llm_config``), checked by dry runs
that call nothing."""

from __future__ import annotations

import json
import re

import click
import pytest
from click.testing import CliRunner

from generator_server import synthetic_cases, write_cases
from rankwise.cli import main

LLM_COMMANDS = {"judge", "judge-check", "judge-retest", "answer", "utility", "position-curve", "synth", "pool"}
GENERATOR_COMMANDS = {"answer", "utility", "position-curve"}  # --model required: the generator is not the judge

# parameter name -> (flags, type name, value when not given, is_flag): the one declaration every
# command must show
SHARED = {
    "model": (["--model"], "text", None, False),
    "base_url": (["--base-url"], "text", None, False),
    "api_key": (["--api-key"], "text", None, False),
    "config_path": (["--config"], "file", None, False),
    "prompt_file": (["--prompt"], "file", None, False),
    "concurrency": (["--concurrency"], "integer", None, False),
    "rpm": (["--rpm"], "float", None, False),
    "timeout": (["--timeout"], "float", None, False),
    "max_retries": (["--max-retries"], "integer", None, False),
    "max_calls": (["--max-calls"], "integer", None, False),
    "max_cost": (["--max-cost"], "float", None, False),
    "cache_path": (["--cache"], "file", None, False),
    "price_in": (["--price-in"], "float", None, False),
    "price_out": (["--price-out"], "float", None, False),
    "dry_run": (["--dry-run"], "boolean", False, True),
    "quiet": (["--quiet"], "boolean", False, True),
}
EVERYWHERE = {"model", "base_url", "api_key", "config_path", "concurrency", "cache_path", "price_in", "price_out",
              "dry_run", "quiet"}
# what each command's library function takes beyond EVERYWHERE (a change here is a deliberate one)
EXTRA = {
    "judge": {"prompt_file", "rpm", "timeout", "max_retries", "max_calls", "max_cost"},
    "answer": set(SHARED) - EVERYWHERE,
    "utility": set(SHARED) - EVERYWHERE,
    "position-curve": set(SHARED) - EVERYWHERE,
    "synth": {"prompt_file", "rpm", "timeout", "max_retries", "max_calls", "max_cost"},
    "pool": {"prompt_file", "rpm", "timeout", "max_retries", "max_calls", "max_cost"},
    "judge-check": {"prompt_file", "rpm", "timeout", "max_retries", "max_calls", "max_cost"},
    "judge-retest": {"prompt_file", "rpm", "timeout", "max_retries", "max_calls", "max_cost"},
}
PER_COMMAND_HELP = {"model", "prompt_file", "dry_run"}  # worded per command (whose model, which prompt, what is printed)


def _commands(group: click.Group, prefix: str = ""):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def _llm_commands() -> dict[str, click.Command]:
    return {name: cmd for name, cmd in _commands(main) if any("--api-key" in p.opts for p in cmd.params)}


def test_the_llm_commands_are_the_ones_declared():
    assert set(_llm_commands()) == LLM_COMMANDS  # a new LLM command must use _llm_options and be listed here


@pytest.mark.parametrize("name", sorted(LLM_COMMANDS))
def test_every_llm_command_declares_the_shared_options_alike(name):
    cmd = _llm_commands()[name]
    params = {p.name: p for p in cmd.params}
    given = cmd.make_context(name, [], resilient_parsing=True).params  # what the command gets when not given
    shared = {n for n in params if n in SHARED}
    assert shared == EVERYWHERE | EXTRA[name]
    for n in shared:
        p = params[n]
        flags, type_name, default, is_flag = SHARED[n]
        assert (p.opts, p.secondary_opts, p.type.name, given[n], p.is_flag, p.multiple, p.envvar) == \
               (flags, [], type_name, default, is_flag, False, None), (name, n)
        assert p.required == (n == "model" and name in GENERATOR_COMMANDS), (name, n)


@pytest.mark.parametrize("option", sorted(set(SHARED) - PER_COMMAND_HELP))
def test_a_shared_option_has_one_help_text(option):
    helps = {name: p.help for name, cmd in _llm_commands().items() for p in cmd.params if p.name == option}
    assert len(helps) >= 2 and len(set(helps.values())) == 1, helps


# ---------------------------------------------------------------- resolution: flags, config file,
# environment
URL_FLAG, URL_CONFIG, URL_ENV = "http://127.0.0.1:9/flag/v1", "http://127.0.0.1:9/config/v1", "http://127.0.0.1:9/env/v1"


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./rankwise.toml of the checkout
    ts = write_cases(synthetic_cases(6, k=4, seed=3), tmp_path / "ts.jsonl")
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "The kestrel hovers over the meadow before it dives on a vole. " * 30
    (docs / "a.txt").write_text(text, encoding="utf-8")
    spans = tmp_path / "spans.jsonl"
    span_run = tmp_path / "run.rag.jsonl"
    with open(spans, "w", encoding="utf-8") as ts_fh, open(span_run, "w", encoding="utf-8") as run_fh:
        for i in range(3):
            ref = {"text": text[0:60], "doc_id": "a", "start": 0, "end": 60}
            ts_fh.write(json.dumps({"id": f"q{i}", "question": f"What does the kestrel do {i}?",
                                    "reference": "It hovers.", "reference_contexts": [ref]}) + "\n")
            got = [{"text": text[s:s + 60], "doc_id": "a", "start": s, "end": s + 60} for s in (0, 120, 240, 360)]
            run_fh.write(json.dumps({"id": f"q{i}", "question": f"What does the kestrel do {i}?",
                                     "retrieved_contexts": got}) + "\n")
    jc = {name: tmp_path / name for name in ("jc.qrels", "jc-a.trec", "jc-b.trec", "jc-corpus.jsonl", "jc-q.jsonl")}
    jc["jc.qrels"].write_text("q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 1\n")
    jc["jc-a.trec"].write_text("q1 Q0 d1 1 3 a\nq1 Q0 d2 2 2 a\nq1 Q0 d3 3 1 a\n")
    jc["jc-b.trec"].write_text("q1 Q0 d2 1 3 b\nq1 Q0 d3 2 2 b\nq1 Q0 d1 3 1 b\n")
    jc["jc-corpus.jsonl"].write_text("".join(json.dumps({"id": d, "text": f"kestrel text {d}"}) + "\n"
                                             for d in ("d1", "d2", "d3")))
    jc["jc-q.jsonl"].write_text('{"id": "q1", "text": "kestrel"}\n')
    cache = tmp_path / "c.sqlite"
    (tmp_path / "cfg.toml").write_text(f'[llm]\nmodel = "m"\nbase_url = "{URL_CONFIG}"\nprice_in = 1.5\n'
                                       f'price_out = 4.0\ncache = "c.sqlite"\n', encoding="utf-8")
    return {
        "judge": ["judge", str(ts)],
        "judge-check": ["judge-check", *(str(jc[n]) for n in ("jc.qrels", "jc-a.trec", "jc-b.trec")), "--corpus",
                        str(jc["jc-corpus.jsonl"]), "--queries", str(jc["jc-q.jsonl"])],
        "judge-retest": ["judge-retest", str(ts)],
        "answer": ["answer", str(ts)],
        "utility": ["utility", str(ts)],
        "position-curve": ["position-curve", str(ts), "-k", "3"],
        "synth": ["synth", str(docs), "-n", "4", "--out", str(tmp_path / "synth.jsonl")],
        "pool": ["pool", str(spans), str(span_run), "--out", str(tmp_path / "pooled.jsonl"), "--json"],
        "cache": str(cache), "config": str(tmp_path / "cfg.toml"),
    }


def _dry_run(args: list[str], env: dict[str, str | None]):
    base = {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": None, "RANKWISE_JUDGE_MODEL": None}
    return CliRunner().invoke(main, [*args, "--dry-run"], env={**base, **env})


def _money(output: str) -> list[float]:
    return [float(x) for x in re.findall(r"\$(\d+\.\d+)", output)]


@pytest.mark.parametrize("name", sorted(LLM_COMMANDS))
def test_flags_config_and_environment_resolve_alike(name, inputs):
    args, cache = inputs[name], inputs["cache"]
    by_flags = _dry_run([*args, "--model", "m", "--base-url", URL_FLAG, "--price-in", "1.5", "--price-out", "4",
                         "--cache", cache], {})
    model = ["--model", "m"] if name in GENERATOR_COMMANDS else []  # the config's model is the judge's
    by_config = _dry_run([*args, *model, "--config", inputs["config"]], {})
    by_env = _dry_run([*args, *model], {"OPENAI_BASE_URL": URL_ENV, "RANKWISE_JUDGE_MODEL": "m",
                                        "RANKWISE_CACHE": cache})
    for r in (by_flags, by_config, by_env):
        assert r.exit_code == 0, (name, r.output)
    if name == "pool":  # the JSON summary: the judge's plan, money included when prices are known
        plans = [json.loads(r.stdout)["plan"] for r in (by_flags, by_config, by_env)]
        assert plans[0] == plans[1] and plans[0]["calls"] > 0 and plans[0]["cost"] > 0
        assert plans[2]["cost"] is None and {k: v for k, v in plans[2].items() if k != "cost"} == \
               {k: v for k, v in plans[0].items() if k != "cost"}
        return
    # the same plan and money from the flags as from the config file; the URL each gave
    assert URL_FLAG in by_flags.output and URL_CONFIG in by_config.output and URL_ENV in by_env.output
    assert by_flags.output.replace(URL_FLAG, "URL") == by_config.output.replace(URL_CONFIG, "URL")
    assert _money(by_flags.output) and max(_money(by_flags.output)) > 0
    assert not _money(by_env.output)  # no prices anywhere: no money printed


@pytest.mark.parametrize("name", sorted(GENERATOR_COMMANDS))
def test_the_generator_model_is_never_taken_from_the_judge_settings(name, inputs):
    r = _dry_run(inputs[name], {"OPENAI_BASE_URL": URL_ENV, "RANKWISE_JUDGE_MODEL": "m",
                                "RANKWISE_CACHE": inputs["cache"]})
    assert r.exit_code == 2 and "Missing option '--model'" in r.output
