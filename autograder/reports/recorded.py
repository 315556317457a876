"""Which submissions a class gradebook already holds, read with SQLAlchemy alone (nbgrader's schema: its
``submitted_assignment``, ``student`` and ``assignment`` tables), so that a run that grades nothing new does not
import nbgrader to write again what the gradebook holds (`autograder.grading.run`).

Runs in the grader.
"""

from __future__ import annotations

from pathlib import Path

HELD = ("select student.id, assignment.name from submitted_assignment "
        "join student on submitted_assignment.student_id = student.id "
        "join assignment on submitted_assignment.assignment_id = assignment.id")


def recorded_submissions(db_url: str) -> set[tuple[str, str]]:
    """Every (student, assignment) with a submission in the gradebook at ``db_url`` (none when it has no such
    tables, or cannot be read: then everything is written again)."""
    from sqlalchemy import create_engine, make_url, text
    from sqlalchemy.exc import SQLAlchemyError

    url = make_url(db_url)
    if url.get_backend_name() == "sqlite" and not (url.database and Path(url.database).exists()):
        return set()  # not made yet (and not to be made here)
    engine = create_engine(db_url, future=True)
    try:
        with engine.connect() as connection:
            return {(student, assignment) for student, assignment in connection.execute(text(HELD))}
    except SQLAlchemyError:
        return set()
    finally:
        engine.dispose()
