"""Which students of an assignment share code: pairwise similarity of their own solution code, for the
instructor only (``DIR/similarity.csv`` and a section of ``report.html``, never a student's feedback).

The fingerprinting is copydetect's (winnowing over Pygments tokens). Its tokenizer already drops comments
and whitespace and replaces every identifier by one letter (names, attributes and keyword arguments by
``V``, function names by ``F``, class names by ``O``, string contents by ``S``), so renaming variables or
rewording comments hides nothing; fingerprints are compared as sets, so reordering functions or cells hides
nothing either. Only the solution cells (nbgrader ``solution: true``) are read, and every fingerprint of
the released starter code of those cells (signatures, docstrings, ``raise NotImplementedError()``) is
boilerplate: a blank notebook has no fingerprint left and matches nobody.

A pair's similarity is copydetect's share of one submission's fingerprinted code that is found in the
other, the larger of the two shares (so a student who copied one function and wrote nothing else is
found), in [0, 1]. Pairs at or above the threshold that share at least MIN_SHARED fingerprints are listed.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autograder.records import Task, Template
from autograder.csv_files import write_csv
from course.notebooks import nbgrader_meta, read_notebook, source_of

NOISE = 25  # copydetect's default: runs shorter than 25 normalised characters are not fingerprinted
# Near the middle of the gap between the most similar independent right answers of the bank (0.62; one pair
# built on a shared template aside) and the least similar renamed, reordered copy (0.91), measured by
# `python -m benchmarks.similarity`.
DEFAULT_THRESHOLD = 0.75
MIN_SHARED = 2 * NOISE  # fewer shared fingerprints than this (one short identical line) are no evidence
MAX_CODE_CHARS = 100_000  # a student's solution code beyond this is not compared (a hostile notebook stays cheap)


@dataclass(frozen=True)
class Segment:
    """A piece of a student's code, and whether the other student of the pair has it too."""

    text: str
    shared: bool


@dataclass(frozen=True)
class Pair:
    """Two students of one assignment whose solution code is similar: each one's code and the character
    spans (start, end) of it that the other has too."""

    assignment: str
    student_a: str
    student_b: str
    similarity: float  # in [0, 1]: the larger share of either student's code found in the other's
    shared: int  # fingerprints (hashes of NOISE-character runs of normalised code) the two have in common
    code_a: str
    code_b: str
    spans_a: tuple[tuple[int, int], ...]
    spans_b: tuple[tuple[int, int], ...]

    @property
    def row(self) -> list[str]:
        """The pair's line of similarity.csv."""
        return [self.assignment, self.student_a, self.student_b, f"{self.similarity:.3f}", str(self.shared)]

    @property
    def segments_a(self) -> tuple[Segment, ...]:
        return _segments(self.code_a, self.spans_a)

    @property
    def segments_b(self) -> tuple[Segment, ...]:
        return _segments(self.code_b, self.spans_b)


@dataclass(frozen=True)
class Similarity:
    """The similarity report of a class: the threshold used, how many students each assignment compared, and
    the pairs at or above the threshold, most similar first."""

    threshold: float
    compared: dict[str, int]
    pairs: tuple[Pair, ...]


CSV_HEADER = ["assignment", "student_a", "student_b", "similarity", "shared_fingerprints"]


def solution_code(notebook: Path, solution_ids: tuple[str, ...]) -> str:
    """The sources of the notebook's solution cells with these grade ids, in that order, joined by blank lines.

    Raises ValueError (or OSError) for a file that is not a readable notebook."""
    try:
        cells = {nbgrader_meta(c).get("grade_id"): source_of(c) for c in read_notebook(notebook)["cells"]
                 if c.get("cell_type") == "code" and nbgrader_meta(c).get("solution")}
    except (KeyError, TypeError, AttributeError, RecursionError) as error:
        raise ValueError(f"{notebook.name} is not a readable notebook: {error}") from error
    return "\n\n".join(cells[i] for i in solution_ids if isinstance(cells.get(i), str))[:MAX_CODE_CHARS]


def solution_ids(released: Path) -> tuple[str, ...]:
    """The grade ids of the released notebook's solution cells, in notebook order."""
    return tuple(nbgrader_meta(c)["grade_id"] for c in read_notebook(released)["cells"]
                 if c["cell_type"] == "code" and nbgrader_meta(c).get("solution"))


def _fingerprint(code: str, boilerplate: np.ndarray | None):
    """copydetect's fingerprint of Python ``code``: every NOISE-character run of its normalised tokens (a
    winnowing window of 1, copydetect's default), less those in ``boilerplate`` (sorted hashes)."""
    from copydetect import CodeFingerprint  # imported here: copydetect loads matplotlib.pyplot and tqdm

    return CodeFingerprint("solution.py", NOISE, 1, boilerplate, language="python", fp=io.StringIO(code))


