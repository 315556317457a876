"""`Options`: everything `python -m autograder grade` was asked, as the command line filled it in.

Runs in the grader. Its field defaults are the command line's defaults: `autograder.__main__` reads them from
here, `Limits` and the modules that own each one, never a copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autograder.reports.similarity import DEFAULT_THRESHOLD
from autograder.sandbox.limits import Limits
from autograder.submissions.find import STAGING_BYTES
from course import ROOT, SOLUTIONS

SOURCE = ROOT / SOLUTIONS  # the nbgrader source assignments graded by default


@dataclass(frozen=True)
class Options:
    """Everything `grade` needs; the CLI fills it from its arguments (its defaults are these)."""

    submissions: Path
    out: Path
    jobs: int
    db_url: str = ""
    source: Path = SOURCE
    limits: Limits = Limits()
    unpacked_bytes: int = STAGING_BYTES  # what a zip of submissions may unpack in all
    isolate: bool = True
    warm: bool = True  # fork kernels from a preloaded process per assignment (`autograder.sandbox.zygote`); False: --cold
    progress: bool = True
    scheduler: str = ""  # a Dask scheduler's address: grade there (`autograder.workers.dask_pool`) instead of locally
    # list the pairs of students this similar (`autograder.reports.similarity`); None: off (--no-similarity)
    similarity_threshold: float | None = DEFAULT_THRESHOLD
    assignments: tuple[str, ...] = ()  # grade only these (all when empty)
    students: tuple[str, ...] = ()  # grade only these students (all when empty)
    force: bool = False  # grade again what is stored
    secret_file: Path | None = None  # the secret of the hidden inputs (`autograder.grading.secret`); None: DIR's own

    @property
    def grading_key(self) -> str:
        """Part of each task's cache key (`autograder.grading.tasks`): what else than the submission and the template
        changes a grade. Results graded under other limits, or with the sandbox on or off, are graded again."""
        return f"{self.limits.to_json()}:{self.isolate}"
