"""String formats of JSON Schema that the grader's side never checks: `skip_unchecked_formats`.

jsonschema (imported by nbformat, so by nbgrader) loads rfc3987_syntax when it is installed and compiles its ~40
grammars at import: a second or more of a core in every process of the grader's side (the grader, each worker, the
tests), for a string format ("iri") that no notebook validation checks. The kernel never imports jsonschema.
"""

from __future__ import annotations

import sys


def skip_unchecked_formats() -> None:
    """Leave rfc3987_syntax out of this process (jsonschema then checks no "iri" format). Call it before nbformat is
    imported."""
    sys.modules.setdefault("rfc3987_syntax", None)
