"""The names Canvas gives the files of a *Download Submissions* zip, read into `CanvasName`, and the rule that
reads a misnamed notebook as the one the assignment expects.

- a file: ``<name>[_LATE]_<user id>_<attachment id>_<original filename>`` (``<name>`` is the sortable name in
  lower case, letters, digits and ``_`` only; a resubmitted file's name may carry ``-1``, ``-2``...);
- an anonymously graded assignment: ``[LATE_]anon_<anonymous id>_<attachment id>_<original filename>``;
  no user id, so the student is ``anon_<anonymous id>``;
- a *Website URL* or *Text entry* submission: ``<name>[_LATE]_<user id>_link.html`` / ``_text.html``, with
  no attachment id. Such an entry is no notebook: `entry_description` says what it is, for the row's reason.

A notebook a browser or Colab renamed (``Copy of similarity.ipynb``, ``similarity (1).ipynb``,
``similarity-2.ipynb``) is read as ``similarity.ipynb`` by `expected_name`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

FILE = re.compile(r"^(?P<name>[^/]+?)(?P<late>_(?:LATE|late))?_(?P<user>\d+)_(?P<attachment>\d+)_(?P<original>.+)$")
ANONYMOUS = re.compile(r"^(?P<late>(?:LATE|late)_)?anon_(?P<anon>[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<original>.+)$")
ENTRY = re.compile(r"^(?P<name>[^/]+?)(?P<late>_(?:LATE|late))?_(?P<user>\d+)_(?P<kind>link|text)\.html$")
# What browsers and Colab do to a file's name: "Copy of x", "x (1)", "x-1", "x(2)", "x copy".
RENAMED = re.compile(r"^(?:Copy of |Kopie von |Copie de |Copia de )*(?P<stem>.+?)(?:\s*\(\d+\)|-\d+| copy)*$")
URL = re.compile(r"""https?://[^\s"'<>]+""")
ENTRY_BYTES = 64 * 2**10


@dataclass(frozen=True)
class CanvasName:
    """What one file name of a Canvas zip says. ``user``: the Canvas user id ("" when anonymous);
    ``attachment``: Canvas's attachment id ("" for a link or text entry); ``kind``: "file", "link" or "text"."""

    name: str
    user: str
    attachment: str
    original: str
    late: bool
    kind: str = "file"

    @property
    def anonymous(self) -> bool:
        return not self.user


def parse(filename: str) -> CanvasName | None:
    """The `CanvasName` of a file name at the top of a Canvas zip; None for a name Canvas does not write."""
    if match := ANONYMOUS.match(filename):
        return CanvasName(f"anon_{match['anon']}", "", match["attachment"], match["original"], bool(match["late"]))
    if match := FILE.match(filename):
        return CanvasName(match["name"], match["user"], match["attachment"], match["original"], bool(match["late"]))
    if match := ENTRY.match(filename):
        return CanvasName(match["name"], match["user"], "", f"{match['kind']}.html", bool(match["late"]),
                          match["kind"])
    return None


def expected_name(filename: str, expected: set[str]) -> str | None:
    """The notebook of ``expected`` (file names) that ``filename`` stands for, itself or renamed by a browser or
    Colab; None when it stands for none (or for more than one)."""
    if filename in expected:
        return filename
    if not filename.endswith(".ipynb"):
        return None
    match = RENAMED.match(filename.removesuffix(".ipynb"))
    candidate = f"{match['stem']}.ipynb" if match else ""
    return candidate if candidate in expected else None


def entry_description(kind: str, data: bytes) -> str:
    """How a row's reason names a link or text entry: what it is and, for a link, where it points (``data``: the
    entry's first `ENTRY_BYTES`)."""
    if kind == "text":
        return "a text entry (text.html), not a notebook file"
    text = html.unescape(data.decode("utf-8", "replace"))
    url = URL.search(text)
    where = f" to {url.group(0)}" if url else ""
    colab = (" (a Colab link: ask for the notebook itself, File > Download > .ipynb)"
             if url and "colab." in url.group(0) else "")
    return f"a website URL entry{where}, not a notebook file{colab}"
