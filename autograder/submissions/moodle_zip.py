"""Moodle's *Download all submissions* zip of an assignment, in both of its layouts:

- in folders (Moodle's default): ``<Full Name>_<participant id>_assignsubmission_file_/<file>`` (a file
  may sit in sub-folders the student uploaded), and ``..._assignsubmission_onlinetext_/onlinetext.html``;
- flat: ``<Full Name>_<participant id>_assignsubmission_file_<file>``.

Moodle writes the student's full name with every ``_`` turned into a space, and a participant id that is
not the Moodle user id: Moodle draws it for each assignment (its table ``assign_user_mapping``), so the
same student has another number in the next assignment's zip. The student id is therefore the full name
(NFC, characters a student id does not allow read as spaces), the same in every zip whoever else is in it.
Two participants of one zip with the same full name cannot be told apart from one zip to the next: they
are graded as ``<Full Name>_<participant id>``, with a note and a line of the run that say so. The gradebook
export maps names to its users: ``python -m autograder export --lms moodle --match name``
(`autograder.lms.moodle`).
"""

from __future__ import annotations

import re
import zipfile
from collections import defaultdict
from pathlib import Path, PurePosixPath

from autograder.submissions.canvas_names import expected_name
from autograder.submissions.staging import Found, Stager, add, normal_id, valid_student_id, zip_members

ENTRY = re.compile(r"^(?P<name>.+)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)$")
NOT_IN_AN_ID = re.compile(r"[^\w.@+'\u2019 -]")


def is_moodle(names: list[PurePosixPath]) -> bool:
    """Whether a zip's members are named as Moodle's *Download all submissions* names them."""
    return any(ENTRY.match(n.parts[0]) for n in names if n.parts)


def student_id(full_name: str) -> str:
    """The id of a Moodle full name: NFC, a character an id does not allow read as a space, one space."""
    return " ".join(NOT_IN_AN_ID.sub(" ", normal_id(full_name)).split())


def _entries(archive: zipfile.ZipFile) -> list[tuple[zipfile.ZipInfo, str, str, str, str]]:
    """(member, full name, participant id, plugin, file's base name) for every member Moodle named."""
    found = []
    for member in zip_members(archive):
        parts = PurePosixPath(member.filename.replace("\\", "/")).parts
        match = ENTRY.match(parts[0]) if parts else None
        if match is None:
            continue
        base = PurePosixPath(parts[-1]).name if len(parts) > 1 else match["rest"]
        if base and ".ipynb_checkpoints" not in parts:
            found.append((member, match["name"], match["participant"], match["plugin"], base))
    return found


def from_moodle(archive: zipfile.ZipFile, notebooks: dict[str, str], staging: Path,
                budget: int) -> tuple[dict[str, Found], list[str]]:
    """Every participant of the zip by id; ``notebooks`` maps a notebook filename to its assignment."""
    entries = _entries(archive)
    participants: dict[str, set[str]] = defaultdict(set)
    for _, name, participant, _, _ in entries:
        participants[student_id(name)].add(participant)
    found: dict[str, Found] = {}
    stager = Stager(archive, budget)
    said: list[str] = []
    for student, numbers in sorted(participants.items()):
        if len(numbers) > 1:
            said.append(f"{len(numbers)} participants of the Moodle zip are named '{student}': graded as "
                        f"{', '.join(f'{student}_{n}' for n in sorted(numbers))}; Moodle numbers participants per "
                        "assignment, so these rows do not join their other assignments (match them by hand)")
    for member, name, participant, plugin, base in sorted(entries, key=lambda e: e[0].filename):
        student = student_id(name)
        if len(participants[student]) > 1:
            note = (f"two participants of this Moodle zip are named '{student}': told apart by Moodle's participant "
                    f"number {participant}, which differs in each assignment")
            student = f"{student}_{participant}"
            found.setdefault(student, Found(lms_name=normal_id(name), notes=[note]))
        entry = found.setdefault(student, Found(lms_name=normal_id(name)))
        if plugin == "onlinetext":
            entry.others.setdefault("", []).append("an online text entry (onlinetext.html), not a notebook file")
            continue
        expected = expected_name(base, set(notebooks))
        if expected is None:
            entry.others.setdefault("", []).append(base)
        elif not valid_student_id(student):
            said.append(f"'{name}' in the Moodle zip gives no valid student id: listed, not graded")
        elif (target := staging / student / notebooks[expected] / base).exists():
            entry.notes.append(f"two files named {base}: graded the first")
        else:
            add(found, student, notebooks[expected], stager.stage(member, target))
    return found, said
