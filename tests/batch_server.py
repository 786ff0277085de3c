"""A loopback OpenAI Batch API server (``/v1/files``, ``/v1/batches``) plus ``/v1/chat/completions``,
answering with the same deterministic judge as ``tests/llm_server.py``.

Behaviour is set by ``POST /config`` (JSON): ``mode`` ``complete`` (every item answered), ``expire``
(the batch ends ``expired`` with the first ``answered`` items done, the rest absent), ``partial`` (every
``fail_every``-th item gets an HTTP 500 in the error file); ``polls`` (how many GETs of a batch report
``in_progress`` before it ends). ``GET /stats``: files uploaded, batches created, polls, chat calls.

Standalone: ``python tests/batch_server.py`` prints ``LISTENING http://127.0.0.1:PORT/v1``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_server import _answer, _completion, _render, _text_of  # noqa: E402

LOCK = threading.Lock()
STATE: dict[str, Any] = {}


def _reset() -> None:
    STATE.clear()
    STATE.update(files={}, batches={}, config={"mode": "complete", "polls": 1, "fail_every": 2, "answered": 1},
                 stats={"uploads": 0, "creates": 0, "polls": 0, "chat": 0, "downloads": 0})


_reset()


def _chat_reply(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    users = [_text_of(m) for m in messages if m.get("role") == "user"]
    obj, _batch = _answer(users[0] if users else "")
    content, finish, refusal = _render(obj, None)
    return _completion(body.get("model", "m"), content, sum(len(_text_of(m)) for m in messages),
                       finish=finish, refusal=refusal)


def _finish(batch: dict[str, Any]) -> None:
    cfg = STATE["config"]
    lines = STATE["files"][batch["input_file_id"]].decode().splitlines()
    out, err = [], []
    for n, raw in enumerate(lines):
        req = json.loads(raw)
        cid = req["custom_id"]
        if cfg["mode"] == "expire" and n >= cfg["answered"]:
            continue
        if cfg["mode"] == "partial" and n % cfg["fail_every"] == cfg["fail_every"] - 1:
            err.append({"id": f"req_{n}", "custom_id": cid, "response": {"status_code": 500, "body": {
                "error": {"message": "injected", "type": "server_error"}}}, "error": None})
            continue
        out.append({"id": f"req_{n}", "custom_id": cid, "response": {
            "status_code": 200, "request_id": f"rq{n}", "body": _chat_reply(req["body"])}, "error": None})
    for kind, rows in (("output_file_id", out), ("error_file_id", err)):
        if rows:
            fid = f"file-out{len(STATE['files'])}"
            STATE["files"][fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            batch[kind] = fid
    batch["status"] = "expired" if cfg["mode"] == "expire" else "completed"
    batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, obj: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:  # noqa: N802
        with LOCK:
            if self.path == "/stats":
                return self._send(200, STATE["stats"])
            m = re.fullmatch(r"/v1/batches/([\w-]+)", self.path)
            if m and m.group(1) in STATE["batches"]:
                batch = STATE["batches"][m.group(1)]
                STATE["stats"]["polls"] += 1
                batch["polls"] += 1
                if batch["status"] == "in_progress" and batch["polls"] > STATE["config"]["polls"]:
                    _finish(batch)
                return self._send(200, {k: v for k, v in batch.items() if k != "polls"})
            m = re.fullmatch(r"/v1/files/([\w-]+)/content", self.path)
            if m and m.group(1) in STATE["files"]:
                STATE["stats"]["downloads"] += 1
                return self._send(200, None, STATE["files"][m.group(1)])
            return self._send(404, {"error": {"message": f"no {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        with LOCK:
            if self.path == "/config":
                STATE["config"].update(json.loads(body))
                return self._send(200, STATE["config"])
            if self.path == "/reset":
                _reset()
                return self._send(200, {})
            if self.path == "/v1/files":
                ctype = self.headers.get("Content-Type", "")
                boundary = ctype.split("boundary=")[-1].encode()
                parts = body.split(b"--" + boundary)
                content = purpose = None
                for part in parts:
                    head, _, data = part.partition(b"\r\n\r\n")
                    data = data[:-2] if data.endswith(b"\r\n") else data
                    if b'name="file"' in head:
                        content = data
                    elif b'name="purpose"' in head:
                        purpose = data.decode()
                if content is None or purpose != "batch":
                    return self._send(400, {"error": {"message": "file and purpose=batch required"}})
                fid = f"file-in{len(STATE['files'])}"
                STATE["files"][fid] = content
                STATE["stats"]["uploads"] += 1
                return self._send(200, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(content)})
            if self.path == "/v1/batches":
                req = json.loads(body)
                if req.get("input_file_id") not in STATE["files"] or req.get("endpoint") != "/v1/chat/completions":
                    return self._send(400, {"error": {"message": "bad batch request"}})
                bid = f"batch_{len(STATE['batches']) + 1}"
                STATE["batches"][bid] = {"id": bid, "object": "batch", "status": "in_progress", "polls": 0,
                                         "input_file_id": req["input_file_id"], "endpoint": req["endpoint"],
                                         "completion_window": req.get("completion_window")}
                STATE["stats"]["creates"] += 1
                return self._send(200, {k: v for k, v in STATE["batches"][bid].items() if k != "polls"})
            if self.path == "/v1/chat/completions":
                STATE["stats"]["chat"] += 1
                return self._send(200, _chat_reply(json.loads(body)))
            return self._send(404, {"error": {"message": f"no {self.path}"}})


class BatchServer:
    """The server as a subprocess: ``base_url``, ``call(path, payload)``, ``stop()``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())], stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("LISTENING "), line
        self.base_url = line.split()[1]
        self.root = self.base_url.rsplit("/v1", 1)[0]

    def call(self, path: str, payload: dict | None = None) -> dict[str, Any]:
        import urllib.request

        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.root + path, data=data, method="GET" if data is None else "POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=5)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"LISTENING http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()
