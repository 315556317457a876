"""What real classes hand in, graded end to end by `python -m autograder grade` as the user running the suite
(root in CI, an ordinary user on a laptop): every student found gets a row, bad input costs only its own
student, a worker killed mid-job is graded again next run, and killing the grader leaves no process behind.

The class is a zip: accented names in decomposed Unicode, ids with a space, an apostrophe or a leading
formula character, an id twice, ids that differ only in case, an invalid id, a corrupt member, a
script instead of the notebook and a notebook that fills its home (the disk limit).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
import time
import unicodedata
import zipfile
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.sandbox.bwrap import SOCKET_LINKS
from tests.grading_helpers import (FIXTURE_SOURCE, ROOT, grade_cli, read_grades, require_sandbox,
                                   solution_sources, student_notebook)

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]
REFERENCE = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
OPTIONS = ("--source", FIXTURE_SOURCE, "--cell-timeout", "20", "--timeout", "60", "--quiet", "--disk", "64")
FILLS_FOLDER = '''for i in range(8):
    with open(f"fill-{i}.bin", "wb") as handle:
        handle.write(b"x" * (20 * 2**20))
import time
time.sleep(5)
''' + REFERENCE["add"]
NFD = unicodedata.normalize("NFD", "müller")


def _notebook(released: Path, **answers: str) -> bytes:
    import json

    return json.dumps(student_notebook(released, {**REFERENCE, **answers})).encode()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, toy_class):
    require_sandbox()
    root = tmp_path_factory.mktemp("bad-input")
    released = toy_class.released["toy"]
    good = _notebook(released)
    wrong = _notebook(released, add="def add(a, b):\n    return a - b")
    members = {f"class/{student}/toy/toy.ipynb": good
               for student in ("ada", "Ada", NFD, "ana maria", "o'brien", "+1+1", "@SUM1", "-rf", "corrupt")}
    members |= {"a/ok.student/toy/toy.ipynb": good, "b/ok.student/toy/toy.ipynb": wrong,
                "class/script/toy/toy.py": b"def add(a, b):\n    return a + b\n",
                "class/filler/toy/toy.ipynb": _notebook(released, add=FILLS_FOLDER)}
    archive = root / "class.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as handle:
        for name, data in members.items():
            handle.writestr(name, data)
            if name == "class/corrupt/toy/toy.ipynb":
                position = handle.fp.tell() - 100
    raw = bytearray(archive.read_bytes())
    raw[position] ^= 0xFF  # inside the corrupt student's member: its CRC no longer matches
    archive.write_bytes(bytes(raw))
    out = root / "out"
    done = grade_cli(archive, "--out", out, "--jobs", "2", *OPTIONS, env={"TMPDIR": str(root)})
    return {"done": done, "out": out, "root": root, "released": released}


def test_the_class_is_graded_and_the_status_says_some_could_not_be(graded) -> None:
    done = graded["done"]
    assert done.returncode == 1, done.stderr
    assert "submissions could not be graded: grades.csv says why" in done.stderr


def test_every_student_found_has_a_row(graded) -> None:
    rows = read_grades(graded["out"])
    assert sorted(student for student, _ in rows) == sorted(
        ["ada", "Ada", "müller", "ana maria", "o'brien", "'+1+1", "'@SUM1", "'-rf", "corrupt", "ok.student", "script",
         "filler"])
    for student in ("müller", "ana maria", "o'brien", "'+1+1", "'@SUM1"):
        assert (rows[(student, "toy")]["score"], rows[(student, "toy")]["reason"]) == ("5", ""), rows[(student, "toy")]


def test_formula_ids_are_escaped_in_grades_csv(graded) -> None:
    with open(OutputFolder(graded["out"]).grades, newline="") as handle:
        ids = [row[0] for row in csv.reader(handle)]
    assert "'+1+1" in ids and "'@SUM1" in ids and "+1+1" not in ids and "@SUM1" not in ids


def test_duplicates_and_case_are_reported_in_rows_and_output(graded) -> None:
    rows, stderr = read_grades(graded["out"]), graded["done"].stderr
    duplicate = rows[("ok.student", "toy")]
    assert duplicate["score"] == "0" and duplicate["reason"] == (
        "not graded: two entries of the input name this student: a/ok.student/toy/ and b/ok.student/toy/ (neither "
        "graded: keep one and grade again)")
    assert "'ok.student' appears twice in the zip (a/ok.student/toy/ and b/ok.student/toy/): not graded" in stderr
    assert rows[("ada", "toy")]["reason"] == "this id differs only in case from 'Ada'"
    assert rows[("Ada", "toy")]["reason"] == "this id differs only in case from 'ada'"
    assert rows[("ada", "toy")]["score"] == rows[("Ada", "toy")]["score"] == "5"
    assert "ids that differ only in case: Ada, ada (graded as different students)" in stderr


def test_bad_members_cost_only_their_student(graded) -> None:
    rows = read_grades(graded["out"])
    assert rows[("corrupt", "toy")]["reason"].startswith(
        "not graded: toy.ipynb could not be read from the zip (BadZipFile: Bad CRC-32"), rows[("corrupt", "toy")]
    assert rows[("'-rf", "toy")]["reason"].startswith("not graded: '-rf' is not a valid student id")
    assert rows[("script", "toy")]["reason"] == "not graded: no submission (expected toy.ipynb); found instead: toy.py"
    assert "Traceback" not in graded["done"].stderr


def test_a_notebook_past_the_disk_quota_is_too_large(graded) -> None:
    row = read_grades(graded["out"])[("filler", "toy")]
    assert (row["score"], row["reason"]) == ("0", "not graded: too large: the notebook filled its home, the 64 MiB "
                                                  "and 16384 files, folders and links a submission may write (its disk "
                                                  "limit); a write past it fails with ENOSPC"), row


def _processes(marker: str) -> list[str]:
    """The command lines of processes whose command line or environment names ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def _kernel_runs_in(line: str) -> bool:
    """Whether the process of a `_processes` line is a kernel: a cold one (``python -m autograder.sandbox.kernel``) or a
    warm one (forked by ``autograder.sandbox.zygote``, named by its one-time token, ag<12 hex>)."""
    try:
        name = Path(f"/proc/{line.split(':')[0]}/comm").read_text().strip()
    except OSError:
        return False
    return "autograder.sandbox.kernel" in line or re.fullmatch(r"ag[0-9a-f]{12}", name) is not None


