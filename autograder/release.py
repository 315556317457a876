"""Generate the student notebooks (exercises/) from the nbgrader sources (solutions/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import NBGRADER_CONFIG
from course import ROOT
from course.chapters import slugs


def nbgrader_command(*args: str, db_url: str) -> list[str]:
    """The command line that runs plain nbgrader with the course config and a given gradebook."""
    return [sys.executable, "-m", "nbgrader", *args, f"--JupyterApp.config_file={NBGRADER_CONFIG}",
            f"--CourseDirectory.db_url={db_url}"]


def nbgrader_environment() -> dict[str, str]:
    """os.environ with this Python's scripts first on PATH: nbgrader's gradebook runs `alembic` from PATH."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}


def generate(assignment: str, release_dir: Path, db_url: str) -> Path:
    """Run ``nbgrader generate_assignment`` for one assignment into ``release_dir``; returns its folder."""
    command = nbgrader_command("generate_assignment", assignment, "--force", "--log-level=WARN",
                               f"--CourseDirectory.release_directory={release_dir}", db_url=db_url)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=nbgrader_environment())
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{done.stdout}{done.stderr}")
    return release_dir / assignment


def release(release_dir: Path = ROOT / "exercises", assignments: tuple[str, ...] | None = None) -> list[Path]:
    """Regenerate the given chapters (default: every chapter of the registry); returns the folders written."""
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        db_url = f"sqlite:///{Path(scratch) / 'gradebook.db'}"
        for assignment in assignments or slugs():
            shutil.rmtree(release_dir / assignment, ignore_errors=True)
            written.append(generate(assignment, release_dir, db_url))
    return written
