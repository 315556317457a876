"""nbgrader configuration of the course: `python -m autograder` and plain `nbgrader` both read it.

Plain nbgrader, from the repository root:
    nbgrader generate_assignment 01_similarity --force --JupyterApp.config_file=autograder/nbgrader_config.py
"""
from autograder.sandbox.limits import Limits
from course import EXERCISES, ROOT, SOLUTIONS

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

c.CourseDirectory.course_id = "attention-by-hand"
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.source_directory = SOLUTIONS
c.CourseDirectory.release_directory = EXERCISES
c.CourseDirectory.db_url = f"sqlite:///{ROOT / 'gradebook.db'}"
# Only an assignment's own files are released (and copied into each grading job): never what a grading run
# writes (`python -m autograder grade` also refuses an output folder inside solutions/ or exercises/).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*", "gradebook.db",
                            "grades.csv", "report.html", "similarity.csv", "*.db", "*.db-journal"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = Limits().cell_seconds  # what `grade --cell-timeout` defaults to