def _not_killed(processes: list[str]) -> list[str]:
    """Those of ``processes`` (`_processes`' lines) that run on: neither gone, a zombie nor with SIGKILL pending
    (a killed process is listed until a core runs its exit), each with its state, parent and pending signals."""
    running = []
    for line in processes:
        try:
            status = dict(row.split(":\t", 1) for row in
                          Path(f"/proc/{line.split(':')[0]}/status").read_text().splitlines() if ":\t" in row)
        except OSError:
            continue
        pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
        if status["State"][0] not in "ZX" and not pending & 1 << (signal.SIGKILL - 1):
            running.append(f"{line} (state {status['State']}, parent {status['PPid']}, pending {pending:#x})")
    return running


def _student_sleeps(marker: str) -> bool:
    """Whether a kernel of the run whose TMPDIR is ``marker`` runs the student's ``time.sleep``: its main thread
    waits in nanosleep. A warm run's start-up probe is a kernel too, forked from the same zygote before any job (and
    gone by the time a job's kernel is forked): a kernel seen running is not yet the job's."""
    for line in _processes(marker):
        try:
            sleeping = Path(f"/proc/{line.split(':')[0]}/wchan").read_text() == "hrtimer_nanosleep"
        except OSError:
            continue
        if sleeping and _kernel_runs_in(line):
            return True
    return False


