"""`python -m autograder feedback-zip DIR --submissions CANVAS.zip [--assignment A] [--out ZIP]`: every graded
student's feedback pages in one zip that Canvas's *Re-Upload Submissions* (the assignment's column menu in the
Gradebook) attaches to each student's submission as a comment.

Canvas finds the student of each file by its name, ``<name>_<user id>_<attachment id>_<display name>``, and
keeps only a file whose attachment is one of that submission's files. The attachment ids are the ones of the
*Download Submissions* zip that was graded (`autograder.submissions.canvas_names`), so this reads that zip's names again;
students are matched by the Canvas user id ``grades.csv`` keeps. A student graded with no attachment in the
zip (a link or text entry, an anonymous zip) is listed, not written.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from autograder.submissions import canvas_names
from autograder.reports.output_folder import OutputFolder
from autograder.lms.grades import read_grades
from autograder.lms.table import ExportError


def add_parser(commands: "argparse._SubParsersAction") -> None:
    """Register the ``feedback-zip`` subcommand."""
    parser = commands.add_parser(
        "feedback-zip", help="DIR's feedback pages as a zip for Canvas's Re-Upload Submissions",
        description="Name each graded student's feedback pages as Canvas's bulk upload wants them "
                    "(<name>_<user id>_<attachment id>_<page>), from the Canvas submissions zip that was graded.")
    parser.add_argument("dir", type=Path, metavar="DIR", help="the --out folder of `python -m autograder grade`")
    parser.add_argument("--submissions", type=Path, required=True, metavar="CANVAS.zip",
                        help="the zip Canvas gave with Download Submissions, as it was graded")
    parser.add_argument("--assignment", metavar="ASSIGNMENT",
                        help="the assignment of that zip (needed when DIR holds more than one)")
    parser.add_argument("--out", type=Path, metavar="ZIP", help="default: feedback-canvas-<ASSIGNMENT>.zip")


def attachments(path: Path) -> dict[str, tuple[str, str]]:
    """Canvas user id -> (Canvas's name for the student, the latest attachment id) in a submissions zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [PurePosixPath(m.filename).name for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ExportError(f"cannot read {path} as a zip ({error}): is it the zip Canvas gave?") from None
    found: dict[str, tuple[str, str]] = {}
    for parsed in filter(None, map(canvas_names.parse, names)):
        if parsed.user and parsed.attachment and (parsed.user not in found or
                                                  int(parsed.attachment) > int(found[parsed.user][1])):
            found[parsed.user] = (parsed.name, parsed.attachment)
    if not found:
        raise ExportError(f"{path} holds no file named as Canvas's Download Submissions names them "
                          "(<name>_<user id>_<attachment id>_<file>)")
    return found


def feedback_zip(out: Path, submissions: Path, assignment: str | None, target: Path | None) -> tuple[Path, str]:
    """Write the zip; (its path, the summary to print). `ExportError` when refused (nothing is written)."""
    grades = read_grades(out)
    graded = sorted({g.assignment for g in grades.by_key.values() if g.graded})
    if assignment is None and len(graded) != 1:
        raise ExportError(f"--assignment: {out} holds {len(graded)} graded assignments ({', '.join(graded)}): "
                          "name the one of this zip")
    assignment = assignment or graded[0]
    if assignment not in graded:
        raise ExportError(f"--assignment {assignment}: {out}/grades.csv has no graded submission of it "
                          f"(graded there: {', '.join(graded) or 'nothing'})")
    by_user = attachments(submissions)
    entries: dict[str, Path] = {}
    left: list[str] = []
    for grade in grades.graded(assignment):
        pages = sorted(p for p in OutputFolder(out).feedback(grade.student_id, assignment).glob("*.html")
                       if p.is_file() and not p.is_symlink())
        if not grade.lms_user_id or grade.lms_user_id not in by_user or not pages:
            why = ("no feedback page" if not pages else "no Canvas user id in grades.csv" if not grade.lms_user_id
                   else "no attachment of this user in the zip")
            left.append(f"  {grade.student_id}: {why}")
            continue
        name, attachment = by_user[grade.lms_user_id]
        for page in pages:
            entries[f"{name}_{grade.lms_user_id}_{attachment}_{page.stem}-feedback.html"] = page
    if not entries:
        raise ExportError(f"no graded student of {assignment} in {out} has an attachment in {submissions}: is it the "
                          "zip that was graded?")
    target = target or Path(f"feedback-canvas-{assignment}.zip")
    _write_zip(target, entries)
    lines = [f"wrote {target}: {len(entries)} feedback pages of {assignment} for Canvas",
             f"students left out: {len(left)}", *left,
             "In Canvas: Grades, the assignment's column menu > Re-Upload Submissions, choose "
             f"{target.name}; each page becomes a comment on that student's submission."]
    return target, "\n".join(lines)


def _write_zip(target: Path, entries: dict[str, Path]) -> None:
    """The zip in one step (a temporary file renamed over ``target``); the same pages give the same bytes."""
    if not target.resolve().parent.is_dir():
        raise ExportError(f"--out {target}: no folder {target.parent}")
    handle, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.resolve().parent)
    try:
        with os.fdopen(handle, "wb") as stream, zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, page in sorted(entries.items()):
                archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), page.read_bytes(),
                                 zipfile.ZIP_DEFLATED)
        os.replace(scratch, target)
    except OSError as error:
        Path(scratch).unlink(missing_ok=True)
        raise ExportError(f"cannot write {target}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    """The ``feedback-zip`` command: exit status 0, or 2 after one line saying what was refused."""
    try:
        _, summary = feedback_zip(args.dir, args.submissions, args.assignment, args.out)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary)
    return 0
