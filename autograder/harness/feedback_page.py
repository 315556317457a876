"""A graded notebook's feedback page, rendered in the worker from the notebook in memory: nbgrader's GenerateFeedback
page (its exporter, configured as nbgrader configures it, its ``feedback`` template and its preprocessors) with no
course folder, no gradebook and no file.

nbgrader's GenerateFeedback reads each autograded notebook from a course folder, runs GetGrades (each graded cell's
score and comment, and the notebook's total, from the gradebook) and nbconvert's CSSHTMLHeaderPreprocessor, exports
it with nbconvert's HTMLExporter, which parses its whole page again (BeautifulSoup) to give each image without one an
alt text, and writes the page. `render_feedback` takes the sanitised notebook
(`autograder.harness.feedback.sanitize_for_feedback`) and the job's `CellResult`s instead: `CellScores` does
GetGrades' work from them, `ImageAltText` puts the alt text in before rendering, and the pygments CSS is made once.
One `FeedbackExporter` per worker (`CompiledTemplates`, kept in `autograder.harness.notebook.Kept`) compiles the
template on the first page and keeps the HTML of the instructor's cells, the same in every submission: the worker that
makes a template renders its released notebooks once and writes that HTML beside it (`record_instructor_cells`), and
each worker reads it before its first page of the assignment (`CompiledTemplates.load`).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters import get_metadata
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import compute_checksum, is_grade, is_solution, is_task
from jinja2 import pass_context
from traitlets import Bool

from autograder.harness.feedback import sanitize_for_feedback, wrapped
from autograder.harness.safe_html import restored_by_nbgrader, with_csp
from autograder.records import CellResult, Template

NO_RESPONSE = "No response."  # nbgrader's SaveAutoGrades: the comment on an answer cell the student left as released
NO_ALT = "No description has been provided for this image"  # nbconvert's HTMLExporter: an image without alt text
IMAGES = ("image/png", "image/jpeg")  # outputs the classic template shows as <img> (SVG: SafeOutputs drops it)
KEPT_CELLS = 4096  # highlighted instructor's cells a worker keeps at most (a course has a few hundred)
# What ipykernel says of its language, which nbclient writes into every notebook it runs: the lexer of a graded page.
KERNEL_LANGUAGE = (("name", "python"), ("pygments_lexer", "ipython3"))


class CellScores(Preprocessor):
    """nbgrader's GetGrades from the job's results rather than a gradebook: each graded and task cell's score and
    points, each answer and task cell's comment, and the notebook's total (``resources["nbgrader"]``: its
    ``results``, the notebook's `CellResult`s, in; ``score``, ``max_score`` and ``late_penalty`` out).

    A comment is nbgrader's own: `NO_RESPONSE` on an answer cell whose source is still the released one (nbgrader's
    checksum; a cell the sanitiser changed is one the student wrote), a manually graded cell's pending note (its
    `CellResult` message). A cell marked graded whose grade_id has no result (nbgrader's GenerateFeedback fails on it:
    no page at all) is shown as an ungraded cell. No late penalty: a job has no submission time.
    """

    enabled = Bool(True)

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        results: Sequence[CellResult] = resources["nbgrader"]["results"]
        by_id = {result.grade_id: result for result in results}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if meta is not None:
                _score(cell, meta, by_id.get(meta.get("grade_id")))
        resources["nbgrader"].update(score=sum(result.points for result in results), late_penalty=0.0,
                                     max_score=sum(result.max_points for result in results))
        return nb, resources


def _score(cell: nbformat.NotebookNode, meta: dict, result: CellResult | None) -> None:
    """GetGrades' ``score``, ``points`` and ``comment`` of one cell, in its nbgrader metadata ``meta``."""
    if result is None:
        meta["grade"] = meta["task"] = False
    if not meta.get("grade_id"):
        return
    if is_grade(cell) or is_task(cell):
        meta["score"], meta["points"] = result.points, result.max_points
    if is_solution(cell) or is_task(cell):
        unanswered = is_solution(cell) and not is_task(cell) and meta.get("checksum") == compute_checksum(cell)
        meta["comment"] = result.message if result is not None and result.manual else \
            NO_RESPONSE if unanswered else None