def _spans(slices: np.ndarray, length: int) -> tuple[tuple[int, int], ...]:
    """copydetect's slices (2 x N character offsets of the shared regions) as (start, end) spans within the code."""
    return tuple((start, end) for start, end in zip(*np.clip(slices, 0, length).astype(int).tolist()) if end > start)


def _segments(code: str, spans: tuple[tuple[int, int], ...]) -> tuple[Segment, ...]:
    """``code`` cut into segments at the shared ``spans``."""
    segments, position = [], 0
    for start, end in spans:
        if start > position:
            segments.append(Segment(code[position:start], False))
        if end > max(start, position):
            segments.append(Segment(code[max(start, position):end], True))
        position = max(position, end)
    if position < len(code):
        segments.append(Segment(code[position:], False))
    return tuple(segments)


def similar_pairs(assignment: str, codes: dict[str, str], starter: str, threshold: float) -> list[Pair]:
    """Every pair of students (``codes``: student id -> solution code) whose similarity is at least
    ``threshold`` and who share at least MIN_SHARED fingerprints, most similar first; the fingerprints of
    ``starter`` (the released code of the same cells) are left out of every comparison."""
    from copydetect import compare_files  # imported here: copydetect loads matplotlib.pyplot and tqdm

    boilerplate = np.array(sorted(_fingerprint(starter, None).hashes))
    prints = {student: _fingerprint(code, boilerplate) for student, code in sorted(codes.items())}
    pairs = []
    for (a, print_a), (b, print_b) in itertools.combinations(prints.items(), 2):
        shared = len(print_a.hashes & print_b.hashes)
        if shared < MIN_SHARED:
            continue
        _, shares, (slices_a, slices_b) = compare_files(print_a, print_b)
        similarity = min(1.0, float(max(shares)))
        if similarity >= threshold:
            pairs.append(Pair(assignment, a, b, similarity, shared, print_a.raw_code, print_b.raw_code,
                              _spans(slices_a, len(print_a.raw_code)), _spans(slices_b, len(print_b.raw_code))))
    return sorted(pairs, key=lambda p: (-p.similarity, p.student_a, p.student_b))


def assignment_pairs(assignment: str, students: dict[str, dict[str, str | None]], released: Path,
                     threshold: float) -> tuple[int, list[Pair]]:
    """(students compared, similar pairs) of one assignment.

    students: student id -> notebook name -> the submitted file (None when missing).
    released: the folder of the assignment's released notebooks, whose solution cells are the starter code.
    A file that is not a readable notebook counts as blank: it costs its author a comparison, nobody else.
    """
    ids = {p.stem: solution_ids(p) for p in sorted(released.glob("*.ipynb"))}
    starter = "\n\n".join(solution_code(released / f"{name}.ipynb", ids[name]) for name in ids)
    codes = {}
    for student, notebooks in students.items():
        parts = []
        for name in ids:
            try:
                parts.append(solution_code(Path(notebooks[name]), ids[name]) if notebooks.get(name) else "")
            except (OSError, ValueError):
                parts.append("")
        codes[student] = "\n\n".join(parts)
    return len(codes), similar_pairs(assignment, codes, starter, threshold)


def class_similarity(tasks: list[Task], templates: dict[str, Template], threshold: float | None) -> Similarity | None:
    """The similarity report of every assignment of the class (None when ``threshold`` is None: turned off).
    Every submission with a notebook is compared, graded or not."""
    if threshold is None:
        return None
    submitted: dict[str, dict[str, dict[str, str | None]]] = {}
    for task in tasks:
        if not task.problem and task.assignment in templates:
            submitted.setdefault(task.assignment, {})[task.student] = task.notebooks
    compared, pairs = {}, []
    for assignment, students in sorted(submitted.items()):
        compared[assignment], found = assignment_pairs(assignment, students, templates[assignment].released, threshold)
        pairs += found
    return Similarity(threshold, compared, tuple(sorted(pairs, key=lambda p: -p.similarity)))


def write_similarity(path: Path, similarity: Similarity | None) -> None:
    """similarity.csv, one row per listed pair (`CSV_HEADER`), through the writer of grades.csv; when the
    report is turned off, no file (one from an earlier run is removed)."""
    if similarity is None:
        path.unlink(missing_ok=True)
    else:
        write_csv(path, CSV_HEADER, [pair.row for pair in similarity.pairs])
