"""Attention, by hand: the instructor tool (`python -m autograder release`, `grade` and `export`) and
`autograder.checks`, the assertions the hidden tests import.

What book pages, benchmarks and tests share lives in the `course` package.
"""

import sys
from pathlib import Path

NBGRADER_CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"


def skip_unchecked_formats() -> None:
    """Leave out rfc3987_syntax, which jsonschema (imported by nbformat, so by nbgrader) loads when it is installed
    and whose ~40 grammars it compiles at import: a second or more of a core in every process of the grader's side,
    for a string format ("iri") that no notebook validation checks. Call it before nbformat is imported."""
    sys.modules.setdefault("rfc3987_syntax", None)