class ImageAltText(Preprocessor):
    """What HTMLExporter's last pass over its page does for nbgrader's template: each PNG and JPEG output without alt
    text gets `NO_ALT` (in its metadata, which the template reads), so the page is not parsed again."""

    enabled = Bool(True)

    def preprocess_cell(self, cell: nbformat.NotebookNode, resources: dict, index: int):
        for output in cell.get("outputs", []):
            for kind in IMAGES:
                if kind in output.get("data", {}) and \
                        (get_metadata(output, "alt", kind) or get_metadata(cell, "alt")) is None:
                    output.setdefault("metadata", {}).setdefault(kind, {})["alt"] = NO_ALT
        return cell, resources


class KeptHighlight(Highlight2HTML):
    """nbconvert's code highlighter that keeps, in ``kept``, the HTML of the instructor's cells (the locked ones that
    nbgrader restored: the same source in every submission), so that a worker highlights each of them once."""

    def __init__(self, kept: dict[tuple[str, str, str], str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kept = kept

    def __call__(self, source: str, language: str | None = None, metadata: dict | None = None) -> str:
        key = (source, language or self.pygments_lexer, str((metadata or {}).get("magics_language", "")))
        if key in self.kept:
            return self.kept[key]
        html = super().__call__(source, language, metadata)
        if len(self.kept) < KEPT_CELLS and restored_by_nbgrader(nbformat.NotebookNode(metadata=metadata or {})):
            self.kept[key] = html
        return html


def _generate_feedback_config():
    """nbgrader's configuration of GenerateFeedback's exporter: its ``feedback`` template, the template folders and
    no default preprocessors."""
    return GenerateFeedback(coursedir=CourseDirectory()).config


def _pygments_css() -> list[str]:
    """The CSS nbconvert's CSSHTMLHeaderPreprocessor puts in each page: pygments' style, and no custom.css (nbgrader
    looks for one in its throw-away course folder, which has none)."""
    with tempfile.TemporaryDirectory() as empty:
        _, resources = CSSHTMLHeaderPreprocessor().preprocess(nbformat.v4.new_notebook(), {"config_dir": empty})
    return resources["inlining"]["css"]


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter configured as nbgrader's GenerateFeedback configures it, with `CellScores` in place of
    GetGrades and `ImageAltText` in place of HTMLExporter's second parse of the page; its template is compiled on the
    first page (nbconvert keeps it), pygments' CSS made once, the instructor's cells highlighted once."""

    def __init__(self) -> None:
        super().__init__(config=_generate_feedback_config())
        self.register_preprocessor(CellScores, enabled=True)
        self.register_preprocessor(ImageAltText, enabled=True)
        self.css = _pygments_css()
        self.highlighted: dict[tuple[str, str, str], str] = {}
        self.highlighters: dict[str | None, KeptHighlight] = {}
        self.rendered: dict[str, str] = {}
        self.shown: dict[str, nbformat.NotebookNode] = {}  # the page's notebook metadata, by the path the filter asks
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self.shown, parent=self))

    def from_notebook_node(self, nb: nbformat.NotebookNode, resources: dict | None = None, **kw: Any):
        """The page of ``nb``: HTMLExporter's export with its filters set as it sets them for ``nb``, without the pass
        that parses the whole page again (`ImageAltText` did its work)."""
        resources = {**(resources or {}), "inlining": {"css": list(self.css)}}
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name"))
        if lexer not in self.highlighters:
            self.highlighters[lexer] = KeptHighlight(self.highlighted, pygments_lexer=lexer, parent=self)
        self.register_filter("highlight_code", self.highlighters[lexer])
        self.shown.clear()
        self.shown[""] = nb.metadata  # WidgetsDataTypeFilter made without resources looks the notebook up by ""
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    @pass_context
    def markdown2html(self, context: Any, source: str) -> str:
        """HTMLExporter's Markdown filter, whose HTML of an instructor's Markdown cell (locked and restored by nbgrader,
        without attachments: the same in every submission) is kept and made once."""
        cell = context.get("cell")
        if not isinstance(cell, nbformat.NotebookNode) or not restored_by_nbgrader(cell) or cell.get("attachments") \
                or cell.get("source") != source:
            return super().markdown2html(context, source)
        if source in self.rendered:
            return self.rendered[source]
        html = super().markdown2html(context, source)
        if len(self.rendered) < KEPT_CELLS:
            self.rendered[source] = html
        return html


class CompiledTemplates:
    """What a worker keeps to render feedback pages (`autograder.harness.notebook.Kept`): one `FeedbackExporter`,
    made on the first page, whose compiled template and HTML of the instructor's cells serve every later one."""

    def __init__(self) -> None:
        self.read: set[Path] = set()  # the records of instructor's cells read (`load`)

    @cached_property
    def exporter(self) -> FeedbackExporter:
        return FeedbackExporter()

    def load(self, record: Path) -> None:
        """Keep the HTML of a template's instructor's cells, as `record_instructor_cells` wrote it when the template
        was made, so that the first page of its assignment highlights only what the student wrote; read once. A
        template made before templates carried it has none (its pages highlight every cell): the record changes
        no grade, so it does not change the template's key, and no stored result is graded again for it."""
        if record in self.read or not record.exists():
            return
        self.read.add(record)
        given = json.loads(record.read_text())
        exporter = self.exporter
        for source, lexer, magics, html in given["code"][:KEPT_CELLS - len(exporter.highlighted)]:
            exporter.highlighted[(source, lexer, magics)] = html
        for source, html in given["markdown"][:KEPT_CELLS - len(exporter.rendered)]:
            exporter.rendered[source] = html

    def warm(self) -> None:
        """Render a page of one Markdown cell and one code cell with its output, and throw it away: the template is
        compiled and what pages use loaded (pygments' IPython lexer, the Markdown renderer) before the first
        submission's page. The process the workers are forked from (`autograder.workers.forks`) does it once for
        all of them."""
        code = nbformat.v4.new_code_cell("def f(x):\n    return x", execution_count=1,
                                         outputs=[nbformat.v4.new_output("stream", name="stdout", text="warm")])
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("*warm* `up`"), code],
                                            metadata={"language_info": dict(KERNEL_LANGUAGE)})
        render_feedback(notebook, "warm-up", (), self)