def _start(graded, name: str, seconds: int, jobs: int = 1) -> tuple[subprocess.Popen, Path, Path]:
    """Start grading one student whose notebook sleeps ``seconds`` with ``jobs`` workers (two or more: forked from
    one warm process, `autograder.workers.forks`); returns the process, its TMPDIR and DIR, once its kernel runs the
    student's sleep."""
    folder = graded["root"] / name
    (folder / "subs" / "sleepy" / "toy").mkdir(parents=True)
    (folder / "subs" / "sleepy" / "toy" / "toy.ipynb").write_bytes(
        _notebook(graded["released"], add=f"import time\ntime.sleep({seconds})\n" + REFERENCE["add"]))
    (folder / "tmp").mkdir()
    out = folder / "out"
    command = [sys.executable, "-m", "autograder", "grade", str(folder / "subs"), "--out", str(out), "--jobs", str(jobs),
               *map(str, OPTIONS)]
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "TMPDIR": str(folder / "tmp")},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _student_sleeps(str(folder / "tmp")):
        if process.poll() is not None or time.monotonic() > deadline:
            grades = OutputFolder(out).grades
            pytest.fail(f"the kernel never ran: {process.communicate()}; "
                        f"grades.csv: {grades.read_text() if grades.exists() else 'not written'}")
        time.sleep(0.2)
    return process, folder / "tmp", out


def test_a_killed_worker_is_graded_again_on_the_next_run(graded) -> None:
    process, tmp, out = _start(graded, "killed-worker", 4)
    [worker] = [int(line.split(":")[0]) for line in _processes(str(tmp)) if "autograder.workers.worker" in line]
    os.kill(worker, signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    assert OutputFolder(out).grades.exists(), f"grade wrote no grades.csv (exit {process.returncode}): {stderr}"
    row = read_grades(out)[("sleepy", "toy")]
    assert process.returncode == 2 and row["reason"] == (
        "not graded: the grading process was killed while grading it (it is graded again on the next run)"), stderr
    again = grade_cli(out.parent / "subs", "--out", out, "--jobs", "1", *OPTIONS)
    assert again.returncode == 0 and "(1 run now, 0 kept from an earlier run)" in again.stderr, again.stderr
    assert read_grades(out)[("sleepy", "toy")]["score"] == "5"
    left = [link for link in SOCKET_LINKS.glob("ag-*") if link.is_symlink() and str(tmp) in os.readlink(link)]
    assert left == [], "the killed worker's socket link should be removed with the grader's scratch folder"


def test_a_killed_zygote_is_the_graders_failure_and_graded_again(graded) -> None:
    """No submission can reach the zygote, so its death mid-job is the grader's failure (not stored), never the
    student's; the rest of the run grades cold (the zygote is gone) and a rerun grades the student warm."""
    process, tmp, out = _start(graded, "killed-zygote", 4)
    zygotes = [int(line.split(":")[0]) for line in _processes(str(tmp))
               if "autograder.sandbox.zygote" in line and not _kernel_runs_in(line)]
    assert zygotes, _processes(str(tmp))
    for pid in zygotes:  # the processes of the zygote's sandbox: each dies with the one that started it
        with contextlib.suppress(ProcessLookupError):  # gone already, with one killed before it
            os.kill(pid, signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    row = read_grades(out)[("sleepy", "toy")]
    assert process.returncode == 2 and row["reason"] == (
        "not graded: the warm process of this assignment died while grading it (it is graded again on the next "
        "run)"), (row, stderr)
    again = grade_cli(out.parent / "subs", "--out", out, "--jobs", "1", *OPTIONS)
    assert again.returncode == 0 and read_grades(out)[("sleepy", "toy")]["score"] == "5", again.stderr


@pytest.mark.parametrize("jobs", [1, 2])
def test_workers_and_kernels_die_with_the_grader(graded, jobs: int) -> None:
    process, tmp, _ = _start(graded, f"killed-grader-{jobs}", 60, jobs)
    assert len(_processes(str(tmp))) >= 3, "the grader, its worker and the kernel's sandbox"
    process.kill()
    process.wait()
    deadline = time.monotonic() + 1.0
    while (running := _not_killed(_processes(str(tmp)))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running == [], "still running, and not killed, a second after the grader was killed"
    deadline = time.monotonic() + 30  # a killed process leaves once a core runs its exit (CI's 2 are busy)
    while (left := _processes(str(tmp))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], "killed, but still there 30 s later"
