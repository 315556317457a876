"""Find the submissions to grade: a folder `SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb`,
a plain zip of that layout, or a zip of submissions downloaded from Canvas.

Canvas names each file `<name>[_LATE]_<user id>_<submission id>_<original filename>`, where `<name>`
is the student's sortable name in lower case with every character but letters, digits and `_` removed
(so it may hold underscores and non-ASCII letters), and a resubmitted file's original name may carry a
`-1`, `-2`... suffix; the original filename says which notebook (and so which assignment) it is. The
student id is the one the output folder already uses for that Canvas user id (``known``), else Canvas's
`<name>`, or `<name>_<user id>` when two Canvas users share a name in the zip or another user already holds
`<name>` in the folder: a student keeps one id for the whole term, whoever else is in each zip.

Every student found keeps an entry, graded or not: ids are normalised to Unicode NFC; an id that is
not valid, two entries of the input that name the same id, a member of the zip that cannot be read
and a notebook over a size limit become that student's own problem (`Found.problems`), and ids that
differ only in case are noted (`Found.notes`), never merged or overwritten in silence.

Nothing is extracted with the paths a zip holds: every notebook is copied to
`<staging>/<student_id>/<assignment>/<filename>` with names checked here, each member read on its
own and counted against a total staging budget.
"""

from __future__ import annotations

import re
import unicodedata
import zipfile
import zlib
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

CANVAS = re.compile(r"^(?P<name>[^/]+?)(?P<late>_(?:LATE|late))?_(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)$")
RESUBMITTED = re.compile(r"^(?P<stem>.+?)(?:-\d+)?$")
# \w: Unicode letters, digits and _; single spaces and apostrophes inside ("ana maria", "o'brien").
STUDENT_ID = re.compile(r"(?:[^\W_]|[@+])(?:[\w.@+'\u2019-]| (?=[^ ]))*")
ID_RULE = "letters, digits, . _ - @ + ' and single spaces; not starting with . _ - or a space"
MAX_NOTEBOOK_BYTES = 50 * 2**20
STAGING_BYTES = 2 * 2**30
# What a damaged member raises while it is read: a bad CRC, a truncated stream, an unknown method, a password.
MEMBER_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)


class SubmissionsUnreadable(RuntimeError):
    """SUBMISSIONS as a whole cannot be read (missing, not a zip, truncated): the message says which and why."""


@dataclass
class Found:
    """What was found for one student.

    ``files``: assignment -> notebook files (an empty list: a folder without notebooks; assignment "" holds
    notebooks whose name matches no assignment); ``others``: assignment -> names of the other files handed
    in; ``problems``: assignment ("" for all of them) -> why it cannot be graded; ``notes``: what the
    reason of every row of this student says though it is graded; from a Canvas zip also ``lms_user_id``, the
    student's Canvas user id, and ``late``, the assignments whose counted submission Canvas marked late.
    """

    files: dict[str, list[Path]] = field(default_factory=dict)
    others: dict[str, list[str]] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lms_user_id: str = ""
    late: set[str] = field(default_factory=set)

    def problem(self, assignment: str, text: str) -> None:
        self.problems.setdefault(assignment, []).append(text)


def normal_id(name: str) -> str:
    """The student id a name stands for: Unicode NFC (macOS writes decomposed names)."""
    return unicodedata.normalize("NFC", name)


def valid_student_id(student_id: str) -> bool:
    """Letters (any script), digits, '.', '_', '-', '@', '+', apostrophes and single inner spaces; not starting
    with '.', '_', '-' or a space."""
    return bool(STUDENT_ID.fullmatch(student_id))  # fullmatch: "$" would accept a trailing newline


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size} bytes"


