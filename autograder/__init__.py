"""Attention, by hand: the instructor tool (`python -m autograder release`, `grade` and `export`) and
`autograder.checks`, the assertions the hidden tests import.

What book pages, benchmarks and tests share lives in the `course` package.
"""

from pathlib import Path

NBGRADER_CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"
