"""A loopback OpenAI Batch API server (``/v1/files``, ``/v1/batches``) plus
``/v1/chat/completions``, answering with the same deterministic judge as ``tests/llm_server.py``.

Behaviour is set by ``POST /config`` (JSON): ``mode`` ``complete`` (every item answered), ``expire``
(the batch ends ``expired`` with the first ``answered`` items done, the rest absent), ``partial``
(every ``fail_every``-th item gets an HTTP 500 in the error file); ``polls`` (how many GETs of a
batch report ``in_progress`` before it ends); ``faults``: per call (``upload``, ``create``,
``retrieve``, ``download``, ``list``) a list of faults served in order to the next calls, each
``{"status": 429, "retry_after": "0.1"}`` (an HTTP error, with a ``Retry-After`` header when given),
``{"drop": true}`` (the connection closed with no reply) or, for ``create``, ``{"drop_after":
true}`` (the batch created, then the connection closed with no reply), ``{"delay": 1.0}`` (the reply
sent that late), ``{"pass": true}`` (no fault: served normally); ``misbehave``: ``{"duplicate":
true, "unknown": N, "drop": N}`` (see :func:`_misbehave`); ``stall_upload_from`` N: the N-th upload
and later ones wait (uncounted) until the setting is removed. ``GET /stats``: files uploaded,
batches created (``created``: per batch its id, requests, the bytes of each line, the first
custom_id), polls (``polled``: per batch), downloads, chat calls, faults served per call
(``faults``), the last ``Authorization`` header received.

Standalone: ``python tests/batch_server.py`` prints ``LISTENING http://127.0.0.1:PORT/v1``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import time
from typing import Any

from _loopback import JSONHandler, LoopbackHTTPServer, ServerProcess, start_process
from llm_server import _answer, _completion, _render, _text_of

STATE: dict[str, Any] = {}


def _reset() -> None:
    STATE.clear()
    STATE.update(files={}, batches={}, config={"mode": "complete", "polls": 1, "fail_every": 2, "answered": 1,
                                               "faults": {}, "stall_upload_from": None},
                 stats={"uploads": 0, "creates": 0, "polls": 0, "chat": 0, "downloads": 0, "created": [],
                        "polled": {}, "faults": {}, "authorization": None})


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
    out = _misbehave(out, cfg.get("misbehave") or {})
    for kind, rows in (("output_file_id", out), ("error_file_id", err)):
        if rows:
            fid = f"file-out{len(STATE['files'])}"
            STATE["files"][fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            batch[kind] = fid
    batch["status"] = "expired" if cfg["mode"] == "expire" else "completed"
    batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


def _misbehave(out: list[dict[str, Any]], how: dict[str, Any]) -> list[dict[str, Any]]:
    """A misbehaving provider's output file: ``duplicate`` (every line preceded by a line with the
    same ``custom_id`` holding the next line's reply, i.e. a wrong one), ``unknown`` N (N lines with
    ids that were never sent), ``drop`` N (the last N lines left out though the batch completed)."""
    if how.get("drop"):
        out = out[:len(out) - int(how["drop"])]
    if how.get("duplicate"):
        wrong = [{**row, "response": out[(n + 1) % len(out)]["response"]} for n, row in enumerate(out)]
        out = [x for pair in zip(wrong, out, strict=True) for x in pair]
    for n in range(int(how.get("unknown") or 0)):
        out.append({**out[0], "custom_id": f"x{n}"})
    return out


def _fault(op: str) -> dict[str, Any] | None:
    """The next fault configured for ``op`` (consumed and counted), or None."""
    queue = STATE["config"]["faults"].get(op) or []
    if not queue:
        return None
    STATE["stats"]["faults"][op] = STATE["stats"]["faults"].get(op, 0) + 1
    return queue.pop(0)


class Handler(JSONHandler):
    def faulted(self, op: str) -> dict[str, Any] | None:
        """Serve the next fault of ``op`` if there is one (an error reply, or a dropped connection).
        """
        fault = _fault(op)
        if fault is None or fault.get("pass"):
            return None
        if fault.get("drop_after"):
            return fault
        if fault.get("delay"):  # answered late: after the client's timeout (other requests served meanwhile)
            self.server.lock.release()
            try:
                time.sleep(float(fault["delay"]))
            finally:
                self.server.lock.acquire()
            return None
        if fault.get("drop"):
            self.close_connection = True
            return fault
        data = json.dumps({"error": {"message": f"injected {fault['status']}", "type": "injected"}}).encode()
        self.send_response(int(fault["status"]))
        if fault.get("retry_after") is not None:
            self.send_header("Retry-After", str(fault["retry_after"]))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return fault

    def do_GET(self) -> None:  # noqa: N802
        with self.server.lock:
            if self.path != "/stats":
                STATE["stats"]["authorization"] = self.headers.get("Authorization")
            if self.path == "/stats":
                return self.send_json(200, STATE["stats"])
            if self.path.split("?")[0] == "/v1/batches":
                if self.faulted("list"):
                    return None
                data = [{k: v for k, v in b.items() if k != "polls"} for b in STATE["batches"].values()]
                return self.send_json(200, {"object": "list", "data": data[::-1]})
            m = re.fullmatch(r"/v1/batches/([\w-]+)", self.path)
            if m and m.group(1) in STATE["batches"]:
                if self.faulted("retrieve"):
                    return None
                batch = STATE["batches"][m.group(1)]
                STATE["stats"]["polls"] += 1
                STATE["stats"]["polled"][batch["id"]] = STATE["stats"]["polled"].get(batch["id"], 0) + 1
                batch["polls"] += 1
                if batch["status"] == "in_progress" and batch["polls"] > STATE["config"]["polls"]:
                    _finish(batch)
                return self.send_json(200, {k: v for k, v in batch.items() if k != "polls"})
            m = re.fullmatch(r"/v1/files/([\w-]+)/content", self.path)
            if m and m.group(1) in STATE["files"]:
                if self.faulted("download"):
                    return None
                STATE["stats"]["downloads"] += 1
                return self.send_bytes(200, STATE["files"][m.group(1)])
            return self.send_json(404, {"error": {"message": f"no {self.path}"}})

    def stall_upload(self) -> bool:
        """With ``stall_upload_from`` N: the N-th upload and later ones wait until the setting is
        removed, then fail uncounted (their client was killed meanwhile). True when this upload
        stalled."""
        stalled = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with self.server.lock:
                start = STATE["config"].get("stall_upload_from")
                if start is None or STATE["stats"]["uploads"] + 1 < start:
                    break
            stalled = True
            time.sleep(0.02)
        if stalled:
            with contextlib.suppress(OSError):
                self.send_json(503, {"error": {"message": "stalled upload dropped"}})
        return stalled

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_body()
        if self.path == "/v1/files" and self.stall_upload():
            return None
        with self.server.lock:
            if self.path.startswith("/v1/"):
                STATE["stats"]["authorization"] = self.headers.get("Authorization")
            if self.path == "/config":
                STATE["config"].update(json.loads(body))
                return self.send_json(200, STATE["config"])
            if self.path == "/reset":
                _reset()
                return self.send_json(200, {})
            if self.path == "/v1/files":
                if self.faulted("upload"):
                    return None
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
                    return self.send_json(400, {"error": {"message": "file and purpose=batch required"}})
                fid = f"file-in{len(STATE['files'])}"
                STATE["files"][fid] = content
                STATE["stats"]["uploads"] += 1
                return self.send_json(200, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(content)})
            if self.path == "/v1/batches":
                fault = self.faulted("create")
                if fault and not fault.get("drop_after"):
                    return None
                req = json.loads(body)
                if req.get("input_file_id") not in STATE["files"] or req.get("endpoint") != "/v1/chat/completions":
                    return self.send_json(400, {"error": {"message": "bad batch request"}})
                bid = f"batch_{len(STATE['batches']) + 1}"
                STATE["batches"][bid] = {"id": bid, "object": "batch", "status": "in_progress", "polls": 0,
                                         "input_file_id": req["input_file_id"], "endpoint": req["endpoint"],
                                         "completion_window": req.get("completion_window")}
                STATE["stats"]["creates"] += 1
                lines = STATE["files"][req["input_file_id"]].splitlines(keepends=True)
                STATE["stats"]["created"].append({"id": bid, "requests": len(lines), "line_bytes": [
                    len(x) for x in lines], "first": json.loads(lines[0])["custom_id"] if lines else None})
                if fault:  # created, but the client never hears of it
                    self.close_connection = True
                    return None
                return self.send_json(200, {k: v for k, v in STATE["batches"][bid].items() if k != "polls"})
            if self.path == "/v1/chat/completions":
                STATE["stats"]["chat"] += 1
                return self.send_json(200, _chat_reply(json.loads(body)))
            return self.send_json(404, {"error": {"message": f"no {self.path}"}})


def start_server() -> ServerProcess:
    """The server as a subprocess: ``base_url``, ``call(path, payload)``, ``stop()``."""
    return start_process(__file__)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = LoopbackHTTPServer(Handler, args.port)
    print(f"LISTENING {server.base_url}", flush=True)
    server.serve_forever()
