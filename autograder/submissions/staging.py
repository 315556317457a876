"""What the readers of submissions (`autograder.submissions.find`, `autograder.submissions.moodle_zip`,
`autograder.submissions.canvas_names`) share: the `Found` record of one student, the rule for student ids, and the
`Stager` that copies zip members into the staging folder one at a time within a per-notebook and a total
budget, under names the reader chose (never the paths the zip holds)."""

from __future__ import annotations

import re
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# \w: Unicode letters, digits and _; single spaces and apostrophes inside ("ana maria", "o'brien").
STUDENT_ID = re.compile(r"(?:[^\W_]|[@+])(?:[\w.@+'\u2019-]| (?=[^ ]))*")
ID_RULE = "letters, digits, . _ - @ + ' and single spaces; not starting with . _ - or a space"
MAX_NOTEBOOK_BYTES = 50 * 2**20
STAGING_BYTES = 2 * 2**30
# What a damaged member raises while it is read: a bad CRC, a truncated stream, an unknown method, a password.
MEMBER_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)


@dataclass
class Found:
    """What was found for one student.

    ``files``: assignment -> notebook files (an empty list: a folder without notebooks; assignment "" holds
    notebooks whose name matches no assignment); ``others``: assignment -> names of the other files handed
    in; ``problems``: assignment ("" for all of them) -> why it cannot be graded; ``notes``: what the
    reason of every row of this student says though it is graded; from a Canvas zip also ``lms_user_id``, the
    student's Canvas user id, and ``late``, the assignments whose counted submission Canvas marked late; from an LMS
    zip ``lms_name``, the student's name as its file names give it (Canvas's sortable name, Moodle's full name).
    """

    files: dict[str, list[Path]] = field(default_factory=dict)
    others: dict[str, list[str]] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lms_user_id: str = ""
    late: set[str] = field(default_factory=set)
    lms_name: str = ""

    def problem(self, assignment: str, text: str) -> None:
        self.problems.setdefault(assignment, []).append(text)


def normal_id(name: str) -> str:
    """The student id a name stands for: Unicode NFC (macOS writes decomposed names)."""
    return unicodedata.normalize("NFC", name)


def valid_student_id(student_id: str) -> bool:
    """Letters (any script), digits, '.', '_', '-', '@', '+', apostrophes and single inner spaces; not starting
    with '.', '_', '-' or a space."""
    return bool(STUDENT_ID.fullmatch(student_id))  # fullmatch: "$" would accept a trailing newline


def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size} bytes"


class Stager:
    """Copies zip members into the staging folder one at a time, within a per-notebook and a total budget."""

    def __init__(self, archive: zipfile.ZipFile, budget: int):
        self.archive, self.budget, self.used = archive, budget, 0

    def read(self, member: zipfile.ZipInfo) -> bytes | str:
        """``member``'s bytes, counted against the budget, or why not (naming the member as the student named it)."""
        name = PurePosixPath(member.filename.replace("\\", "/")).name
        if member.file_size > MAX_NOTEBOOK_BYTES:
            return (f"too large: {name} is {mib(member.file_size)} unpacked; a notebook may have at most "
                    f"{mib(MAX_NOTEBOOK_BYTES)}")
        if self.used + member.file_size > self.budget:
            return (f"too large: {name} ({mib(member.file_size)} unpacked) would pass the {mib(self.budget)} "
                    "that a run may unpack in all (--max-unpacked)")
        try:
            data = self.archive.read(member)  # the CRC and the declared size are checked while it is read
        except MEMBER_ERRORS as error:
            return f"{name} could not be read from the zip ({type(error).__name__}: {error})"
        self.used += len(data)
        return data

    def stage(self, member: zipfile.ZipInfo, target: Path) -> Path | str:
        """Copy ``member`` to ``target``; the path, or why not (naming the member as the student named it)."""
        data = self.read(member)
        if isinstance(data, str):
            return data
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return target

    def head(self, member: zipfile.ZipInfo, size: int) -> bytes:
        """The first ``size`` bytes of a small member (a link entry's page); b"" when it cannot be read."""
        try:
            with self.archive.open(member) as stream:
                return stream.read(size)
        except MEMBER_ERRORS:
            return b""


def zip_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    return [m for m in archive.infolist() if not m.is_dir() and not PurePosixPath(m.filename).name.startswith(".")
            and "__MACOSX" not in m.filename]


def add(found: dict[str, Found], student: str, assignment: str, staged: Path | str) -> None:
    entry = found.setdefault(student, Found())
    if isinstance(staged, str):
        entry.problem(assignment, staged)
    else:
        entry.files.setdefault(assignment, []).append(staged)
