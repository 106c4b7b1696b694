"""Headless Chromium driven over the DevTools protocol (CDP), for the tests of the HTML pages.

Why CDP over one websocket (``websocket-client``) rather than playwright: the Debian ``chromium`` is the
browser (playwright cannot download its own here), and the few commands the tests need (navigate,
evaluate, key presses, screenshot, the console and network events) are plain CDP messages.

    with Browser() as browser:
        page = browser.open(path)          # a file:// URL, waits for the load event
        page.evaluate("document.title")
        page.requests, page.errors          # every request the page made; console errors, exceptions
        page.screenshot(artifact_path)
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("SCRAPY_SIMHASH_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
"""Screenshots land here (git-ignored) so that a person can look at them after the run."""

TIMEOUT = 60.0
"""Seconds any one wait may take (a loaded machine; this is a limit, not a measurement)."""


def chromium_or_skip() -> str:
    """Chromium's path; skips without it, except under `make test` (SCRAPY_SIMHASH_REQUIRE_CHROMIUM=1),
    which installs it and must not pass by skipping the browser tests."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        message = f"no Chromium at {CHROMIUM} (scripts/install-system-deps.sh installs it)"
        if os.environ.get("SCRAPY_SIMHASH_REQUIRE_CHROMIUM"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


class Page:
    """One tab: its events are collected as they arrive."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.loaded = False

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"log: {params['entry']['text']} ({params['entry'].get('url', '')})")
        elif method == "Page.loadEventFired":
            self.loaded = True

    def evaluate(self, expression: str, *, await_promise: bool = False) -> Any:
        """The JSON value of ``expression`` in the page (an exception in it fails the test)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def press(self, key: str) -> None:
        """A real key press (keyDown with its text, keyUp), as a person's keyboard sends it."""
        special = {"ArrowRight": 39, "ArrowLeft": 37, "ArrowDown": 40, "ArrowUp": 38}
        if key in special:
            common: dict[str, Any] = {"key": key, "code": key, "windowsVirtualKeyCode": special[key]}
            self.send("Input.dispatchKeyEvent", type="rawKeyDown", **common)
        else:
            common = {"key": key, "code": f"Key{key.upper()}", "windowsVirtualKeyCode": ord(key.upper())}
            self.send("Input.dispatchKeyEvent", type="keyDown", text=key, **common)
        self.send("Input.dispatchKeyEvent", type="keyUp", **common)

    def screenshot(self, path: Path) -> Path:
        """A full-page PNG at ``path`` (its directory is made)."""
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        print(f"screenshot: {path}")
        return path


class Browser:
    """A headless Chromium process with its own profile directory, and one CDP connection to it."""

    def __init__(self) -> None:
        import websocket

        self._profile = tempfile.mkdtemp(prefix="scrapy-simhash-chromium-")
        self._process = subprocess.Popen(
            [
                chromium_or_skip(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile}",
                "--window-size=1280,900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"Chromium did not start (exit status {self._process.poll()})")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self._ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=TIMEOUT)
        self._next_id = 0
        self._pages: dict[str, Page] = {}

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _receive(self) -> dict[str, Any]:
        reply = json.loads(self._ws.recv())
        if "method" in reply and reply.get("sessionId") in self._pages:
            self._pages[reply["sessionId"]]._event(reply["method"], reply.get("params", {}))
        return reply

    def open(self, path: Path) -> Page:
        """A new tab showing ``path`` from a file:// URL, after its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = self._pages[session] = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send(
            "Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False
        )
        page.send("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + TIMEOUT
        while not page.loaded:
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not finish loading")
            self._receive()
        page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))", await_promise=True)
        return page

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
