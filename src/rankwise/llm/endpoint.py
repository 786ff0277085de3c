"""Where the model is: the endpoint (URL, model, key) resolved from arguments, the environment and
the config file's ``[llm]`` table (its keys listed once, :data:`CONFIG_KEYS`); credentials in a URL
taken out and masked in every message.
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import (
    InputError,
)

__all__ = ["OPENAI_URL", "CONFIG_KEYS", "CONFIG_TYPES", "ENDPOINT_KEYS", "config_paths", "load_config", "Endpoint",
           "mask_url", "check_base_url", "split_credentials", "resolve_endpoint", "value_shape"]


OPENAI_URL = "https://api.openai.com/v1"


#: every key of the config file's [llm] table, once, and the type its value must have (the
#: endpoint's own keys, which may hold a secret, are checked by :func:`resolve_endpoint` without
#: showing their values)
ENDPOINT_KEYS = ("model", "base_url", "api_key", "api_key_env")
CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    **{key: (str,) for key in ENDPOINT_KEYS},
    "mode": (str,), "graded": (bool,), "batch": (bool,), "batch_size": (int,), "relevant_from": (int,),
    "prompt": (str,), "concurrency": (int,), "rpm": (int, float), "timeout": (int, float),
    "max_retries": (int,), "temperature": (int, float), "price_in": (int, float), "price_out": (int, float),
    "cache": (str,), "max_calls": (int,), "breaker_failures": (int,), "breaker_seconds": (int, float),
    "batch_poll": (int, float), "batch_discount": (int, float), "batch_max_requests": (int,),
    "batch_max_bytes": (int,),  # the Batch API's: read by batch_api.resolve_batch_settings
}
CONFIG_KEYS = frozenset(CONFIG_TYPES)


def config_paths() -> list[Path]:
    """Where a config file is looked for when ``--config`` is not given, first found wins."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return [Path("rankwise.toml"), Path(base) / "rankwise" / "config.toml"]


