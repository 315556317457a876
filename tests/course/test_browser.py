"""The offline browser check of tests/course/test_book.py can fail: on a small page made to break every
rule, headless Chromium reports the outside request, the untypeset formula and the overflowing code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.course.browser import chromium, inspect_pages

# Each test starts headless Chromium; tests/course/test_book.py, whose check this tests, is slow.
pytestmark = pytest.mark.slow

_BAD_PAGE = """<!DOCTYPE html>
<html><head><script src="https://cdn.example.org/mathjax.js"></script></head>
<body style="width: 400px">
<span class="math">\\(QK^\\top\\)</span>
<div class="highlight"><pre style="overflow: auto">{long_line}</pre></div>
<div class="highlight"><pre style="overflow: auto">short</pre></div>
</body></html>
"""


def test_the_browser_check_sees_outside_requests_raw_math_and_overflow(tmp_path: Path) -> None:
    assert chromium(), "no chromium on PATH: .ci/run installs Debian's chromium (apt-get install chromium)"
    (tmp_path / "page.html").write_text(_BAD_PAGE.format(long_line="x = 1  # " + "y" * 120))
    report = inspect_pages(tmp_path, ["page.html"], width=800)["page.html"]
    assert "https://cdn.example.org/mathjax.js" in report.requests, report.requests
    assert not report.mathjax and report.formulas == 1 and report.typeset == 0, report
    assert len(report.overflowing) == 1 and report.overflowing[0].startswith("x = 1"), report.overflowing


# An SVG figure 800 user units wide with 10-unit text, shown 400 CSS pixels wide: 5-pixel text.
_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="800pt" height="200pt" viewBox="0 0 800 200">'
        '<text x="10" y="50" style="font: 10px sans-serif">tick</text>'
        '<text x="10" y="90" style="font: 30px sans-serif">title</text></svg>')
_PHONE_PAGE = """<!DOCTYPE html>
<html><head><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="margin: 0"><main><article class="bd-article">
<p><code class="literal">{long_code}</code></p>
<figure style="margin: 0"><img src="figure.svg" style="width: 400px" alt="a figure"></figure>
</article></main>
<button class="primary-toggle">menu</button><dialog id="pst-primary-sidebar-modal" style="width: 300px"><a href="#">1</a></dialog>
</body></html>
"""


def test_the_browser_check_sees_sideways_scrolling_small_figure_text_and_a_dead_toggle(tmp_path: Path) -> None:
    (tmp_path / "figure.svg").write_text(_SVG)
    (tmp_path / "page.html").write_text(_PHONE_PAGE.format(long_code="x" * 200))
    report = inspect_pages(tmp_path, ["page.html"], width=400, tap_toggles=True)["page.html"]
    assert report.page_overflow > 0 and any("xxxx" in found for found in report.sticking_out), report
    [(source, smallest)] = report.figure_text_px
    assert source.endswith("figure.svg") and abs(smallest - 5.0) < 0.5, report.figure_text_px
    assert report.sidebars_open == (False, False), "a toggle with no handler cannot open its sidebar"
    assert report.load_ms > 0 and report.bytes > 0, report


def test_the_browser_check_sees_a_working_toggle(tmp_path: Path) -> None:
    (tmp_path / "figure.svg").write_text(_SVG)
    page = _PHONE_PAGE.format(long_code="short").replace(
        "</body>", "<script>document.querySelector('.primary-toggle').addEventListener('click', () => "
                   "document.getElementById('pst-primary-sidebar-modal').showModal());</script></body>")
    (tmp_path / "page.html").write_text(page)
    report = inspect_pages(tmp_path, ["page.html"], width=400, tap_toggles=True)["page.html"]
    assert report.page_overflow <= 0 and not report.sticking_out, report
    assert report.sidebars_open == (True, False), report
