"""Which students of an assignment share code, with each other or with the course's published reference
solution: pairwise similarity of their own code, for the instructor only (``DIR/similarity.csv`` and a section
of ``report.html``, never a student's feedback).

The fingerprinting is copydetect's (winnowing over Pygments tokens), computed as copydetect 0.5.0 computes it
without importing it (`autograder.reports.fingerprints`). Its tokenizer already drops comments
and whitespace and replaces every identifier by one letter (names, attributes and keyword arguments by
``V``, function names by ``F``, class names by ``O``, string contents by ``S``), so renaming variables or
rewording comments hides nothing; fingerprints are compared as sets, so reordering functions or cells hides
nothing either. A student's own code is every code cell of their notebook, solution cells and cells they
added alike, but those that are one of the course's locked or test cells unchanged (`own_cells`; the copy's
metadata decides nothing). Every fingerprint of the released notebook (its given code, visible tests and the
starter of each solution cell) is boilerplate: a blank notebook has no fingerprint left and matches nobody.
A student's code is compared up to MAX_CODE_CHARS; past it, comments and long strings are stripped first
(`bounded`), and a student whose code is still cut is named in similarity.csv and the report.

The course's reference solution (the source notebooks graded from, public in this repository) takes part as
one more hand-in, REFERENCE: a student who handed it in is listed with it like with a classmate.

A pair's similarity is copydetect's share of one submission's fingerprinted code that is found in the
other, the larger of the two shares (so a student who copied one function and wrote nothing else is
found), in [0, 1]. Pairs at or above the threshold that share at least MIN_SHARED fingerprints are listed.
"""

from __future__ import annotations

import io
import itertools
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.records import Task, Template
from autograder.reports.fingerprints import NOISE, Fingerprint, overlap
from autograder.reports.grades_csv import write_csv
from course.notebooks import code_cells, read_notebook, source_of

if TYPE_CHECKING:
    import numpy as np

# Near the middle of the gap between the most similar independent right answers of the bank (0.62; one pair
# built on a shared template aside) and the least similar renamed, reordered copy (0.91), measured by
# `python -m benchmarks.similarity`.
DEFAULT_THRESHOLD = 0.75
MIN_SHARED = 2 * NOISE  # fewer shared fingerprints than this (one short identical line) are no evidence
MAX_CODE_CHARS = 100_000  # a student's code beyond this (comments stripped first) is not compared: stays cheap
CONDENSED_CHARS = 10 * MAX_CODE_CHARS  # what of one cell is condensed, its comment lines gone (a bounded cost)
LONG_STRING = 200  # a string literal longer than this is shortened before a cut (its contents are one token)
REFERENCE = "(reference solution)"  # the course's published solution, compared as a hand-in; never a student id
CUT_NOTE = f"code cut at {MAX_CODE_CHARS} characters (comments stripped): the rest was not compared"


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
    """The similarity report of a class: the threshold used, how many students each assignment compared, the
    pairs at or above the threshold, most similar first, and the students whose code was cut (by assignment)."""

    threshold: float
    compared: dict[str, int]
    pairs: tuple[Pair, ...]
    cut: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Compared:
    """One assignment's comparison: how many students, the pairs listed, and the students whose code was cut."""

    students: int
    pairs: list[Pair]
    cut: tuple[str, ...]


CSV_HEADER = ("assignment", "student_a", "student_b", "similarity", "shared_fingerprints", "note")


def course_cells(released: Path) -> frozenset[str]:
    """The sources of the released notebook's locked and test cells: the course's code, not the student's."""
    return frozenset(source.strip() for meta, source in code_cells(released)
                     if meta.get("locked") or (meta.get("grade") and not meta.get("solution")))


