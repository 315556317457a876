"""Generate the student notebooks (exercises/) from the nbgrader sources (solutions/)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from autograder.nbgrader_course import generate_assignment
from course import EXERCISES, ROOT, SOLUTIONS
from course.chapters import slugs


def release(release_dir: Path = ROOT / EXERCISES, assignments: tuple[str, ...] | None = None) -> list[Path]:
    """Regenerate the given chapters (default: every chapter of the registry); returns the folders written.
    Raises RuntimeError with nbgrader's log when one cannot be generated."""
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        db_url = f"sqlite:///{Path(scratch) / 'gradebook.db'}"
        for assignment in assignments or slugs():
            shutil.rmtree(release_dir / assignment, ignore_errors=True)
            error_log = generate_assignment(assignment, ROOT, SOLUTIONS, release_dir, db_url)
            if error_log:
                raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{error_log}")
            written.append(release_dir / assignment)
    return written
