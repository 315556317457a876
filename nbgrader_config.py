"""nbgrader's configuration when nbgrader runs in the course directory (formgrader, `nbgrader generate_assignment`):
the course's own config, `autograder/nbgrader_config.py`, so that it finds the assignments in solutions/.

Manual grading of a grading run's output folder DIR: `python -m autograder grade` writes DIR/nbgrader_config.py,
which loads this one and points nbgrader at DIR's gradebook and autograded notebooks (docs/instructor-cli.md)."""

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
load_subconfig("autograder/nbgrader_config.py")  # noqa: F821 - relative to this file's folder