class _Stager:
    """Copies zip members into the staging folder one at a time, within a per-notebook and a total budget."""

    def __init__(self, archive: zipfile.ZipFile, budget: int):
        self.archive, self.budget, self.used = archive, budget, 0

    def stage(self, member: zipfile.ZipInfo, target: Path) -> Path | str:
        """Copy ``member`` to ``target``; the path, or why not (naming the member as the student named it)."""
        name = PurePosixPath(member.filename.replace("\\", "/")).name
        if member.file_size > MAX_NOTEBOOK_BYTES:
            return (f"too large: {name} is {_mib(member.file_size)} unpacked; a notebook may have at most "
                    f"{_mib(MAX_NOTEBOOK_BYTES)}")
        if self.used + member.file_size > self.budget:
            return (f"too large: {name} ({_mib(member.file_size)} unpacked) would pass the {_mib(self.budget)} "
                    "that a run may unpack in all (--max-unpacked)")
        try:
            data = self.archive.read(member)  # the CRC and the declared size are checked while it is read
        except MEMBER_ERRORS as error:
            return f"{name} could not be read from the zip ({type(error).__name__}: {error})"
        self.used += len(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return target


def _members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    return [m for m in archive.infolist() if not m.is_dir() and not PurePosixPath(m.filename).name.startswith(".")
            and "__MACOSX" not in m.filename]


def _add(found: dict[str, Found], student: str, assignment: str, staged: Path | str) -> None:
    entry = found.setdefault(student, Found())
    if isinstance(staged, str):
        entry.problem(assignment, staged)
    else:
        entry.files.setdefault(assignment, []).append(staged)


def _canvas(archive: zipfile.ZipFile, notebooks: dict[str, str], staging: Path, budget: int,
            known: dict[str, str]) -> dict[str, Found]:
    """Canvas's flat layout; ``notebooks`` maps a notebook filename to its assignment, ``known`` a Canvas user
    id to the id the output folder uses for it."""
    latest: dict[tuple[str, str, str], tuple[int, zipfile.ZipInfo, str, bool]] = {}
    users_by_name: dict[str, set[str]] = defaultdict(set)
    other: dict[tuple[str, str], list[zipfile.ZipInfo]] = defaultdict(list)
    for member in _members(archive):
        match = CANVAS.match(PurePosixPath(member.filename).name)
        if not match:
            continue
        name, user = normal_id(match["name"]), match["user"]
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
    stager = _Stager(archive, budget)

    taken = set(known.values())

    def student_id(name: str, user: str) -> str:
        if user in known:
            return known[user]
        return name if len(users_by_name[name]) == 1 and name not in taken else f"{name}_{user}"

    for (name, user, _), (_, member, filename, late) in sorted(latest.items()):
        student, assignment = student_id(name, user), notebooks[filename]
        entry = found.setdefault(student, Found(lms_user_id=user))
        if late:
            entry.late.add(assignment)
        if valid_student_id(student):
            _add(found, student, assignment, stager.stage(member, staging / student / assignment / filename))
    for (name, user), members in sorted(other.items()):
        student = student_id(name, user)
        entry = found.setdefault(student, Found(lms_user_id=user))
        for member in members:
            original = CANVAS.match(PurePosixPath(member.filename).name)["original"]
            if not original.endswith(".ipynb"):
                entry.others.setdefault("", []).append(original)
            elif valid_student_id(student):
                # A notebook whose name matches no assignment: kept aside, reported as misnamed.
                path = staging / ".unmatched" / student / PurePosixPath(member.filename).name
                _add(found, student, "", stager.stage(member, path))
    return found


def _folder_zip(archive: zipfile.ZipFile, staging: Path, budget: int) -> tuple[dict[str, Found], list[str]]:
    """A zip of SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb, perhaps inside one top folder."""
    found: dict[str, Found] = {}
    skipped: list[str] = []
    stager = _Stager(archive, budget)
    origin: dict[tuple[str, str], str] = {}
    # Some Windows tools write '\' between folders; a '..' that this makes a part is no student.
    members = [(m, PurePosixPath(m.filename.replace("\\", "/")).parts) for m in _members(archive)]
    prefixes = {parts[:-3] for m, parts in members if len(parts) >= 3 and parts[-1].endswith(".ipynb")}
    for member, parts in members:
        if len(parts) < 3 or parts[:-3] not in prefixes:
            skipped.append(f"skipped '{member.filename}' in the zip: not in a <student_id>/<assignment>/ folder")
            continue
        raw, assignment, filename = parts[-3:]
        student, assignment = normal_id(raw), normal_id(assignment)
        if raw in ("..", "/") or assignment == "..":
            skipped.append(f"skipped '{member.filename}' in the zip: a path that leaves its folder")
            continue
        entry = found.setdefault(student, Found())
        if not filename.endswith(".ipynb"):
            entry.others.setdefault(assignment, []).append(filename)
            continue
        where = "/".join([*parts[:-3], raw, assignment])
        first = origin.setdefault((student, assignment), where)
        if first != where:
            entry.problem(assignment, f"two entries of the input name this student: {first}/ and {where}/ "
                                      "(neither graded: keep one and grade again)")
            skipped.append(f"'{student}' appears twice in the zip ({first}/ and {where}/): not graded")
            continue
        if valid_student_id(student) and valid_student_id(assignment):
            _add(found, student, assignment, stager.stage(member, staging / student / assignment / filename))
    return found, skipped


def from_folder(folder: Path) -> tuple[dict[str, Found], list[str]]:
    """student_id -> what SUBMISSIONS/<student_id>/<assignment>/ holds, and what the run should say about it."""
    found: dict[str, Found] = {}
    said: list[str] = []
    names: dict[str, str] = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        student_id = normal_id(student.name)
        entry = found.setdefault(student_id, Found())
        if student_id in names:
            entry.problem("", f"two folders name this student: '{names[student_id]}' and '{student.name}' (the "
                              "same name in composed and decomposed Unicode; neither graded: merge them)")
            said.append(f"'{student_id}' names two folders of {folder}: not graded")
            continue
        names[student_id] = student.name
        try:
            _read_student(student, entry)
        except OSError as error:
            entry.problem("", f"its folder could not be read ({error.strerror or error})")
    return found, said


def _read_student(student: Path, entry: Found) -> None:
    """Fill ``entry`` from SUBMISSIONS/<student_id>/: its assignments' notebooks and other files."""
    for assignment in sorted(p for p in student.iterdir() if p.is_dir() and not p.name.startswith(".")):
        name = normal_id(assignment.name)
        files = sorted(p for p in assignment.iterdir() if p.is_file() and not p.is_symlink()
                       and not p.name.startswith("."))
        entry.files[name] = [p for p in files if p.suffix == ".ipynb"]
        entry.others[name] = [p.name for p in files if p.suffix != ".ipynb"]
        for path in entry.files[name]:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                entry.problem(name, f"too large: {path.name} is {_mib(path.stat().st_size)}; a notebook may "
                                    f"have at most {_mib(MAX_NOTEBOOK_BYTES)}")


def from_zip(path: Path, notebooks: dict[str, str], staging: Path, budget: int = STAGING_BYTES,
             known: dict[str, str] | None = None) -> tuple[dict[str, Found], list[str]]:
    """Read a Canvas zip or a zip of the folder layout; ``notebooks`` maps notebook filename -> assignment,
    ``known`` a Canvas user id to the student id the output folder already uses for it.
    `SubmissionsUnreadable` when the zip's directory cannot be read (not a zip, truncated)."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise SubmissionsUnreadable(f"cannot read {path} as a zip ({error}): is it complete?") from error
    with archive:
        names = [PurePosixPath(m.filename) for m in _members(archive)]
        if any(len(n.parts) == 1 and CANVAS.match(n.name) for n in names):
            return _canvas(archive, notebooks, staging, budget, known or {}), []
        return _folder_zip(archive, staging, budget)


def _check_ids(found: dict[str, Found]) -> list[str]:
    """Mark invalid ids and ids that differ only in case; the lines that say so."""
    said = []
    for student, entry in found.items():
        if not valid_student_id(student):
            entry.problem("", f"'{student}' is not a valid student id ({ID_RULE})")
            said.append(f"'{student}' is not a valid student id: listed, not graded")
    by_case: dict[str, list[str]] = defaultdict(list)
    for student in sorted(found):
        by_case[student.casefold()].append(student)
    for same in (group for group in by_case.values() if len(group) > 1):
        said.append(f"ids that differ only in case: {', '.join(same)} (graded as different students)")
        for student in same:
            others = ", ".join(f"'{s}'" for s in same if s != student)
            found[student].notes.append(f"this id differs only in case from {others}")
    return said


def find(submissions: Path, notebooks: dict[str, str], staging: Path, budget: int = STAGING_BYTES,
         known: dict[str, str] | None = None) -> tuple[dict[str, Found], list[str]]:
    """Every student of a folder or a zip by id (valid or not), and the lines the run prints about the input;
    ``known``: Canvas user id -> the id the output folder already uses (`from_zip`).
    `SubmissionsUnreadable` when SUBMISSIONS itself cannot be read."""
    try:
        if submissions.is_file():
            found, said = from_zip(submissions, notebooks, staging, budget, known)
        else:
            found, said = from_folder(submissions)
    except OSError as error:
        raise SubmissionsUnreadable(f"cannot read {submissions}: {error.strerror or error}") from error
    return found, said + _check_ids(found)


def select(found: dict[str, Found], students: tuple[str, ...], assignments: tuple[str, ...]) -> dict[str, Found]:
    """Only the named students (all when ``students`` is empty) and only what concerns the named assignments
    (all when empty): their files, other files and problems, and what concerns every assignment."""
    wanted = {normal_id(s) for s in students}
    chosen = {s: e for s, e in found.items() if not wanted or s in wanted}
    if not assignments:
        return chosen

    def keep(part: dict) -> dict:
        return {a: v for a, v in part.items() if a == "" or a in assignments}

    # replace: every other field of the entry (the LMS's user id...) is kept as it is.
    return {s: replace(e, files=keep(e.files), others=keep(e.others), problems=keep(e.problems),
                       late={a for a in e.late if a in assignments}) for s, e in chosen.items()}