def load_config(path: str | PathLike | None = None) -> tuple[dict[str, Any], str | None]:
    """The ``[llm]`` table of the config file and the file's path (``({}, None)`` when there is
    none).

    Example::

        # rankwise.toml
        [llm]
        model = "qwen2.5:7b"
        base_url = "http://localhost:11434/v1"
        concurrency = 8
    """
    from rankwise.llm.prompts import load_toml

    if path is not None:
        candidates, explicit = [Path(path)], True
    else:
        candidates, explicit = config_paths(), False
    for p in candidates:
        if not p.is_file():
            if explicit:
                raise InputError("config file not found", source=p)
            continue
        data = load_toml(p)
        table = data.get("llm", {})
        if not isinstance(table, dict):
            raise InputError("[llm] must be a table", source=p, field="llm")
        unknown = set(table) - CONFIG_KEYS
        if unknown:
            # a key that is no setting name may be a pasted secret (sk-...): named only when it
            # looks like one
            names = sorted(k for k in unknown if re.fullmatch(r"[a-z_]{1,30}", k))
            other = len(unknown) - len(names)
            shown = ", ".join([*names, *([f"{other} more not shown (not a setting name; it may be a secret)"]
                                         if other else [])])
            raise InputError(f"unknown key(s): {shown}; [llm] takes {sorted(CONFIG_KEYS)}", source=p, field="llm")
        return dict(table), str(p)
    return {}, None


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests: model name, base URL (None = OpenAI's) and API key."""

    model: str
    base_url: str | None = None
    api_key: str | None = None

    @property
    def url(self) -> str:
        """The base URL as shown in messages: a password in it is masked (``user:***@host``)."""
        return mask_url((self.base_url or OPENAI_URL).rstrip("/"))


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def mask_url(url: str) -> str:
    """``url`` fit to show: a password in it written ``***``, whatever else is wrong with the URL
    (no scheme, a bad port, a broken IPv6 host); never raises.

    Example:
        >>> mask_url("http://ann:s3cret@127.0.0.1:8000/v1")
        'http://ann:***@127.0.0.1:8000/v1'
        >>> mask_url("ann:s3cret@host:abc/v1"), mask_url("http://[::1/v1")
        ('ann:***@host:abc/v1', 'http://[::1/v1')
    """
    m = _SCHEME.match(url)
    scheme, rest = (url[:m.end()], url[m.end():]) if m else ("", url)
    at = rest.rfind("@")
    if at < 0:
        return url
    userinfo, host = rest[:at], rest[at + 1:]
    if ":" not in userinfo:  # a user name alone: no secret in it
        return url
    return f"{scheme}{userinfo.split(':', 1)[0]}:***@{host}"


def check_base_url(base_url: str, *, source: str | None = None) -> None:
    """Refuse, before any call, a base URL that cannot be an endpoint: not http(s), no host, a bad
    port, a broken IPv6 host. The message shows the URL with its password masked.

    Example:
        >>> check_base_url("http://u:pw@/v1")
        Traceback (most recent call last):
        rankwise.errors.InputError: <input>: field 'base_url': base URL 'http://u:***@/v1' has no host (e.g. http://localhost:11434/v1)
    """
    shown = mask_url(base_url)
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        why = "has a bad port" if "port" in str(exc).lower() else "is not a valid URL"
        raise InputError(f"base URL {shown!r} {why}", source=source, field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"base URL {shown!r} is not an http(s) URL (e.g. http://localhost:11434/v1)",
                         source=source, field="base_url")
    if not parts.hostname:
        raise InputError(f"base URL {shown!r} has no host (e.g. http://localhost:11434/v1)", source=source,
                         field="base_url")


def split_credentials(url: str | None) -> tuple[str | None, str | None]:
    """The URL without ``user:password@`` and the ``Authorization: Basic`` value they stand for.

    Example:
        >>> split_credentials("http://ann:s3cret@127.0.0.1:8000/v1")
        ('http://127.0.0.1:8000/v1', 'Basic YW5uOnMzY3JldA==')
        >>> split_credentials("http://127.0.0.1:8000/v1")
        ('http://127.0.0.1:8000/v1', None)
    """
    if not url:
        return url, None
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]  # host[:port] as written (an IPv6 host keeps its brackets)
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def resolve_endpoint(*, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                     config: dict[str, Any] | None = None, config_source: str | None = None,
                     env: dict[str, str] | None = None) -> Endpoint:
    """Arguments win over the environment, which wins over the config file's ``[llm]`` table.

    Example:
        >>> resolve_endpoint(model="m", base_url="http://127.0.0.1:8000/v1", env={}).api_key
        'unused'
    """
    env = os.environ if env is None else env
    config = config or {}
    model = model or env.get("RANKWISE_JUDGE_MODEL") or config.get("model")
    if not model:
        raise InputError("no model given: give one (the model setting), set RANKWISE_JUDGE_MODEL, or put "
                         "model = \"...\" in the [llm] table of rankwise.toml", source=config_source, field="model")
    for key, value in (("model", model), ("base_url", base_url or config.get("base_url")),
                       ("api_key", api_key or config.get("api_key")), ("api_key_env", config.get("api_key_env"))):
        if value is not None and not isinstance(value, str):
            # a secret may be in it (a key, a URL's password): its type is named, never its value
            shown = repr(value) if key == "model" else f"{value_shape(value)} (not shown: it may hold a secret)"
            raise InputError(f"{key} must be a string, got {shown}", source=config_source, field=key)
    from_file = not (base_url or env.get("OPENAI_BASE_URL"))
    base_url = base_url or env.get("OPENAI_BASE_URL") or config.get("base_url") or None
    if base_url is not None:
        check_base_url(base_url, source=config_source if from_file else None)
    has_credentials = split_credentials(base_url)[1] is not None
    if has_credentials and (api_key or config.get("api_key")):
        raise InputError(f"the base URL {Endpoint(str(model), base_url).url} holds credentials (user:password@) "
                         "and an API key is given too; an endpoint takes one Authorization header: drop one",
                         field="api_key")
    key_env = config.get("api_key_env")
    api_key = (api_key or env.get("OPENAI_API_KEY") or (env.get(key_env) if key_env else None)
               or config.get("api_key") or None)
    if has_credentials:
        api_key = "unused"  # the URL's credentials go in the Authorization header instead
    if api_key is None:
        if base_url is None or base_url.rstrip("/") == OPENAI_URL:
            raise InputError("no API key for api.openai.com: give one (the api_key setting), set OPENAI_API_KEY, "
                             "or use the base URL of a local server (vLLM, Ollama, llama.cpp ...)",
                             source=config_source, field="api_key")
        api_key = "unused"  # local servers ignore it; the SDK insists on one
    return Endpoint(str(model), base_url, api_key)


def value_shape(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
