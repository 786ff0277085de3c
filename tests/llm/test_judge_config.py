"""One resolution of the judge's settings (resolve_llm_config) for the CLI and the Python API alike:
arguments > environment > the [llm] table of rankwise.toml > defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import load_records, records_from_testset
from rankwise.errors import InputError
from rankwise.llm.config import resolve_llm_config
from rankwise.relevance.llm_judge import judge_records

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "It was completed in 1889."
TEXTS = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
         "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]


def _write_config(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rankwise.toml"
    path.write_text(text)
    return path


def test_arguments_beat_environment_beat_file_beat_defaults(tmp_path):
    cfg = _write_config(tmp_path / "conf", '[llm]\nmodel = "file-model"\nbase_url = "http://127.0.0.1:1/v1"\n'
                        'mode = "question"\ngraded = true\nconcurrency = 8\ntimeout = 12\ncache = "j.sqlite"\n'
                        'prompt = "p.toml"\nprice_in = 0.5\nbatch = true\nrelevant_from = 3\n')
    c = resolve_llm_config(config=cfg, env={})
    assert (c.endpoint.model, c.endpoint.base_url, c.endpoint.api_key) == ("file-model", "http://127.0.0.1:1/v1",
                                                                          "unused")
    assert (c.settings.mode, c.settings.graded, c.settings.batch, c.settings.relevant_from) == ("question", True,
                                                                                              True, 3)
    assert (c.policy.concurrency, c.policy.timeout, c.policy.max_retries) == (8, 12.0, 4)  # 4: the default
    assert c.prices.input_per_m == 0.5 and c.prices.output_per_m is None
    # relative paths in the file are read from the file's folder, not from where the command runs
    assert c.cache == tmp_path / "conf" / "j.sqlite"
    assert Path(c.settings.prompt_file) == tmp_path / "conf" / "p.toml"
    assert c.source == str(cfg)

    env = {"RANKWISE_JUDGE_MODEL": "env-model", "OPENAI_BASE_URL": "http://127.0.0.1:2/v1",
           "OPENAI_API_KEY": "env-key", "RANKWISE_CACHE": str(tmp_path / "env.sqlite")}
    c = resolve_llm_config(config=cfg, env=env)
    assert (c.endpoint.model, c.endpoint.base_url, c.endpoint.api_key) == ("env-model", "http://127.0.0.1:2/v1",
                                                                          "env-key")
    assert c.cache == tmp_path / "env.sqlite"

    c = resolve_llm_config(config=cfg, env=env, model="arg-model", base_url="http://127.0.0.1:3/v1",
                           api_key="arg-key", mode="reference", graded=False, batch=False, concurrency=2,
                           timeout=3, cache=tmp_path / "arg.sqlite", prompt=None)
    assert (c.endpoint.model, c.endpoint.base_url, c.endpoint.api_key) == ("arg-model", "http://127.0.0.1:3/v1",
                                                                          "arg-key")
    assert (c.settings.mode, c.settings.graded, c.settings.batch) == ("reference", False, False)
    assert (c.policy.concurrency, c.policy.timeout) == (2, 3.0)
    assert c.cache == tmp_path / "arg.sqlite"


def test_no_file_gives_the_library_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    c = resolve_llm_config(model="m", base_url="http://127.0.0.1:1/v1", env={})
    assert c.source is None
    assert (c.settings.mode, c.settings.graded, c.settings.batch, c.settings.batch_size) == ("reference", False,
                                                                                           False, 20)
    assert (c.policy.concurrency, c.policy.timeout, c.policy.max_retries, c.policy.temperature) == (128, 60.0, 4,
                                                                                                    0.0)


@pytest.mark.parametrize("line, message", [
    ('concurrency = "eight"', "field 'concurrency': concurrency must be an integer, got 'eight'"),
    ("graded = 1", "field 'graded': graded must be true or false, got 1"),
    ("timeout = true", "field 'timeout': timeout must be a number, got True"),
    ("timeout = nan", "field 'timeout': timeout must be a number, got nan"),
    ("model = 7", "field 'model': model must be a string, got 7"),
    ('mode = "vibes"', "unknown judge mode 'vibes'"),
    ('base_url = "localhost:8000"', "field 'base_url': base URL 'localhost:8000' is not an http(s) URL"),
])
def test_bad_values_name_the_file_and_the_key(tmp_path, line, message):
    cfg = _write_config(tmp_path, f'[llm]\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n{line}\n'.replace(
        'model = "m"\n', "" if line.startswith("model") else 'model = "m"\n').replace(
        'base_url = "http://127.0.0.1:1/v1"\n', "" if line.startswith("base_url") else
        'base_url = "http://127.0.0.1:1/v1"\n'))
    with pytest.raises(InputError) as info:
        resolve_llm_config(config=cfg, env={})
    assert message in str(info.value)
    assert str(info.value).startswith(str(cfg))


SECRET = "Zq7SECRETkey"


@pytest.mark.parametrize("line, message", [
    (f'api_key = ["sk-{SECRET}"]', "field 'api_key': api_key must be a string, got an array (not shown"),
    (f'api_key = {{ value = "sk-{SECRET}" }}', "field 'api_key': api_key must be a string, got an object (not shown"),
    (f'"sk-{SECRET}" = 1', "unknown key(s): 1 more not shown (not a setting name; it may be a secret)"),
    (f'timeout = 5\n"sk-{SECRET}" = "x"\nmodle = "m"', "unknown key(s): modle, 1 more not shown"),
    (f'base_url = "ann:{SECRET}@localhost:8000/v1"', "base URL 'ann:***@localhost:8000/v1' is not an http(s) URL"),
    (f'base_url = "http://ann:{SECRET}@localhost:x/v1"', "base URL 'http://ann:***@localhost:x/v1' has a bad port"),
    (f'base_url = ["http://ann:{SECRET}@localhost/v1"]', "base_url must be a string, got an array (not shown"),
])
def test_a_malformed_config_line_never_shows_a_secret(tmp_path, monkeypatch, line, message):
    cfg = _write_config(tmp_path, f'[llm]\nmodel = "m"\n{line}\n')
    with pytest.raises(InputError) as info:
        resolve_llm_config(config=cfg, env={})
    assert message in str(info.value) and SECRET not in str(info.value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "ts.jsonl").write_text(json.dumps({"id": "q1", "user_input": QUESTION, "reference": REFERENCE,
                                                   "retrieved_contexts": TEXTS}) + "\n")
    r = CliRunner().invoke(main, ["judge", str(tmp_path / "ts.jsonl"), "--config", str(cfg), "--records",
                                  str(tmp_path / "o.jsonl"), "--cache", str(tmp_path / "c.sqlite")])
    assert r.exit_code == 2 and r.stderr.startswith(f"rankwise: error: {cfg}: ") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and SECRET not in r.stdout + r.stderr
    written = [f for f in tmp_path.rglob("*") if f.is_file() and f != cfg]
    assert [f for f in written if SECRET.encode() in f.read_bytes()] == []


def test_library_errors_name_no_command_line_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for kwargs in ({"base_url": "http://127.0.0.1:1/v1"}, {"model": "m"},
                   {"model": "m", "base_url": "http://u:p@127.0.0.1:1/v1", "api_key": "k"}):
        with pytest.raises(InputError) as info:
            resolve_llm_config(env={}, **kwargs)
        assert "--" not in str(info.value), str(info.value)


def test_the_python_api_reads_the_config_file_as_the_cli_does(srv, tmp_path, monkeypatch):
    """judge_records used to read only the endpoint from rankwise.toml; now mode, cache and the rest
    too, and the CLI and the API give the same verdicts from the same file."""
    rows = [{"id": "q1", "user_input": QUESTION, "reference": REFERENCE,
             "retrieved_contexts": [{"id": f"c{i}", "text": t} for i, t in enumerate(TEXTS)]}]
    (tmp_path / "ts.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    _write_config(tmp_path, f'[llm]\nmodel = "judge-test"\nbase_url = "{srv.base_url}"\nmode = "question"\n'
                            'concurrency = 2\ncache = "api.sqlite"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANKWISE_CACHE", raising=False)
    records = records_from_testset(rows)
    summary = judge_records(records)
    assert summary.mode == "question" and summary.prompt_version.startswith("question-binary-v4+")
    assert records[0].verdicts("llm") == [1, 0, 1, 0]  # question mode; reference mode gives [1, 0, 0, 1]
    assert (tmp_path / "api.sqlite").exists() and srv.stats()["max_inflight"] <= 2
    srv.reset()
    r = CliRunner().invoke(main, ["judge", "ts.jsonl", "--records", "cli.jsonl", "--quiet"])
    assert r.exit_code == 0, r.output
    assert srv.stats()["requests"] == 0  # the same cache file, the same keys: all four from the cache
    assert load_records(tmp_path / "cli.jsonl")[0].verdicts("llm") == [1, 0, 1, 0]
    # an argument beats the file in both
    records = records_from_testset(rows)
    assert judge_records(records, mode="reference").mode == "reference"
    assert records[0].verdicts("llm") == [1, 0, 0, 1]


def test_an_endpoint_object_is_used_as_it_is(srv, tmp_path, monkeypatch):
    """Even one whose URL holds credentials (its key is the placeholder the resolver itself sets).
    """
    from rankwise.llm.client import Endpoint

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    rows = [{"id": "q1", "user_input": QUESTION, "reference": REFERENCE, "retrieved_contexts": TEXTS}]
    records = records_from_testset(rows)
    url = srv.base_url.replace("http://", "http://u:p@")
    summary = judge_records(records, endpoint=Endpoint("judge-test", url, "unused"), cache=tmp_path / "c.sqlite")
    assert summary.ok == 4 and records[0].verdicts("llm") == [1, 0, 0, 1]
    assert srv.stats()["authorization"].startswith("Basic ")
