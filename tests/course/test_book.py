"""The book builds with warnings as errors, every chapter has its figures and exercise link, no
graded solution reaches the site, and every chapter page follows the page rules a reader relies on:
objectives first, a worked example before any reference code, a summary and a pointer onwards at the
end, figures with alt text and captions, and launch links that open."""

from __future__ import annotations

import html as html_lib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course import ROOT
from course.chapters import chapters
from course.machine import COLUMNS as MACHINE_COLUMNS
from course.notebooks import code_cells

CHAPTERS = [f"book/{found.slug}" for found in chapters()]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    build = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n",
                            "--keep-going", "--path-output", str(out)], capture_output=True, text=True)
    warnings = [line for line in build.stdout.splitlines() + build.stderr.splitlines()
                if "WARNING:" in line or "ERROR" in line or "Traceback" in line]
    # A page whose cell raised leaves its traceback in reports/<page>.err.log: show the end of each.
    reports = [f"--- {log.name}:\n" + "\n".join(log.read_text().splitlines()[-25:])
               for log in sorted((out / "_build" / "html" / "reports").rglob("*.log"))]
    assert build.returncode == 0, "the book build failed:\n" + "\n".join(
        warnings[-40:] or build.stdout.splitlines()[-40:]) + "\n" + "\n".join(reports)
    return out / "_build" / "html"


def _solution_lines() -> dict[str, set[str]]:
    """Distinctive lines of every graded solution (long enough not to occur by chance), by assignment."""
    lines: dict[str, set[str]] = {}
    for chapter in chapters():
        found = lines.setdefault(chapter.slug, set())
        for _, source in code_cells(chapter.solution):
            for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", source, re.S):
                found |= {line.strip() for line in block.splitlines() if len(line.strip()) >= 40}
    return lines


def _secrets_for(path: Path, lines: dict[str, set[str]]) -> set[str]:
    """Solution lines that must not appear in a built file.

    A later chapter's exercise notebook may hand earlier chapters' answers to the student as given
    code (chapter 5 provides chapter 4's KVCache); no other file may contain any solution.
    """
    exercise = {found.exercise.name: found.slug for found in chapters()}.get(path.name)
    return {line for assignment, found in lines.items() if exercise is None or assignment >= exercise
            for line in found}


@pytest.mark.slow
def test_the_book_builds_with_every_chapter(site: Path) -> None:
    for chapter in ["book/intro", *CHAPTERS]:
        assert (site / f"{chapter}.html").is_file(), f"{chapter} was not built"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_has_figures_and_links_its_exercise(site: Path, chapter: str) -> None:
    html = (site / f"{chapter}.html").read_text()
    figures = re.findall(r'<img[^>]+src="[^"]*_images/[^"]+\.(?:svg|png)"', html)
    assert len(figures) >= 2, f"{chapter} shows {len(figures)} figures made at build time; want at least 2"
    assignment = Path(chapter).name
    assert re.search(r'_downloads/[0-9a-f]+/[^"]+\.ipynb"', html), f"{chapter} has no download link to its notebook"
    assert f"exercises/{assignment}/" in html, f"{chapter} has no launch link to exercises/{assignment}"


@pytest.mark.slow
def test_no_graded_solution_reaches_the_site(site: Path) -> None:
    lines = _solution_lines()
    assert all(lines.values()), "found no solution lines to look for"
    for path in site.rglob("*"):
        if path.suffix in {".html", ".ipynb", ".md", ".txt", ".js", ".py"} and path.is_file():
            text = path.read_text(errors="ignore")
            assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, f"{path} holds nbgrader source"
            leaked = [line for line in _secrets_for(path, lines) if line in text]
            assert not leaked, f"{path.relative_to(site)} contains solution code: {leaked[:3]}"


