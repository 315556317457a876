"""Feedback pages show, and never run, what students wrote.

`SafeOutputs` is nbconvert's own HTML sanitiser (the `SanitizeHTML` preprocessor, bleach underneath)
set up for feedback: HTML outputs keep text, lists and tables and lose every script, event handler,
style and ``javascript:`` link (disallowed markup is escaped, so the student sees what they wrote as
text); Markdown outputs are rendered to HTML and sanitised the same way; outputs that exist to run
code in the page (``application/javascript``, widget, Bokeh and Plotly bundles) and SVG are
dropped, leaving their ``text/plain``; PNG and JPEG images stay. Markdown and raw cells the student
could write lose their raw HTML the same way (a locked cell that nbgrader restored from the gradebook
is the instructor's and is left as it is); a link written in Markdown syntax keeps its address there,
since nbgrader's template renders Markdown cells unsanitised, and only the policy below stops a
``javascript:`` one.

`with_csp(page)` puts a Content-Security-Policy first in a page's ``<head>``, so that a browser
refuses to run any script, load anything from elsewhere or frame anything, even if markup slipped
through: for outputs, the sanitiser and the policy each stop a planted script on their own.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import bleach
import nbformat
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbconvert.preprocessors.sanitize import SanitizeHTML

TAGS = (*bleach.ALLOWED_TAGS, "p", "div", "span", "pre", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "sub",
        "sup", "table", "caption", "thead", "tbody", "tfoot", "tr", "th", "td")
ATTRIBUTES = MappingProxyType({**{tag: tuple(names) for tag, names in bleach.ALLOWED_ATTRIBUTES.items()},
                               "*": ("class",), "table": ("border",), "th": ("colspan", "rowspan", "align"),
                               "td": ("colspan", "rowspan", "align")})

# No exception for scripts at all: the feedback pages do not vendor MathJax (nbgrader's template links it
# from a CDN), so the policy blocks that too and TeX in the page shows as its source. Inline styles are the
# template's own (the sanitiser lets no student style through); images are inline data: URIs.
CSP = "; ".join(["default-src 'none'", "script-src 'none'", "object-src 'none'", "connect-src 'none'",
                 "frame-src 'none'", "base-uri 'none'", "form-action 'none'", "style-src 'unsafe-inline'",
                 "img-src data:", "font-src data:"])
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)


def restored_by_nbgrader(cell: nbformat.NotebookNode) -> bool:
    """True for a locked cell that kept its ``grade_id``: nbgrader's autograde put back the instructor's source
    (it drops the ``grade_id`` of a cell the gradebook does not know)."""
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("locked") and meta.get("grade_id"))


class SafeOutputs(SanitizeHTML):
    """nbconvert's `SanitizeHTML` with the tags of text and tables, Markdown outputs rendered then sanitised,
    a note in place of an output that had nothing safe to show, and no output metadata that loads or frames.

    Use ``SafeOutputs().preprocess(notebook, {})`` on a graded notebook as nbformat reads it (text outputs are
    strings) before its feedback page is rendered (`autograder.harness.feedback_page`).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(tags=list(TAGS), attributes={tag: list(names) for tag, names in ATTRIBUTES.items()},
                         sanitized_output_types={"text/html"}, **kwargs)

    def preprocess_cell(self, cell: nbformat.NotebookNode, resources: dict, index: int):
        """Sanitise a cell's outputs, or the source of a Markdown or raw cell the student could have written."""
        if cell.cell_type == "markdown" and restored_by_nbgrader(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, index)

    def sanitize_code_outputs(self, outputs: list) -> list:
        """Each rich output keeps only sanitised HTML and nbconvert's safe types; an emptied one says why."""
        for output in outputs:
            if "data" not in output:
                continue
            data = output.data
            markdown = data.pop("text/markdown", None)
            if markdown is not None and "text/html" not in data:
                data["text/html"] = markdown2html_mistune(markdown)
            shown = self.safe_output_keys | self.sanitized_output_types
            dropped = sorted(kind for kind in data if kind not in shown)
            super().sanitize_code_outputs([output])
            if not set(data) & shown:
                data["text/plain"] = (f"[an output of type {', '.join(dropped) or 'none'}, not shown: "
                                      "feedback pages never run code]")
            metadata = output.get("metadata", {})
            metadata.pop("filenames", None)  # a path or address the page would load the image from
            for value in metadata.values():
                if isinstance(value, dict):
                    value.pop("isolated", None)  # an iframe around the HTML
        return outputs


def with_csp(page: str) -> str:
    """``page`` (a whole HTML document) with `CSP_META` as the first element of its ``<head>``."""
    head = HEAD.search(page)
    if head is None:
        raise ValueError("a feedback page without <head>: there is nowhere to put its Content-Security-Policy")
    return f"{page[:head.end()]}\n{CSP_META}{page[head.end():]}"