def own_cells(notebook: Path, course: frozenset[str]) -> list[str]:
    """The code the student wrote in ``notebook``: the sources of its code cells in order, solution cells and cells
    of their own alike, but those that are one of the course's cells (``course``: `course_cells`) unchanged. The
    student's copy decides nothing by its metadata, which they can edit.

    Raises ValueError (or OSError) for a file that is not a readable notebook."""
    try:
        sources = [source_of(c) for c in read_notebook(notebook)["cells"] if c.get("cell_type") == "code"]
    except (KeyError, TypeError, AttributeError, RecursionError) as error:
        raise ValueError(f"{notebook.name} is not a readable notebook: {error}") from error
    return [source for source in sources if isinstance(source, str) and source.strip() not in course]


def reference_cells(source: Path) -> list[str]:
    """The code a student writes, as the course's source notebook (its reference solution) has it: every code cell
    but the locked and the test cells."""
    return [source for meta, source in code_cells(source)
            if not meta.get("locked") and not (meta.get("grade") and not meta.get("solution"))]


def _condensed(source: str) -> str:
    """``source`` without its comments, and every string literal longer than LONG_STRING shortened: what the
    fingerprints cannot see anyway (copydetect drops comments and reads a string as one token). Code that does
    not tokenize keeps what follows the error, less its lines that are only a comment."""
    starts = [0]
    for line in io.StringIO(source).readlines():  # the lines tokenize numbers (split at "\n" only)
        starts.append(starts[-1] + len(line))
    kept, position = [], 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and len(token.string) > LONG_STRING):
                start = starts[token.start[0] - 1] + token.start[1]
                kept.append(source[position:start] + ("" if token.type == tokenize.COMMENT else '"..."'))
                position = starts[token.end[0] - 1] + token.end[1]
    except (tokenize.TokenError, SyntaxError):
        rest = "".join(line for line in io.StringIO(source[position:]).readlines()
                       if not line.lstrip().startswith("#"))
        return "".join(kept) + rest
    return "".join(kept) + source[position:]


def bounded(cells: list[str]) -> tuple[str, bool]:
    """The cells joined by blank lines, at most MAX_CODE_CHARS of it, and whether it was cut. Longer code has its
    comments and long strings stripped first (`_condensed`), so that no padding pushes code past the cut; that
    costs time in proportion to the code, so each cell is condensed from its first CONDENSED_CHARS characters
    once its comment lines are gone, and no further cell once the limit is reached (a cut all the same)."""
    code = "\n\n".join(cells)
    if len(code) <= MAX_CODE_CHARS:
        return code, False
    kept, size, cut = [], 0, False
    for cell in cells:
        if size > MAX_CODE_CHARS:
            return "\n\n".join(kept)[:MAX_CODE_CHARS], True
        text = "".join(line for line in io.StringIO(cell).readlines() if not line.lstrip().startswith("#"))
        cut = cut or len(text) > CONDENSED_CHARS
        kept.append(_condensed(text[:CONDENSED_CHARS]))
        size += len(kept[-1]) + 2
    code = "\n\n".join(kept)
    return code[:MAX_CODE_CHARS], cut or len(code) > MAX_CODE_CHARS


