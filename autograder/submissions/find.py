"""Find the submissions to grade: a folder `SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb`,
a plain zip of that layout, a zip of submissions downloaded from Canvas, or Moodle's *Download all
submissions* zip (`autograder.submissions.moodle_zip`).

Canvas names each file `<name>[_LATE]_<user id>_<attachment id>_<original filename>`, where `<name>`
is the student's sortable name in lower case with every character but letters, digits and `_` removed
(so it may hold underscores and non-ASCII letters), and a resubmitted file's original name may carry a
`-1`, `-2`... suffix; the original filename says which notebook (and so which assignment) it is. The
student id is the one the output folder already uses for that Canvas user id (``known``), else
`<name>_<user id>`: derived from the Canvas user id, which never changes, and never from who else is in the
zip, so a student keeps one id for the whole term (two students named "Smith, John" are `smithjohn_482799`
and `smithjohn_482736` in every zip, with or without the other). Anonymous
grading, link and text entries and renamed notebooks are read as `autograder.submissions.canvas_names` says; a zip a
student handed in is opened one level deep (`_inner_zip`).

Every student found keeps an entry, graded or not: ids are normalised to Unicode NFC; an id that is
not valid, two entries of the input that name the same id, a member of the zip that cannot be read
and a notebook over a size limit become that student's own problem (`Found.problems`), and ids that
differ only in case are noted (`Found.notes`), never merged or overwritten in silence.

Nothing is extracted with the paths a zip holds: every notebook is copied to
`<staging>/<student_id>/<assignment>/<filename>` with names checked here, each member read on its
own and counted against a total staging budget.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path, PurePosixPath

from autograder.submissions import canvas_names

from autograder.submissions import moodle_zip
from autograder.submissions.canvas_names import CanvasName

# re-exported: the grader and the tests take them from here
from autograder.submissions.staging import (  # noqa: F401
    ID_RULE, MAX_NOTEBOOK_BYTES, STAGING_BYTES, Found, Stager, add, mib, normal_id, valid_student_id, zip_members)

RESUBMITTED = re.compile(r"^(?P<stem>.+?)(?:-\d+)?$")
INNER_MEMBERS = 1000  # a zip inside a Canvas zip with more files than this is not opened


class SubmissionsUnreadable(RuntimeError):
    """SUBMISSIONS as a whole cannot be read (missing, not a zip, truncated): the message says which and why."""

def _canvas(archive: zipfile.ZipFile, notebooks: dict[str, str], staging: Path, budget: int,
            known: dict[str, str]) -> dict[str, Found]:
    """Canvas's flat layout (`autograder.submissions.canvas_names`); ``notebooks`` maps a notebook filename to its assignment,
    ``known`` a Canvas user id to the id the output folder uses for it."""
    latest: dict[tuple[str, str, str], tuple[int, zipfile.ZipInfo, str, bool]] = {}
    other: dict[tuple[str, str], list[tuple[zipfile.ZipInfo, CanvasName]]] = defaultdict(list)
    for member in zip_members(archive):
        parsed = canvas_names.parse(PurePosixPath(member.filename).name)
        if parsed is None:
            continue
        name, user = normal_id(parsed.name), parsed.user
        named = _notebook_name(parsed.original, notebooks) if parsed.kind == "file" else None
        if named is None:
            other[(name, user)].append((member, parsed))
            continue
        key = (name, user, named[0])
        if key not in latest or int(parsed.attachment) > latest[key][0]:
            latest[key] = (int(parsed.attachment), member, named[1], parsed.late)
    found: dict[str, Found] = {}
    stager = Stager(archive, budget)

    def student_id(name: str, user: str) -> str:
        """The id the folder already uses for ``user``, else ``<name>_<user id>`` (``anon_<id>`` when anonymous):
        the same in every zip, whoever else is in it."""
        return known.get(user) or (f"{name}_{user}" if user else name)

    for (name, user, filename), (_, member, staged_name, late) in sorted(latest.items()):
        student, assignment = student_id(name, user), notebooks[filename]
        entry = found.setdefault(student, Found(lms_user_id=user, lms_name=name))
        if late:
            entry.late.add(assignment)
        if valid_student_id(student):
            add(found, student, assignment, stager.stage(member, staging / student / assignment / staged_name))
    for (name, user), handed_in in sorted(other.items()):
        student = student_id(name, user)
        entry = found.setdefault(student, Found(lms_user_id=user, lms_name=name))
        for member, parsed in handed_in:
            if parsed.kind != "file":
                entry.others.setdefault("", []).append(
                    canvas_names.entry_description(parsed.kind, stager.head(member, canvas_names.ENTRY_BYTES)))
            elif parsed.original.lower().endswith(".zip") and valid_student_id(student):
                _inner_zip(found, student, parsed, stager.read(member), notebooks, staging, stager)
            elif not parsed.original.endswith(".ipynb"):
                entry.others.setdefault("", []).append(parsed.original)
            elif valid_student_id(student):
                # A notebook whose name matches no assignment: kept aside, reported as misnamed.
                path = staging / ".unmatched" / student / PurePosixPath(member.filename).name
                add(found, student, "", stager.stage(member, path))
    return found


def _notebook_name(original: str, notebooks: dict[str, str]) -> tuple[str, str] | None:
    """(the notebook a handed-in file name stands for, the name to stage it under), or None: Canvas's own
    resubmission suffix is dropped; a name a browser or Colab changed is kept, so the row notes it."""
    path = PurePosixPath(original)
    resubmitted = RESUBMITTED.match(path.stem)["stem"] + path.suffix
    if resubmitted in notebooks:
        return resubmitted, resubmitted
    expected = canvas_names.expected_name(original, set(notebooks))
    return (expected, original) if expected else None


def _inner_zip(found: dict[str, Found], student: str, parsed: CanvasName, data: bytes | str,
               notebooks: dict[str, str], staging: Path, stager: Stager) -> None:
    """The notebooks of a zip a student handed in, one level deep, each staged by its base name only (never
    the zip's paths), within `INNER_MEMBERS` and the run's staging budget, late when the zip was; the rest is
    noted."""
    entry, zip_name = found[student], parsed.original
    try:
        if isinstance(data, str):
            raise ValueError(data)
        inner = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        entry.others.setdefault("", []).append(f"{zip_name} (not opened: {error})")
        return
    with inner:
        listed = [m for m in zip_members(inner) if ".ipynb_checkpoints" not in m.filename]
        if len(listed) > INNER_MEMBERS:
            entry.others.setdefault("", []).append(f"{zip_name} (not opened: {len(listed)} files, more than "
                                                   f"{INNER_MEMBERS})")
            return
        inner_stager = Stager(inner, stager.budget - stager.used)
        graded = []
        for member in listed:
            base = PurePosixPath(member.filename.replace("\\", "/")).name
            named = _notebook_name(base, notebooks)
            target = staging / student / notebooks[named[0]] / named[1] if named else None
            if target is not None and not target.exists():
                add(found, student, notebooks[named[0]], inner_stager.stage(member, target))
                graded.append(base)
                if parsed.late:
                    entry.late.add(notebooks[named[0]])
        stager.used += inner_stager.used
    if graded:
        entry.notes.append(f"graded {', '.join(graded)} from the zip {zip_name}")
    else:
        entry.others.setdefault("", []).append(f"{zip_name} (a zip holding no notebook of this course)")


def _folder_zip(archive: zipfile.ZipFile, staging: Path, budget: int) -> tuple[dict[str, Found], list[str]]:
    """A zip of SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb, perhaps inside one top folder."""
    found: dict[str, Found] = {}
    skipped: list[str] = []
    stager = Stager(archive, budget)
    origin: dict[tuple[str, str], str] = {}
    # Some Windows tools write '\' between folders; a '..' that this makes a part is no student.
    members = [(m, PurePosixPath(m.filename.replace("\\", "/")).parts) for m in zip_members(archive)]
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
            add(found, student, assignment, stager.stage(member, staging / student / assignment / filename))
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
                entry.problem(name, f"too large: {path.name} is {mib(path.stat().st_size)}; a notebook may "
                                    f"have at most {mib(MAX_NOTEBOOK_BYTES)}")


def from_zip(path: Path, notebooks: dict[str, str], staging: Path, budget: int = STAGING_BYTES,
             known: dict[str, str] | None = None) -> tuple[dict[str, Found], list[str]]:
    """Read a Moodle zip, a Canvas zip or a zip of the folder layout; ``notebooks`` maps notebook filename ->
    assignment, ``known`` a Canvas user id to the student id the output folder already uses for it.
    `SubmissionsUnreadable` when the zip's directory cannot be read (not a zip, truncated)."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise SubmissionsUnreadable(f"cannot read {path} as a zip ({error}): is it complete?") from error
    with archive:
        names = [PurePosixPath(m.filename) for m in zip_members(archive)]
        if moodle_zip.is_moodle(names):
            return moodle_zip.from_moodle(archive, notebooks, staging, budget)
        if any(len(n.parts) == 1 and canvas_names.parse(n.name) for n in names):
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
