"""HTTP plumbing shared by the loopback test servers (llm, generator, synth, batch, rerank).

- ``chat_completion``: the OpenAI ``chat.completion`` body (one assistant choice, ``usage``).
- ``serve_app`` / ``add_control``: run an aiohttp app on a port until killed, announcing
  ``LISTENING <base url>``; the ``/stats``, ``/reset``, ``/config`` control endpoints.
- ``start_process`` / ``ServerProcess``: such a server as a subprocess on a free port, driven from a
  test.
- ``JSONHandler`` / ``serving``: an ``http.server`` handler with JSON in and out, served in a daemon
  thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


def chat_completion(content: Any, model: str, usage: tuple[int, int], *, completion_id: str = "chatcmpl-loopback",
                    created: int = 0, finish: str = "stop", **message: Any) -> dict[str, Any]:
    """A ``chat.completion`` body; ``usage`` is (prompt_tokens, completion_tokens), ``message``
    extra fields of the assistant message (e.g. ``refusal``).

    >>> chat_completion("hi", "m", (3, 1))["usage"]
    {'prompt_tokens': 3, 'completion_tokens': 1, 'total_tokens': 4}
    """
    prompt_tokens, completion_tokens = usage
    return {
        "id": completion_id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, **message}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


# ---- aiohttp servers, run as a script
# --------------------------------------------------------------------

def serve_app(app: Any, port: int = 0, host: str = HOST, *, backlog: int = 128) -> None:
    """Serve an aiohttp app until killed; print ``LISTENING <base url>`` once it accepts
    connections."""
    from aiohttp import web

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=backlog)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"LISTENING http://{host}:{bound}/v1", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def add_control(app: Any, *, stats: Callable[[], dict[str, Any]], reset: Callable[[], None],
                config: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """``GET /stats`` (``stats()``), ``POST /reset`` (``reset()``, answered ``{"ok": true}``) and
    ``POST /config`` (``config(json body)`` gives the reply) on an aiohttp app."""
    from aiohttp import web

    async def do_stats(_request: web.Request) -> web.Response:
        return web.json_response(stats())

    async def do_reset(_request: web.Request) -> web.Response:
        reset()
        return web.json_response({"ok": True})

    async def do_config(request: web.Request) -> web.Response:
        return web.json_response(config(await request.json()))

    app.router.add_get("/stats", do_stats)
    app.router.add_post("/reset", do_reset)
    app.router.add_post("/config", do_config)


# ---- a server subprocess, seen from a test
# ---------------------------------------------------------------

@dataclass
class ServerProcess:
    """A loopback server running as a subprocess: ``base_url`` for clients, and its control
    endpoints."""

    base_url: str
    proc: subprocess.Popen
    timeout: float = 10.0

    @property
    def root(self) -> str:
        return self.base_url.rsplit("/v1", 1)[0]

    def call(self, path: str, payload: dict | None = None) -> dict[str, Any]:
        """GET ``path`` (no payload) or POST it as JSON; the JSON reply."""
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.root + path, data=data, method="GET" if data is None else "POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        return self.call("/stats")

    def reset(self) -> None:
        self.call("/reset", {})

    def configure(self, **settings: Any) -> dict[str, Any]:
        return self.call("/config", settings)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_process(script: str | Path, *args: str, python: str | None = None,
                  timeout: float = 10.0) -> ServerProcess:
    """Run ``python SCRIPT --port 0 ARGS`` and wait until it prints ``LISTENING <base url>``."""
    proc = subprocess.Popen([python or sys.executable, str(Path(script).resolve()), "--port", "0", *args],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"{Path(script).name} did not start: {line!r}")
    return ServerProcess(line.split()[1], proc, timeout)


@contextlib.contextmanager
def running(handle: ServerProcess) -> Iterator[ServerProcess]:
    """``with running(start_process(...)) as srv:``; stops the process after."""
    try:
        yield handle
    finally:
        handle.stop()


# ---- http.server: JSON handler, served in a thread
# -------------------------------------------------------

class JSONHandler(BaseHTTPRequestHandler):
    """A quiet request handler that reads and writes JSON bodies with ``Content-Length``."""

    server: LoopbackHTTPServer

    def log_message(self, *args: Any) -> None:
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def read_json(self) -> Any:
        return json.loads(self.read_body())

    def send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, body: Any) -> None:
        self.send_bytes(status, json.dumps(body).encode())


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server on a free loopback port, with a request counter and a lock for shared
    state.

    Its listen backlog is a real server's, not socketserver's 5: a client with 128 requests in
    flight (the LLM client's default concurrency) overflowed a backlog of 5 on a loaded machine, and
    the refused connections were retried, so a test counting requests saw more than one per call
    (test_llm_rerank, intermittently)."""

    request_queue_size = 1024

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        super().__init__((HOST, port), handler)
        self.lock = threading.Lock()
        self.requests = 0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.server_port}/v1"

    def count(self) -> None:
        """One more request (thread-safe)."""
        with self.lock:
            self.requests += 1


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[LoopbackHTTPServer]:
    """Serve ``handler`` in a daemon thread: ``with serving(H) as srv: ... srv.base_url``; shut down
    after."""
    srv = LoopbackHTTPServer(handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