def _spans(slices: np.ndarray, length: int) -> tuple[tuple[int, int], ...]:
    """copydetect's slices (2 x N character offsets of the shared regions) as (start, end) spans within the code."""
    return tuple((start, end) for start, end in zip(*slices.clip(0, length).astype(int).tolist()) if end > start)


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
    ``starter`` (the released code of the same cells) are left out of every comparison. The same code (a blank
    hand-in, most often) is fingerprinted once."""
    import numpy as np  # imported here, not at the grader's start (the workers wait for it)

    boilerplate = np.array(sorted(Fingerprint.of(starter, None).kept))
    printed = {code: Fingerprint.of(code, boilerplate) for code in set(codes.values())}
    prints = {student: printed[code] for student, code in sorted(codes.items())}
    pairs = []
    for (a, print_a), (b, print_b) in itertools.combinations(prints.items(), 2):
        shared = print_a.shared(print_b)
        if shared < MIN_SHARED:
            continue
        found = overlap(print_a, print_b)
        similarity = min(1.0, float(max(found.shares)))
        if similarity >= threshold:
            pairs.append(Pair(assignment, a, b, similarity, shared, print_a.code, print_b.code,
                              _spans(print_a.in_raw(found.copied[0]), len(print_a.code)),
                              _spans(print_b.in_raw(found.copied[1]), len(print_b.code))))
    return sorted(pairs, key=lambda p: (-p.similarity, p.student_a, p.student_b))


def assignment_pairs(assignment: str, students: dict[str, dict[str, str | None]], released: Path,
                     threshold: float, reference: Path | None) -> Compared:
    """The comparison of one assignment's students, with each other and with the reference solution.

    students: student id -> notebook name -> the submitted file (None when missing).
    released: the folder of the assignment's released notebooks, whose code is left out of every comparison.
    reference: the folder of the assignment's source notebooks (the published reference solution), compared as
    one more hand-in named REFERENCE (None: not compared).
    A file that is not a readable notebook counts as blank: it costs its author a comparison, nobody else.
    """
    notebooks = sorted(released.glob("*.ipynb"))
    course = {path.stem: course_cells(path) for path in notebooks}
    # Boilerplate: the released code as a blank hand-in reads (its runs across cells too), and all of it.
    starter = "\n\n".join([cell for path in notebooks for cell in own_cells(path, course[path.stem])]
                           + [source for path in notebooks for _, source in code_cells(path)])
    codes, cut = {}, []
    for student, handed in students.items():
        cells = []
        for name in course:
            try:
                cells += own_cells(Path(handed[name]), course[name]) if handed.get(name) else []
            except (OSError, ValueError):
                continue
        codes[student], was_cut = bounded(cells)
        if was_cut:
            cut.append(student)
    sources = [reference / f"{name}.ipynb" for name in course] if reference is not None else []
    if students and sources and all(path.is_file() for path in sources):
        codes[REFERENCE] = bounded([cell for path in sources for cell in reference_cells(path)])[0]
    return Compared(len(students), similar_pairs(assignment, codes, starter, threshold), tuple(sorted(cut)))


def class_similarity(tasks: list[Task], templates: dict[str, Template], threshold: float | None,
                     source: Path) -> Similarity | None:
    """The similarity report of every assignment of the class (None when ``threshold`` is None: turned off),
    each student compared with the others and with the reference solution in ``source`` (``source/<assignment>``).
    Every submission with a notebook is compared, graded or not."""
    if threshold is None:
        return None
    submitted: dict[str, dict[str, dict[str, str | None]]] = {}
    for task in tasks:
        if not task.problem and task.assignment in templates:
            submitted.setdefault(task.assignment, {})[task.student] = task.notebooks
    compared, cut, pairs = {}, {}, []
    for assignment, students in sorted(submitted.items()):
        found = assignment_pairs(assignment, students, templates[assignment].released, threshold, source / assignment)
        compared[assignment], pairs = found.students, pairs + found.pairs
        if found.cut:
            cut[assignment] = found.cut
    return Similarity(threshold, compared, tuple(sorted(pairs, key=lambda p: -p.similarity)), cut)


def write_similarity(path: Path, similarity: Similarity | None) -> None:
    """similarity.csv, one row per listed pair (`CSV_HEADER`; its note says whose code was cut), then one row per
    student whose code was cut and who is in no pair, through the writer of grades.csv; when the report is
    turned off, no file (one from an earlier run is removed)."""
    if similarity is None:
        path.unlink(missing_ok=True)
        return
    rows = [pair.row + [_note(similarity.cut.get(pair.assignment, ()), pair)] for pair in similarity.pairs]
    paired = {(pair.assignment, s) for pair in similarity.pairs for s in (pair.student_a, pair.student_b)}
    rows += [[assignment, student, "", "", "", CUT_NOTE] for assignment, students in sorted(similarity.cut.items())
             for student in students if (assignment, student) not in paired]
    write_csv(path, CSV_HEADER, rows)


def _note(cut: tuple[str, ...], pair: Pair) -> str:
    return "; ".join(f"{student}: {CUT_NOTE}" for student in (pair.student_a, pair.student_b) if student in cut)
