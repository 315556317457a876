"""Open built pages in headless Chromium with no network, and report what a reader's browser did.

The site is served from 127.0.0.1 by a thread of this process; Chromium resolves every other host
name to nothing (`--host-resolver-rules`), so a page that needs another host shows it here as it
would offline. The DevTools protocol (over websocket-client, which jupyter_server installs) gives
every request the page made and evaluates JavaScript in it once MathJax has finished.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import websocket

# What a page reports once MathJax's startup promise has settled: formulas Sphinx marked, those
# MathJax typeset, MathJax error boxes, and code or output blocks wider than their box.
_INSPECT = """
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const math = [...document.querySelectorAll('span.math, div.math')];
  const wide = [...document.querySelectorAll('div.highlight pre, div.cell_output pre, div.output pre')]
    .filter(box => box.scrollWidth > box.clientWidth + 1)
    .map(box => box.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), ''));
  return JSON.stringify({
    mathjax: !!(window.MathJax && MathJax.version), formulas: math.length,
    typeset: math.filter(el => el.querySelector('mjx-container')).length,
    errors: document.querySelectorAll('mjx-merror').length, overflowing: wide,
  });
})()
"""


@dataclass(frozen=True)
class PageReport:
    """What one page did in the browser: the URLs it requested and what _INSPECT found."""

    requests: tuple[str, ...]
    mathjax: bool
    formulas: int
    typeset: int
    errors: int
    overflowing: tuple[str, ...]  # the longest line of each code or output block wider than its box


def chromium() -> str | None:
    """The Chromium (or Chrome) executable on PATH, or None."""
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


@contextmanager
def _serve(folder: Path) -> Iterator[str]:
    """Serve folder on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _Tab:
    """One page target of a running Chromium, driven over the DevTools protocol."""

    def __init__(self, url: str) -> None:
        self.socket = websocket.create_connection(url, timeout=60)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(found.get("method") == event for found in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout} s")
            self.events.append(json.loads(self.socket.recv()))


def inspect_pages(site: Path, pages: list[str], width: int = 1280, height: int = 1000) -> dict[str, PageReport]:
    """Load each page (a path under site, e.g. 'book/02_scaled_attention.html') offline and report."""
    executable = chromium()
    if executable is None:
        raise FileNotFoundError("no chromium on PATH: install Debian's chromium (apt-get install chromium)")
    reports = {}
    with _serve(site) as base, tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             f"--window-size={width},{height}", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.is_file() or not port_file.read_text().strip():
                if time.monotonic() > deadline or browser.poll() is not None:
                    raise RuntimeError("chromium did not open its DevTools port")
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
            tab = _Tab(next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page"))
            tab.call("Network.enable")
            tab.call("Page.enable")
            for page in pages:
                tab.events.clear()
                tab.call("Page.navigate", url=base + page)
                tab.wait_for("Page.loadEventFired", timeout=60)
                found = tab.call("Runtime.evaluate", expression=_INSPECT, awaitPromise=True, returnByValue=True)
                result = json.loads(found["result"]["value"])
                tab.call("Runtime.evaluate", expression="new Promise(r => setTimeout(r, 500))", awaitPromise=True)
                requests = tuple(event["params"]["request"]["url"] for event in tab.events
                                 if event.get("method") == "Network.requestWillBeSent")
                reports[page] = PageReport(requests=requests, mathjax=result["mathjax"], formulas=result["formulas"],
                                           typeset=result["typeset"], errors=result["errors"],
                                           overflowing=tuple(result["overflowing"]))
            tab.socket.close()
        finally:
            os.killpg(browser.pid, signal.SIGTERM)  # the browser and its renderers, started above
            browser.wait(timeout=30)
    return reports
