"""nbgrader through its Python API: the course's config (`autograder/nbgrader_config.py`, which holds the
course id), an nbgrader converter run in this process, and `generate_assignment`, the one way this project
generates an assignment (`release`, each assignment's grading template through `generate_template`, the grading
benchmark).

Runs wherever nbgrader's course is needed: the grader (its environment; `release`), the worker (templates,
gradebooks) and the worker that writes the class gradebook. Imports nothing of autograder but its config's path.
"""

from __future__ import annotations

import io
import logging
import os
import sqlite3
import sys
import uuid
import warnings
from collections.abc import Mapping
from contextlib import closing
from functools import cache
from pathlib import Path

from autograder import NBGRADER_CONFIG

MEMDB = sqlite3.sqlite_version_info >= (3, 36)  # SQLite's in-memory databases shared by name (the memdb VFS)


def nbgrader_environment() -> dict[str, str]:
    """os.environ with this Python's scripts first on PATH: nbgrader's gradebook runs `alembic` from PATH."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}


def load_config():
    """The course's nbgrader config, as `autograder/nbgrader_config.py` sets it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader(NBGRADER_CONFIG.name, str(NBGRADER_CONFIG.parent)).load_config()


@cache
def course_id() -> str:
    """The course id of every gradebook, as the nbgrader config names it."""
    return load_config().CourseDirectory.course_id


def course_config(root: Path, db_url: str, **overrides: str):
    """The course's nbgrader config pointed at another course folder ``root`` and gradebook ``db_url``;
    each keyword sets one more ``CourseDirectory`` option."""
    config = load_config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = db_url
    for name, value in overrides.items():
        setattr(config.CourseDirectory, name, value)
    return config


def stamp_new_gradebook(db_url: str) -> None:
    """Stamp the database ``db_url`` with the head revision of nbgrader's migrations when it has no table yet, as
    nbgrader's `Gradebook` would on creating it, so that it does not.

    nbgrader stamps every new gradebook with that revision, which it reads by running `alembic heads` in a
    subprocess (seconds of imports, on every new gradebook); it skips the stamp when the database has tables.
    The same revision comes from alembic's Python API in a fraction of a second: nbgrader is configured by the
    database it is given, not patched.
    """
    import nbgrader
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(db_url, future=True)
    try:
        if inspect(engine).get_table_names():
            return
        config = Config()
        config.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
        head = ScriptDirectory.from_config(config).get_current_head()
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head})
    finally:
        engine.dispose()


def job_log() -> logging.Logger:
    """The log nbgrader's errors go to, emptied: one job's (`logged` reads it)."""
    log = logging.getLogger("autograder.nbgrader")
    if not log.handlers:
        log.addHandler(logging.StreamHandler(io.StringIO()))
        log.setLevel(logging.ERROR)
        log.propagate = False
    stream = log.handlers[0].stream
    stream.seek(0)
    stream.truncate()
    return log


def logged(log: logging.Logger) -> str:
    """What was written to ``log`` (`job_log`) since it was emptied."""
    return log.handlers[0].stream.getvalue()


def run_converter(converter_class, config, assignment: str, student: str | None = None, **traits: object) -> str:
    """Run an nbgrader converter (Autograde, GenerateFeedback, GenerateAssignment) in this process; returns its
    error log ('' when it succeeded). ``traits`` are set on the converter as they are (a configured value is
    copied: an object that holds a job's state, such as a preprocessor instance, is given here)."""
    from nbgrader.coursedir import CourseDirectory

    config.CourseDirectory.assignment_id = assignment
    if student is not None:
        config.CourseDirectory.student_id = student
    log = job_log()
    converter = converter_class(coursedir=CourseDirectory(config=config), config=config, **traits)
    converter.log = log
    try:
        converter.start()
    except Exception as error:  # noqa: BLE001 - nbgrader reports failures as exceptions and log lines
        return logged(log) or f"{type(error).__name__}: {error}"
    return ""


def generate_assignment(assignment: str, root: Path, source_directory: str, release_directory: Path,
                        db_url: str, steps: Mapping[type, type] | None = None) -> str:
    """``nbgrader generate_assignment --force`` of ``root/source_directory/assignment`` into
    ``release_directory/assignment``, its cells recorded in the gradebook ``db_url``; returns nbgrader's
    error log ('' when it succeeded). ``steps``: preprocessors of GenerateAssignment's own list configured to be
    replaced by others that do the same (a worker's compiled ones)."""
    from nbgrader.converters import GenerateAssignment

    stamp_new_gradebook(db_url)  # else nbgrader runs the `alembic` command for a new gradebook
    config = course_config(root, db_url, source_directory=source_directory, release_directory=str(release_directory))
    config.GenerateAssignment.force = True
    if steps:
        config.GenerateAssignment.preprocessors = [
            steps.get(step, step) for step in GenerateAssignment.class_traits()["preprocessors"].default()]
    return run_converter(GenerateAssignment, config, assignment)


def generate_template(assignment: str, root: Path, source_directory: str, release_directory: Path,
                      gradebook: Path, student: str | None = None, steps: Mapping[type, type] | None = None) -> str:
    """`generate_assignment` with its gradebook built in memory and written to the file ``gradebook`` in one
    transaction once nbgrader succeeded (nothing is written when it failed); returns nbgrader's error log.
    ``student``: a student whose submission the gradebook holds too, made as Autograde's ``init_assignment`` makes
    it (no timestamp). ``steps``: as `generate_assignment`'s.

    nbgrader commits once per cell it records: on disk, each commit writes, syncs and deletes a journal, some 50
    times an assignment. A grading template's gradebook is made afresh whenever its sources change, so it is built
    where commits cost nothing, a named SQLite database in this process's memory (SQLite's ``memdb``; it lives
    while ``keeper``, a connection to it, is open), and copied out with SQLite's backup. An SQLite without memdb
    (`MEMDB`) has nbgrader write the file itself, cell by cell (a failed generation may then leave a file)."""
    if not MEMDB:
        return _generated(assignment, root, source_directory, release_directory, f"sqlite:///{gradebook}", student,
                          steps)
    memory = f"file:/autograder-template-{uuid.uuid4().hex}?vfs=memdb"  # shared by this process's connections
    with closing(sqlite3.connect(memory, uri=True)) as keeper:
        error_log = _generated(assignment, root, source_directory, release_directory, f"sqlite:///{memory}&uri=true",
                               student, steps)
        if not error_log:
            with closing(sqlite3.connect(gradebook)) as written:
                keeper.backup(written)
    return error_log


def _generated(assignment: str, root: Path, source_directory: str, release_directory: Path, db_url: str,
               student: str | None, steps: Mapping[type, type] | None) -> str:
    """`generate_assignment` into ``db_url``, then ``student``'s submission made there (`generate_template`)."""
    from nbgrader.api import Gradebook

    error_log = generate_assignment(assignment, root, source_directory, release_directory, db_url, steps)
    if error_log or student is None:
        return error_log
    with warnings.catch_warnings(), Gradebook(db_url, course_id()) as made:
        warnings.simplefilter("ignore")  # update_or_create_submission trips SQLAlchemy's autoflush warnings
        made.update_or_create_student(student)
        made.update_or_create_submission(assignment, student)
    return ""
