"""Drive a real headless Chromium over the Chrome DevTools Protocol (websocket-client), for report
tests.

    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)            # waits for the load event
        page.evaluate("document.title")
        page.console_errors                  # console.error calls, uncaught exceptions, log errors
        page.requests                        # every URL the page tried to fetch
        page.screenshot(tmp_path / "shot.png")

Chromium is found as $RANKWISE_CHROMIUM, ``chromium``, ``chromium-browser`` or ``google-chrome``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
         "--remote-allow-origins=*", "--remote-debugging-port=0"]


def find_chromium() -> str | None:
    env = os.environ.get("RANKWISE_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    def __init__(self, ws):
        self.ws = ws
        self._next = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        self._next += 1
        msg_id = self._next
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)
        raise TimeoutError(method)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    @property
    def console_errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    @property
    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, *, width: int = 1280, height: int | None = None) -> Path:
        """Full page (or ``height`` pixels) at ``width``."""
        full = int(self.send("Page.getLayoutMetrics")["cssContentSize"]["height"])
        height = full if height is None else min(height, full)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": clip})["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path


class Chromium:
    def __init__(self, binary: str, workdir: Path, width: int = 1280, height: int = 900):
        self.profile = Path(workdir) / "chromium-profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # left by an earlier browser
        self.log = open(Path(workdir) / "chromium.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}",
                                      f"--window-size={width},{height}", "about:blank"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self._port()

    @classmethod
    def start(cls, workdir: Path) -> Chromium:
        binary = find_chromium()
        if binary is None:
            raise FileNotFoundError("chromium")
        return cls(binary, workdir)

    def _port(self, timeout: float = 60.0) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see {self.log.name}")
            if marker.exists():
                text = marker.read_text().split()
                if text:
                    return int(text[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def open(self, path: Path, *, width: int = 1280, height: int = 900) -> Page:
        import websocket

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=30) as resp:
            targets = json.load(resp)
        target = next(t for t in targets if t.get("type") == "page")
        ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        page = Page(ws)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": Path(path).resolve().as_uri()})
        page.wait_for("Page.loadEventFired")
        return page

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log.close()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
