"""Find the submissions to grade: a folder `SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb`,
a plain zip of that layout, or a zip of submissions downloaded from Canvas.

Canvas names each file `<name>[_LATE]_<user id>_<submission id>_<original filename>`, where `<name>`
is the student's sortable name in lower case with every character but letters, digits and `_` removed
(so it may hold underscores and non-ASCII letters), and a resubmitted file's original name may carry a
`-1`, `-2`... suffix; the original filename says which notebook (and so which assignment) it is. The
student id is Canvas's `<name>`, or `<name>_<user id>` when two Canvas users share a name.

Nothing is extracted with the paths a zip holds: every notebook is copied to
`<staging>/<student_id>/<assignment>/<filename>` with names checked here.
"""

from __future__ import annotations

import re
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

CANVAS = re.compile(r"^(?P<name>[^/]+?)(?P<late>_(?:LATE|late))?_(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)$")
RESUBMITTED = re.compile(r"^(?P<stem>.+?)(?:-\d+)?$")
STUDENT_ID = re.compile(r"(?:[^\W_]|[@+])[\w.@+-]*")  # \w: Unicode letters, digits and _
MAX_NOTEBOOK_BYTES = 50 * 2**20


@dataclass
class Found:
    """What was found for one student: assignment -> files (empty list: a folder without notebooks); from a
    Canvas zip also the student's Canvas user id and the assignments whose counted submission was late."""

    files: dict[str, list[Path]] = field(default_factory=dict)
    lms_user_id: str = ""
    late: set[str] = field(default_factory=set)


def valid_student_id(student_id: str) -> bool:
    """Letters (any script), digits, '.', '_', '-', '@', '+'; not starting with '.', '_' or '-'."""
    return bool(STUDENT_ID.fullmatch(student_id))  # fullmatch: "$" would accept a trailing newline


def from_folder(folder: Path) -> dict[str, Found]:
    """student_id -> assignment -> the .ipynb files in SUBMISSIONS/<student_id>/<assignment>/."""
    found: dict[str, Found] = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        entry = found.setdefault(student.name, Found())
        for assignment in sorted(p for p in student.iterdir() if p.is_dir() and not p.name.startswith(".")):
            entry.files[assignment.name] = sorted(p for p in assignment.glob("*.ipynb")
                                                  if p.is_file() and not p.is_symlink())
    return found


def _members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    return [m for m in archive.infolist() if not m.is_dir() and not PurePosixPath(m.filename).name.startswith(".")
            and "__MACOSX" not in m.filename]


def _write(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path) -> Path:
    if member.file_size > MAX_NOTEBOOK_BYTES:
        target = target.with_suffix(".too-large")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(archive.read(member))
    return target


def _canvas(archive: zipfile.ZipFile, notebooks: dict[str, str], staging: Path) -> dict[str, Found]:
    """Canvas's flat layout; ``notebooks`` maps a notebook filename to its assignment."""
    latest: dict[tuple[str, str, str], tuple[int, zipfile.ZipInfo, str, bool]] = {}
    users_by_name: dict[str, set[str]] = defaultdict(set)
    other: dict[tuple[str, str], list[zipfile.ZipInfo]] = defaultdict(list)
    for member in _members(archive):
        match = CANVAS.match(PurePosixPath(member.filename).name)
        if not match:
            continue
        name, user = match["name"], match["user"]
        users_by_name[name].add(user)
        original = PurePosixPath(match["original"])
        filename = RESUBMITTED.match(original.stem)["stem"] + original.suffix
        if filename not in notebooks:
            other[(name, user)].append(member)
            continue
        key = (name, user, filename)
        if key not in latest or int(match["submission"]) > latest[key][0]:
            latest[key] = (int(match["submission"]), member, filename, bool(match["late"]))
    found: dict[str, Found] = {}

    def student_id(name: str, user: str) -> str:
        return name if len(users_by_name[name]) == 1 else f"{name}_{user}"

    for (name, user, _), (_, member, filename, late) in sorted(latest.items()):
        student, assignment = student_id(name, user), notebooks[filename]
        path = _write(archive, member, staging / student / assignment / filename)
        entry = found.setdefault(student, Found(lms_user_id=user))
        entry.files.setdefault(assignment, []).append(path)
        if late:
            entry.late.add(assignment)
    for (name, user), members in sorted(other.items()):
        student = student_id(name, user)
        entry = found.setdefault(student, Found(lms_user_id=user))
        for member in members:
            if not member.filename.endswith(".ipynb"):
                continue
            # A notebook whose name matches no assignment: kept aside, reported as misnamed.
            path = _write(archive, member, staging / ".unmatched" / student / PurePosixPath(member.filename).name)
            entry.files.setdefault("", []).append(path)
    return found


def _folder_zip(archive: zipfile.ZipFile, staging: Path) -> dict[str, Found]:
    """A zip of SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb, perhaps inside one top folder."""
    found: dict[str, Found] = {}
    for member in _members(archive):
        # Some Windows tools write '\' between folders; a '..' that this makes a part is no valid id.
        parts = PurePosixPath(member.filename.replace("\\", "/")).parts
        if len(parts) < 3:
            continue
        student, assignment, filename = parts[-3:]
        if not filename.endswith(".ipynb") or not valid_student_id(student) or not valid_student_id(assignment):
            continue
        path = _write(archive, member, staging / student / assignment / filename)
        found.setdefault(student, Found()).files.setdefault(assignment, []).append(path)
    return found


def from_zip(path: Path, notebooks: dict[str, str], staging: Path) -> dict[str, Found]:
    """Read a Canvas zip or a zip of the folder layout; ``notebooks`` maps notebook filename -> assignment."""
    with zipfile.ZipFile(path) as archive:
        names = [PurePosixPath(m.filename) for m in _members(archive)]
        if any(len(n.parts) == 1 and CANVAS.match(n.name) for n in names):
            return _canvas(archive, notebooks, staging)
        return _folder_zip(archive, staging)


def find(submissions: Path, notebooks: dict[str, str], staging: Path) -> tuple[dict[str, Found], list[str]]:
    """Submissions from a folder or a zip by student id, and the folder names that are not valid ids."""
    found = from_zip(submissions, notebooks, staging) if submissions.is_file() else from_folder(submissions)
    return ({student: entry for student, entry in found.items() if valid_student_id(student)},
            sorted(student for student in found if not valid_student_id(student)))
