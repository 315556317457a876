"""A kernel that swaps every name it can reach for a link, for the whole notebook, never makes the grader act
on what the link names (issue 32, item 1: the grader once chmodded the channel's socket by its path in the
kernel's home, so a link swapped in between made any file of the machine 0666).

Each racer student starts a process that, until its kernel ends, exchanges (``renameat2`` with
``RENAME_EXCHANGE``) every name in its home, its working folder and every folder under /tmp it can see
with a link to a canary file (0600, the grading user's) or to one of the course's own files, and tries
the channel's socket names ahead of time. Another student leaves a FIFO where the kernel's timings
file was. The class is graded as root and as uid 65534, warm and ``--cold``: every canary and course
file keeps its mode and bytes, the honest student and the FIFO's keep full marks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.layout import OutputFolder
from tests import sandbox_attacks as attacks
from tests.grading_helpers import FIXTURE_SOURCE, read_grades, released_notebooks, student_notebook, write_submission
from tests.test_sandbox import UID, _course_copy, _give, unprivileged_python

RACERS = ("racer-1", "racer-2", "racer-3")

# The racer itself: a process of its own (a new session), so that it outlives the cell that starts it.
RACES = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
renameat2 = libc.renameat2
targets = sys.argv[1:]
folders = {}
for folder in [os.environ["HOME"], os.getcwd()] + ["/tmp/" + n for n in os.listdir("/tmp")]:
    if os.path.isdir(folder):
        folders.setdefault(os.path.realpath(folder), folder)
folders = list(folders.values())
made = [0]

def evil(folder, target):
    made[0] += 1
    path = os.path.join(folder, f"evil-{os.getpid()}-{made[0]}")
    try:
        os.symlink(target, path)
    except OSError:
        return None
    return path.encode()

# The channel's sockets, named ahead of time (channel-1.sock, channel-2.sock...): in each folder, the newest one
# is exchanged with a link to the canary and back again, over and over, until the next one appears; at any
# moment the name is as likely to be the link as the socket.
links, newest, swapped, rounds = {}, dict.fromkeys(folders, 1), set(), 0
deadline = time.time() + 300
while rounds % 10000 or time.time() < deadline:
    for folder, n in newest.items():
        for m in (n, n + 1):
            if (folder, m) not in links:
                links[folder, m] = evil(folder, targets[0])
            if links[folder, m] and renameat2(AT_FDCWD, f"{folder}/channel-{m}.sock".encode(), AT_FDCWD,
                                              links[folder, m], RENAME_EXCHANGE) == 0 and m > n:
                newest[folder] = m
    rounds += 1
    if rounds % 5000:
        continue
    for folder in folders:  # every other name: a link to the canary or to one of the course's files
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith(("evil-", "ballast")) or path in swapped:
                continue
            swapped.add(path)
            link = evil(folder, targets[len(swapped) % len(targets)])
            if link:
                renameat2(AT_FDCWD, path.encode(), AT_FDCWD, link, RENAME_EXCHANGE)
'''

# Ballast first: thousands of empty files, which the grader's disk quota walked (holding the GIL) while the
# channel's socket was bound, each swap of threads widening the window between bind and chmod.
START_RACER = '''import os, subprocess, sys
os.makedirs("ballast", exist_ok=True)
for i in range(20000):
    open(f"ballast/{{i}}", "w").close()
for _ in range(2):
    subprocess.Popen([sys.executable, "-c", {races!r}, *{targets!r}], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
'''

# Leaves a FIFO where the kernel wrote its timings: the worker must not wait on it.
FIFO = '''import os
times = os.path.join(os.environ["HOME"], "kernel.times")
try:
    os.unlink(times)
    os.mkfifo(times)
    print("kernel.times is a FIFO now")
except OSError as error:
    print("no FIFO:", type(error).__name__)
'''


def _fingerprint(paths: list[Path]) -> dict[str, tuple[int, str]]:
    return {str(p): (p.stat().st_mode & 0o7777, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths}


def _class(base: Path, targets: list[Path]) -> Path:
    """The submissions: three racers, the FIFO and an honest student."""
    released = released_notebooks(base / "templates")["toy"]
    submissions = base / "submissions"
    racer = attacks.attack(START_RACER.format(races=RACES, targets=[str(t) for t in targets]))
    answers = {**dict.fromkeys(RACERS, racer), "fifo": attacks.attack(FIFO), "honest": attacks.ADD}
    for student, add in answers.items():
        write_submission(submissions, student, "toy", student_notebook(released, {**attacks.REFERENCE, "add": add}))
    return submissions


@pytest.fixture(scope="module", params=[pytest.param((user, mode), id=f"{user}-{mode}") for user in ("root", "uid65534")
                        for mode in ("warm", "cold")])
def raced(request):
    if os.geteuid() != 0:
        pytest.skip("needs root: the canary is root's, and the unprivileged run becomes uid 65534")
    user, mode = request.param
    base = Path(tempfile.mkdtemp(prefix="autograder-races-"))
    base.chmod(0o755)
    try:
        copy = _course_copy(base / "course")
        canary = base / "private" / "canary.txt"
        canary.parent.mkdir()
        canary.write_text(attacks.secret())
        course_files = [copy / "source" / "toy" / "toy.ipynb", copy / "autograder" / "__init__.py"]
        targets = [canary, *course_files]
        submissions = _class(base, targets)
        out = base / "out"
        args = [str(submissions), "--out", str(out), "--source", str(copy / "source"), "--jobs", "2", "--quiet",
                "--cell-timeout", "15", "--timeout", "45", *(["--cold"] if mode == "cold" else [])]
        env = {"HOME": str(base), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": str(copy)}
        if user == "root":
            python = [sys.executable]
        else:
            python = unprivileged_python()
            _give(base, UID)
        canary.chmod(0o600)
        before = _fingerprint(targets)
        done = subprocess.run([*python, "-m", "autograder", "grade", *args], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=900)
        yield {"done": done, "out": out, "before": before, "after": _fingerprint(targets)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_racers_swapping_every_name_never_reach_a_file_of_the_machine(raced) -> None:
    done, out = raced["done"], raced["out"]
    assert raced["after"] == raced["before"], f"a file outside the sandbox changed:\n{raced['before']}\n{raced['after']}"
    rows = read_grades(out)
    assert rows[("honest", "toy")]["score"] == "5", OutputFolder(out).grades.read_text() + done.stderr[-3000:]
    assert all((racer, "toy") in rows for racer in RACERS), OutputFolder(out).grades.read_text()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_a_fifo_for_the_timings_file_does_not_stop_its_worker(raced) -> None:
    rows = read_grades(raced["out"])
    assert (rows[("fifo", "toy")]["score"], rows[("fifo", "toy")]["reason"]) == ("5", ""), \
        OutputFolder(raced["out"]).grades.read_text()
