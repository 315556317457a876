"""What the book pages, the benchmarks and the tests share: the chapter registry (`course.chapters`),
notebook helpers (`course.notebooks`), the reference solutions (`course.solutions`), published
model configurations (`course.configs`) and the machine description (`course.machine`); here, the
repository's root and the names of its two assignment folders, spelled nowhere else in the code
(`tests/test_defaults.py`).

The instructor tool lives apart, in `autograder/`.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = "solutions"  # ROOT's folder of nbgrader source assignments (reference solutions, hidden tests)
EXERCISES = "exercises"  # ROOT's folder of released student notebooks, generated from SOLUTIONS