def _headings(source: str) -> list[tuple[int, str]]:
    """(line number, text) of every level-2 heading of a MyST page, outside code cells."""
    found, fence = [], None
    for number, line in enumerate(source.splitlines()):
        marker = re.match(r"^(`{3,}|~{3,})", line)
        if marker and (fence is None or marker.group(1) == fence):
            fence = None if fence else marker.group(1)
        elif fence is None and line.startswith("## "):
            found.append((number, line[3:].strip()))
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_opens_with_objectives_and_closes_with_a_summary(chapter: str) -> None:
    source = (ROOT / f"{chapter}.md").read_text()
    lines = source.splitlines()
    headings = _headings(source)
    titles = [title for _, title in headings]
    assert titles and titles[0] == "You will learn", f"{chapter}: the first section must be '## You will learn', not {titles[:1]}"
    start = headings[0][0] + 1
    end = headings[1][0] if len(headings) > 1 else len(lines)
    bullets = [line for line in lines[start:end] if re.match(r"^[-*] ", line)]
    assert 3 <= len(bullets) <= 5, f"{chapter}: 'You will learn' lists {len(bullets)} objectives; want 3 to 5"
    assert titles[-3:] == ["Summary", "What's next", "Exercise"], \
        f"{chapter} must end with '## Summary', '## What's next', '## Exercise'; it ends with {titles[-3:]}"
    summary = lines[headings[-3][0] + 1:headings[-2][0]]
    assert sum(bool(re.match(r"^[-*] ", line)) for line in summary) >= 3, f"{chapter}: the summary needs bullets"
    assert "{exercise}" in "\n".join(lines[headings[-1][0]:]), f"{chapter}: the Exercise section has no {{exercise}}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_works_an_example_before_calling_the_reference(chapter: str) -> None:
    source = (ROOT / f"{chapter}.md").read_text()
    lines = source.splitlines()
    worked = [number for number, title in _headings(source) if "worked example" in title.lower()]
    assert worked, f"{chapter} has no section whose heading says 'worked example'"
    first_call = next((n for n, line in enumerate(lines) if "load_solution(" in line and "import" not in line), len(lines))
    code_after = "\n".join(lines[worked[0]:first_call])
    assert worked[0] < first_call, f"{chapter}: the worked example (line {worked[0] + 1}) comes after load_solution( (line {first_call + 1})"
    assert "```{code-cell}" in code_after and "print(" in code_after, \
        f"{chapter}: the worked example must compute and print its numbers in a code cell before load_solution("


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_has_alt_text_and_a_caption(site: Path, chapter: str) -> None:
    html = (site / f"{chapter}.html").read_text()
    images = re.findall(r'<img[^>]+src="[^"]*_images/[^"]+\.(?:svg|png)"[^>]*>', html)
    assert images, f"{chapter} has no build-time figure"
    for image in images:
        alt = re.search(r'alt="([^"]*)"', image)
        assert alt and len(alt.group(1).split()) >= 4, f"{chapter}: a figure lacks alt text: {image[:160]}"
    figures = re.findall(r"<figure.*?</figure>", html, re.S)
    in_figures = sum(len(re.findall(r'<img[^>]+_images/[^"]+\.(?:svg|png)', figure)) for figure in figures)
    captioned = [figure for figure in figures if re.search(r"<figcaption>.*?\S.*?</figcaption>", figure, re.S)]
    assert in_figures == len(images), f"{chapter}: {len(images) - in_figures} figures are not in a <figure>"
    assert len(captioned) == len(figures), f"{chapter}: {len(figures) - len(captioned)} figures have no caption"


@pytest.mark.slow
def test_no_colab_link_opens_a_markdown_page(site: Path) -> None:
    for path in site.rglob("*.html"):
        for url in re.findall(r'href="(https://colab\.research\.google\.com[^"]*)"', path.read_text()):
            assert url.endswith(".ipynb"), f"{path.relative_to(site)} links Colab to {url}, which Colab cannot open"


# Three pages heavy in formulas and code, read in a real browser with every outside host unreachable.
BROWSER_PAGES = ["book/02_scaled_attention.html", "book/06_rope.html", "book/07_flash_attention.html"]
COLUMNS = MACHINE_COLUMNS  # code and printed lines fit this many columns (book/_static/course.css sizes the boxes)


@pytest.mark.slow
def test_pages_render_offline_in_a_browser(site: Path) -> None:
    """MathJax (served by the site) typesets every formula, nothing is requested from another host,
    and no code or output block is wider than its box, in headless Chromium 1440 pixels wide."""
    from tests.course.browser import chromium, inspect_pages

    assert chromium(), "no chromium on PATH: .ci/run installs Debian's chromium (apt-get install chromium)"
    assert (site / "_static/mathjax/tex-mml-chtml.js").is_file(), \
        "the site has no _static/mathjax: `make book` fetches MathJax into _vendor/mathjax first"
    for page, report in inspect_pages(site, BROWSER_PAGES, width=1440).items():
        outside = [url for url in report.requests if not url.startswith("http://127.0.0.1:")
                   and not url.startswith(("data:", "blob:"))]
        assert not outside, f"{page} requested other hosts (the site must stand alone): {outside[:5]}"
        assert report.mathjax, f"{page}: MathJax did not load from _static/mathjax"
        assert report.formulas > 0 and report.typeset == report.formulas and not report.errors, \
            f"{page}: MathJax typeset {report.typeset} of {report.formulas} formulas ({report.errors} errors)"
        assert not report.overflowing, f"{page}: code wider than its box: {report.overflowing[:3]}"


