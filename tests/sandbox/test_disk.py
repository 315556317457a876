"""A kernel's home is a filesystem of its own, as large as ``--disk`` (issue 32, item 6): a write past it fails
at once with ENOSPC, with no polling, whatever the kernel writes (a big file, empty files, links with 4 KB
targets, folders), and a notebook that leaves its home full is not graded: too large
(`autograder.sandbox.home`).

One class is graded with ``--disk 32 --jobs 2`` as root and as uid 65534, warm and ``--cold``: four hoarders,
one for each kind of entry, fill their homes and keep what they wrote; a prober writes past the limit, is
told ENOSPC by the write itself, removes what it wrote and answers correctly only if it was; an honest
student is graded beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.sandbox.home import CAPABILITIES, inode_count, is_full, tmpfs_options
from autograder.reports.output_folder import OutputFolder
from autograder.sandbox.limits import Limits
from autograder.sandbox.bwrap import command, environment, prepare_home
from tests.sandbox import sandbox_attacks as attacks
from tests.grading_helpers import (read_grades, released_notebooks, require_sandbox, student_notebook,
                                   write_submission)
from tests.unprivileged import course_copy, give, unprivileged_python

MiB = 2**20
DISK_MIB = 32

# Writes entries into the home until a write fails (at most `cap`); the error is kept in DISK_ERROR.
HOARDS = '''import errno, os
DISK_ERROR = None
os.makedirs("hoard", exist_ok=True)
try:
    for i in range({cap}):
        {write}
except OSError as error:
    DISK_ERROR = errno.errorcode.get(error.errno, str(error.errno))
'''
WRITES = {
    "big-file": 'open("hoard/big", "ab").write(b"x" * 2**20)',
    "empty-files": 'open(f"hoard/empty-{i}", "w").close()',
    "links": 'os.symlink("x" * 4000, f"hoard/link-{i}")',
    "folders": 'os.mkdir(f"hoard/dir-{i}")',
}
CAPS = {"big-file": 48, "empty-files": 12000, "links": 12000, "folders": 12000}
# The prober: 48 MiB in one file. Its `add` is right only if that write failed with ENOSPC; it then frees its
# home, so that it is graded.
PROBES = HOARDS.format(cap=48, write=WRITES["big-file"]) + '''
import shutil
shutil.rmtree("hoard")
def add(a, b):
    return a + b if DISK_ERROR == "ENOSPC" else a - b
'''


def test_the_home_holds_as_many_inodes_as_4_kib_blocks() -> None:
    limits = Limits(disk_bytes=DISK_MIB * MiB)
    assert inode_count(limits) == DISK_MIB * MiB // 4096
    assert tmpfs_options(limits) == f"size={DISK_MIB * MiB},nr_inodes={DISK_MIB * MiB // 4096},mode=0700"


def test_a_home_with_no_block_or_no_inode_left_is_full() -> None:
    free = os.statvfs_result((4096, 4096, 8192, 10, 10, 8192, 5, 5, 0, 255, 0))
    assert not is_full(free)
    assert is_full(os.statvfs_result((4096, 4096, 8192, 0, 0, 8192, 5, 5, 0, 255, 0)))
    assert is_full(os.statvfs_result((4096, 4096, 8192, 10, 10, 8192, 0, 0, 0, 255, 0)))


# A cold kernel's first step, then what it holds: its capabilities, its home's size, inodes and files.
OWNS_HOME = '''import json, os
from autograder.sandbox.home import own_home
from autograder.sandbox.limits import Limits
own_home(Limits(disk_bytes={disk}))
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
usage = os.statvfs(os.environ["HOME"])
print(json.dumps({{"caps": [int(status[name], 16) for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb")],
                  "bytes": usage.f_blocks * usage.f_frsize, "inodes": usage.f_files, "here": os.listdir("."),
                  "seed": open("seed.txt").read(), "no_new_privs": status["NoNewPrivs"].strip()}}))
'''


@pytest.mark.sandbox
def test_a_cold_kernel_makes_its_home_a_tmpfs_of_the_limit_and_keeps_no_capability(tmp_path: Path) -> None:
    require_sandbox()
    home = tmp_path / "kernel"
    (home / "work").mkdir(parents=True)
    (home / "work" / "seed.txt").write_text("released")
    prepare_home(home)
    limits = Limits(disk_bytes=DISK_MIB * MiB)
    argv = command(home, home / "work", limits, environment(home, limits, ()),
                   [sys.executable, "-c", OWNS_HOME.format(disk=limits.disk_bytes)], capabilities=CAPABILITIES)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"caps": [0, 0, 0, 0], "bytes": DISK_MIB * MiB, "inodes": inode_count(limits), "here": ["seed.txt"],
                    "seed": "released", "no_new_privs": "1"}, seen


def _class(base: Path) -> Path:
    released = released_notebooks(base / "templates")["toy"]
    submissions = base / "submissions"
    answers = {kind: attacks.attack(HOARDS.format(cap=CAPS[kind], write=write)) for kind, write in WRITES.items()}
    answers |= {"prober": PROBES, "honest": attacks.ADD}
    for student, add in answers.items():
        write_submission(submissions, student, "toy", student_notebook(released, {**attacks.REFERENCE, "add": add}))
    return submissions


@pytest.fixture(scope="module", params=[pytest.param((user, mode), id=f"{user}-{mode}") for user in ("root", "uid65534")
                                        for mode in ("warm", "cold")])
def graded(request):
    if os.geteuid() != 0:
        pytest.skip("needs root: the unprivileged run becomes uid 65534")
    user, mode = request.param
    base = Path(tempfile.mkdtemp(prefix="autograder-disk-"))
    base.chmod(0o755)
    try:
        copy = course_copy(base / "course")
        submissions = _class(base)
        out = base / "out"
        args = [str(submissions), "--out", str(out), "--source", str(copy / "source"), "--jobs", "2", "--quiet",
                "--disk", str(DISK_MIB), "--cell-timeout", "60", *(["--cold"] if mode == "cold" else [])]
        env = {"HOME": str(base), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": str(copy)}
        python = [sys.executable] if user == "root" else unprivileged_python()
        if user != "root":
            give(base)
        done = subprocess.run([*python, "-m", "autograder", "grade", *args], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=900)
        started = "warm start: each kernel" if mode == "warm" else "cold start (--cold)"
        assert started in done.stderr and "warm start unavailable" not in done.stderr, done.stderr[-3000:]
        yield done, read_grades(out) if OutputFolder(out).grades.exists() else {}, OutputFolder(out).grades
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
@pytest.mark.parametrize("kind", list(WRITES))
def test_a_notebook_that_fills_its_home_is_not_graded(graded, kind: str) -> None:
    done, rows, grades = graded
    assert rows, done.stderr[-3000:]
    row = rows[(kind, "toy")]
    assert row["reason"].startswith("not graded: too large"), grades.read_text() + done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_a_write_past_the_limit_fails_at_once_with_enospc(graded) -> None:
    done, rows, grades = graded
    assert rows, done.stderr[-3000:]
    assert (rows[("prober", "toy")]["score"], rows[("prober", "toy")]["reason"]) == ("5", ""), \
        grades.read_text() + done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_the_student_graded_beside_the_hoarders_keeps_their_grade(graded) -> None:
    done, rows, grades = graded
    assert rows, done.stderr[-3000:]
    assert (rows[("honest", "toy")]["score"], rows[("honest", "toy")]["reason"]) == ("5", ""), \
        grades.read_text() + done.stderr[-3000:]
