"""`OutputFolder`: the layout of a grading run's output folder (``--out DIR``), the one place its paths are
spelled out. Every module that reads or writes DIR asks it for a path.

    DIR/grades.csv                          one row per student and assignment (`autograder.reports.grades_csv`)
    DIR/feedback/<student>/<assignment>/    the student's feedback pages (HTML)
    DIR/report.html                         the class report (`autograder.reports.report`)
    DIR/similarity.csv                      similar pairs, for the instructor (`autograder.reports.similarity`)
    DIR/gradebook.db                        the class gradebook, unless ``--db`` names another (`autograder.reports.gradebook`)
    DIR/.state/<student>/<assignment>.json  each task's stored result and row (`autograder.reports.state`)
    DIR/submitted/<student>/<assignment>/   the notebooks graded (nbgrader's layout; `autograder.reports.class_record`)
    DIR/autograded/<student>/<assignment>/  the autograded notebooks that nbgrader's formgrader opens
    DIR/nbgrader_config.py                  nbgrader's config for formgrader in DIR (`autograder.reports.class_record`)
    DIR/.lock                               held by the run writing to DIR (`autograder.reports.class_record`)
    DIR/.cache/                             the assignments' templates (`autograder.grading.templates`)
    DIR/.logs/                              the workers' logs (`autograder.workers.pool`)
    DIR/.hidden-inputs.secret               the secret hidden inputs derive from, mode 0600 (`autograder.grading.secret`)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OutputFolder:
    """The output folder ``root`` of a grading run, and where each of its files lives."""

    root: Path

    @property
    def grades(self) -> Path:
        return self.root / "grades.csv"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def similarity(self) -> Path:
        return self.root / "similarity.csv"

    @property
    def gradebook(self) -> Path:
        return self.root / "gradebook.db"

    @property
    def gradebook_url(self) -> str:
        """The SQLAlchemy URL of the class gradebook when ``--db`` names none."""
        return f"sqlite:///{self.gradebook}"

    @property
    def all_feedback(self) -> Path:
        """The folder of every student's feedback folder."""
        return self.root / "feedback"

    def feedback(self, student: str, assignment: str) -> Path:
        """The folder of one student's feedback pages for one assignment."""
        return self.all_feedback / student / assignment

    def submitted(self, student: str, assignment: str) -> Path:
        """The folder of the notebooks one student handed in for one assignment, as graded."""
        return self.root / "submitted" / student / assignment

    def autograded(self, student: str, assignment: str) -> Path:
        """The folder of one student's autograded notebooks of one assignment (formgrader's)."""
        return self.root / "autograded" / student / assignment

    @property
    def nbgrader_config(self) -> Path:
        """nbgrader's config for manual grading in the folder (formgrader)."""
        return self.root / "nbgrader_config.py"

    @property
    def lock(self) -> Path:
        """The file a run holds locked while it writes to the folder."""
        return self.root / ".lock"

    @property
    def states(self) -> Path:
        """The folder of the stored results."""
        return self.root / ".state"

    def state(self, student: str, assignment: str) -> Path:
        """Where one student's result for one assignment is stored."""
        return self.states / student / f"{assignment}.json"

    @property
    def cache(self) -> Path:
        """The folder of the assignments' templates."""
        return self.root / ".cache"

    @property
    def logs(self) -> Path:
        """The folder of the workers' logs."""
        return self.root / ".logs"

    @property
    def secret(self) -> Path:
        """The secret the hidden inputs derive from, unless ``--secret-file`` names another (`autograder.grading.secret`)."""
        return self.root / ".hidden-inputs.secret"
