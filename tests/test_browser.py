"""The offline browser check of tests/test_book.py can fail: on a small page made to break every
rule, headless Chromium reports the outside request, the untypeset formula and the overflowing code."""

from __future__ import annotations

from pathlib import Path

from tests.browser import chromium, inspect_pages

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