def test_the_machine_line_fits_the_page_whatever_the_machine_is_called() -> None:
    from course.machine import describe_machine

    long_cpu = "Intel(R) Xeon(R) Platinum 8480+ Processor with a very long marketing name @ 2.60GHz"
    described = describe_machine(cpu=long_cpu, gpu="NVIDIA H100 80GB HBM3 " * 5)
    assert all(len(line) <= COLUMNS for line in described.splitlines()), described
    assert "Xeon" in described and "H100" in described, described
    assert describe_machine(cpu="Intel(R) Xeon(R) Processor @ 2.60GHz").startswith("CPU: Intel Xeon @ 2.60GHz")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_code_lines_fit_the_page(chapter: str) -> None:
    source = (ROOT / f"{chapter}.md").read_text()
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", source, re.S | re.M)
    code = [line for cell in cells for line in re.sub(r"^---\n.*?^---\n", "", cell, flags=re.S | re.M).splitlines()]
    long = [line for line in code if len(line) > COLUMNS]
    assert not long, f"{chapter}: {len(long)} code lines exceed {COLUMNS} columns: {long[:3]}"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_printed_lines_fit_the_page(site: Path, chapter: str) -> None:
    html = (site / f"{chapter}.html").read_text()
    printed = [html_lib.unescape(re.sub(r"<[^>]+>", "", line)) for block in
               re.findall(r'<div class="output[^"]*"><div class="highlight"><pre>(.*?)</pre>', html, re.S)
               for line in block.splitlines()]
    long = [line for line in printed if len(line) > COLUMNS]
    assert not long, f"{chapter}: {len(long)} printed lines exceed {COLUMNS} columns: {long[:3]}"


@pytest.mark.slow
def test_no_placeholder_hub_and_a_hub_button_only_for_a_named_hub(site: Path) -> None:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    hub = config.get("launch_buttons", {}).get("jupyterhub_url")
    for path in site.rglob("*.html"):
        html = path.read_text()
        assert "example.edu" not in html and "unpkg.com" not in html, f"{path.relative_to(site)}: placeholder or CDN"
        if not hub:
            assert "/hub/user-redirect/" not in html, f"{path.relative_to(site)} links a JupyterHub but none is named"


SMALLEST_TEXT_PX = 9  # figure text, in CSS pixels, at a phone's and a desktop's width


@pytest.mark.slow
@pytest.mark.parametrize("width", [400, 800, 1400])
def test_pages_work_on_a_phone_a_tablet_and_a_desktop(site: Path, width: int) -> None:
    """Every page in headless Chromium `width` CSS pixels wide: the page never scrolls sideways,
    every figure's smallest text is at least SMALLEST_TEXT_PX, and under 992 pixels (where the
    sidebars fold away) a tap on the visible toggles opens the chapter list and the page's contents."""
    from tests.course.browser import inspect_pages

    pages = ["book/intro.html", "book/setup.html", *[f"{chapter}.html" for chapter in CHAPTERS]]
    for page, report in inspect_pages(site, pages, width=width, tap_toggles=width < 992).items():
        assert report.page_overflow <= 0, \
            f"{page} at {width} px scrolls {report.page_overflow} px sideways: {report.sticking_out[:3]}"
        small = [(source.rsplit("/", 1)[-1], px) for source, px in report.figure_text_px
                 if px is None or px < SMALLEST_TEXT_PX]
        assert not small, f"{page} at {width} px: figure text under {SMALLEST_TEXT_PX} CSS px (None: a bitmap): {small}"
        if width < 992:
            assert report.sidebars_open == (True, True), \
                f"{page} at {width} px: a tap on the visible toggle opened (chapters, contents) = {report.sidebars_open}"


def test_every_chapter_draws_its_further_reading_from_the_bibliography() -> None:
    keys = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(), re.M))
    cited: set[str] = set()
    for chapter in CHAPTERS:
        source = (ROOT / f"{chapter}.md").read_text()
        section = re.search(r"^## Further reading\n(.*?)(?=^## )", source, re.S | re.M)
        assert section, f"{chapter} has no '## Further reading' section"
        found = set(re.findall(r"\{cite:t?p?\}`([^`]+)`", section.group(1)))
        assert found, f"{chapter}: its further reading cites nothing from references.bib"
        assert found <= keys, f"{chapter} cites keys that references.bib lacks: {found - keys}"
        cited |= found
    assert keys <= cited, f"references.bib entries no chapter reads: {keys - cited}"


@pytest.mark.slow
def test_the_setup_page_is_linked_from_the_intro_and_every_exercise(site: Path) -> None:
    assert (site / "book/setup.html").is_file(), "the Set up page was not built"
    for page in ["book/intro", *CHAPTERS]:
        assert 'href="setup.html' in (site / f"{page}.html").read_text(), f"{page} does not link the Set up page"
    setup = (ROOT / "book/setup.md").read_text()
    requires = re.search(r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f"Python {requires} or newer" in setup, f"the Set up page must ask for the Python pyproject.toml requires ({requires})"
    assert "download.pytorch.org/whl/cpu" in setup and "nbgrader validate" in setup
    assert re.search(r"^nbgrader==", (ROOT / "binder/requirements.txt").read_text(), re.M), "Binder cannot validate"
