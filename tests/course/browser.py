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
# MathJax typeset, MathJax error boxes, code or output blocks wider than their box, how far the page
# scrolls sideways and which elements of its content stick out of the window (not counting those
# inside a box that scrolls or clips), the smallest text of each figure in CSS pixels (an SVG's
# font size times the scale it is shown at; None for a bitmap, whose text cannot be measured), and
# the page's load time and bytes.
_INSPECT = """
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const math = [...document.querySelectorAll('span.math, div.math')];
  const wide = [...document.querySelectorAll('div.highlight pre, div.cell_output pre, div.output pre')]
    .filter(box => box.scrollWidth > box.clientWidth + 1)
    .map(box => box.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), ''));
  const width = document.documentElement.clientWidth;
  const contained = el => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(up).overflowX)) { return true; }
    }
    return false;
  };
  const content = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const sticking = [...content.querySelectorAll('*')].filter(el => {
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.right > width + 1 && !contained(el);
  }).map(el => `${el.tagName.toLowerCase()}.${el.className}: ${(el.textContent || '').trim().slice(0, 60)}`);
  const figures = [];
  for (const img of document.querySelectorAll('figure img')) {
    if (!img.complete) {
      img.loading = 'eager';
      await new Promise(done => { img.onload = done; img.onerror = done; setTimeout(done, 5000); });
    }
    if (!img.src.endsWith('.svg')) { figures.push([img.src, null]); continue; }
    const svg = new DOMParser().parseFromString(await (await fetch(img.src)).text(), 'image/svg+xml');
    const box = svg.documentElement.getAttribute('viewBox').trim().split(/[ ,]+/).map(Number);
    const scale = img.getBoundingClientRect().width / box[2];
    const sizes = [...svg.querySelectorAll('text, tspan')]
      .map(el => /font(?:-size)?:[^;]*?([0-9.]+)px/.exec(el.getAttribute('style') || ''))
      .filter(found => found).map(found => Number(found[1]) * scale);
    figures.push([img.src, sizes.length ? Math.min(...sizes) : null]);
  }
  const timing = performance.getEntriesByType('navigation')[0];
  const bytes = [timing, ...performance.getEntriesByType('resource')].reduce((a, e) => a + (e.transferSize || 0), 0);
  return JSON.stringify({
    mathjax: !!(window.MathJax && MathJax.version), formulas: math.length,
    typeset: math.filter(el => el.querySelector('mjx-container')).length,
    errors: document.querySelectorAll('mjx-merror').length, overflowing: wide,
    page_overflow: document.documentElement.scrollWidth - width, sticking_out: sticking.slice(0, 5),
    figure_text_px: figures, load_ms: timing.loadEventEnd - timing.startTime, bytes: bytes,
  });
})()
"""

OPEN_MS = 3000  # how long a tapped sidebar may take to open

# The visible toggle of a sidebar ('primary' or 'secondary'): its centre, for a tap; null if none.
_TOGGLE = """
(() => {
  const button = [...document.querySelectorAll('.%s-toggle')].find(b => {
    const box = b.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(b).visibility !== 'hidden';
  });
  if (!button) { return null; }
  const box = button.getBoundingClientRect();
  return JSON.stringify([box.left + box.width / 2, box.top + box.height / 2]);
})()
"""