def render_feedback(notebook: nbformat.NotebookNode, name: str, cells: Sequence[CellResult],
                    templates: CompiledTemplates) -> str:
    """The feedback page of the notebook ``name`` (without .ipynb): ``notebook`` autograded and sanitised
    (`autograder.harness.feedback.sanitize_for_feedback`; left as it is), scored by the job's ``cells`` (those of
    other notebooks are left out), as nbgrader's GenerateFeedback shows it, with long lines wrapped and the
    Content-Security-Policy first in its head."""
    results = tuple(cell for cell in cells if cell.notebook == name)
    resources = {"nbgrader": {"notebook": name, "results": results}, "metadata": {"name": name, "path": ""}}
    page, _ = templates.exporter.from_notebook_node(notebook, resources)
    return with_csp(wrapped(page))


def record_instructor_cells(template: Template, templates: CompiledTemplates) -> None:
    """Render the page of every released notebook of ``template`` as a submission that kept its instructor's cells
    shows it (their sources restored from the template's gradebook, as nbgrader's OverwriteCells restores them, then
    sanitised, run by a kernel) through ``templates``, and write the HTML of those cells that they keep (locked, with
    a ``grade_id``) to `Template.feedback_record`, for `CompiledTemplates.load`."""
    from nbgrader.preprocessors import OverwriteCells

    sources = set()
    for path in sorted(template.released.glob("*.ipynb")):
        resources = {"nbgrader": {"notebook": path.stem, "assignment": template.assignment,
                                  "db_url": f"sqlite:///{template.gradebook}"}}
        notebook, _ = OverwriteCells().preprocess(nbformat.read(path, as_version=4), resources)
        sanitize_for_feedback(notebook)
        notebook.metadata["language_info"] = dict(KERNEL_LANGUAGE)
        render_feedback(notebook, path.stem, (), templates)
        sources |= {cell.source for cell in notebook.cells if restored_by_nbgrader(cell)}
    exporter = templates.exporter
    template.feedback_record.write_text(json.dumps({
        "code": [[*key, html] for key, html in exporter.highlighted.items() if key[0] in sources],
        "markdown": [[source, html] for source, html in exporter.rendered.items() if source in sources]}))


def feedback_pages(notebooks: Mapping[str, nbformat.NotebookNode], cells: Sequence[CellResult],
                   templates: CompiledTemplates) -> dict[str, str]:
    """Each notebook's feedback page by file name (``<name>.html``, `render_feedback`); a page that cannot be
    rendered (its error in the worker's log) is left out, and costs only its student's page."""
    pages = {}
    for name, notebook in notebooks.items():
        try:
            pages[f"{name}.html"] = render_feedback(notebook, name, cells, templates)
        except Exception as error:  # noqa: BLE001 - a notebook nbconvert cannot render is its own student's problem
            print(f"feedback page {name} could not be rendered: {type(error).__name__}: {error}", file=sys.stderr)
    return pages