# After the tap: is the sidebar open, on screen, with links in it? Asked on every frame until it is, for at most
# OPEN_MS (it may slide in); then it is closed again.
_OPENED = """
(async () => {
  const dialog = document.getElementById('pst-%(side)s-sidebar-modal');
  const shown = el => {
    const box = el && el.getBoundingClientRect();
    return !!box && box.width > 100 && box.right > 0 && box.left < innerWidth
      && getComputedStyle(el).visibility !== 'hidden' && el.querySelectorAll('a').length > 0;
  };
  const opened = () => (dialog && dialog.open && shown(dialog)) || false;
  const start = performance.now();
  while (!opened() && performance.now() - start < %(wait)d) {
    await new Promise(frame => requestAnimationFrame(frame));
  }
  const found = opened();
  if (dialog && dialog.open) { dialog.close(); }
  return found;
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
    page_overflow: int  # CSS pixels the page scrolls sideways
    sticking_out: tuple[str, ...]  # content elements past the window's right edge, outside any scroll box
    figure_text_px: tuple[tuple[str, float | None], ...]  # (figure, its smallest text in CSS pixels)
    load_ms: float  # from navigation to the end of the load event
    bytes: int  # transferred: the page and everything it loaded
    sidebars_open: tuple[bool, bool] | None  # a tap on the visible primary, secondary toggle opened it


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
        # No Origin header, as a DevTools client that is no web page: Chromium 111 and later refuse a connection
        # whose origin --remote-allow-origins does not name (a 403 at the handshake).
        self.socket = websocket.create_connection(url, timeout=60, suppress_origin=True)
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


def _tap_opens(tab: _Tab, side: str) -> bool:
    """Tap the visible toggle of a sidebar, as a finger would, and say whether the sidebar opened."""
    found = tab.call("Runtime.evaluate", expression=_TOGGLE % side, returnByValue=True)["result"].get("value")
    if not found:
        return False
    x, y = json.loads(found)
    tab.call("Input.dispatchTouchEvent", type="touchStart", touchPoints=[{"x": x, "y": y}])
    tab.call("Input.dispatchTouchEvent", type="touchEnd", touchPoints=[])
    opened = tab.call("Runtime.evaluate", expression=_OPENED % {"side": side, "wait": OPEN_MS}, awaitPromise=True,
                      returnByValue=True)
    return bool(opened["result"]["value"])


def inspect_pages(site: Path, pages: list[str], width: int = 1280, height: int = 1000,
                  tap_toggles: bool = False) -> dict[str, PageReport]:
    """Load each page (a path under site, e.g. 'book/02_scaled_attention.html') offline, in a window
    `width` CSS pixels wide (a phone's touch screen under 600), and report; with tap_toggles, also
    tap each sidebar's visible toggle."""
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
            tab.call("Network.setCacheDisabled", cacheDisabled=True)  # each page as a first visit
            tab.call("Page.enable")
            tab.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=width < 600)
            tab.call("Emulation.setTouchEmulationEnabled", enabled=True, maxTouchPoints=1)
            for page in pages:
                tab.events.clear()
                tab.call("Page.navigate", url=base + page)
                tab.wait_for("Page.loadEventFired", timeout=60)
                found = tab.call("Runtime.evaluate", expression=_INSPECT, awaitPromise=True, returnByValue=True)
                result = json.loads(found["result"]["value"])
                # The fonts that laid out text (MathJax's among them) are the page's last requests.
                tab.call("Runtime.evaluate", expression="document.fonts.ready.then(() => true)", awaitPromise=True)
                requests = tuple(event["params"]["request"]["url"] for event in tab.events
                                 if event.get("method") == "Network.requestWillBeSent")
                sidebars = (_tap_opens(tab, "primary"), _tap_opens(tab, "secondary")) if tap_toggles else None
                reports[page] = PageReport(requests=requests, mathjax=result["mathjax"], formulas=result["formulas"],
                                           typeset=result["typeset"], errors=result["errors"],
                                           overflowing=tuple(result["overflowing"]),
                                           page_overflow=result["page_overflow"],
                                           sticking_out=tuple(result["sticking_out"]),
                                           figure_text_px=tuple(map(tuple, result["figure_text_px"])),
                                           load_ms=result["load_ms"], bytes=result["bytes"], sidebars_open=sidebars)
            tab.socket.close()
        finally:
            os.killpg(browser.pid, signal.SIGTERM)  # the browser and its renderers, started above
            browser.wait(timeout=30)
    return reports
