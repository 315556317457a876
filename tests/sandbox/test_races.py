"""A kernel that swaps every name it can reach for a link, for the whole notebook, never makes the grader act
on what the link names (issue 32, item 1: the grader once chmodded the channel's socket by its path in the
kernel's home, so a link swapped in between made any file of the machine 0666).

A swapper tries, while a test calls it (its channel socket bound), to exchange every channel socket it
can see with a link: it never manages one. Each racer student starts a process that, until its kernel ends, exchanges (``renameat2`` with
``RENAME_EXCHANGE``) every name in its home, its working folder and every folder under /tmp it can see
with a link to a canary file (0600, the grading user's) or to one of the course's own files, and tries
the channel's socket names ahead of time. Another student leaves a FIFO where the kernel's timings
file was. The class is graded as root and as uid 65534, warm and ``--cold``: every canary and course
file keeps its mode and bytes, the honest student and the FIFO's keep full marks.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.sandbox.limits import Limits
from autograder.sandbox.bwrap import command, environment, new_channel, prepare_home
from autograder.harness.execute import SOCKET_UMASK
from autograder.sandbox.warm import Zygote, ZygoteClient
from tests.sandbox import sandbox_attacks as attacks
from tests.grading_helpers import (read_grades, require_sandbox, student_notebook,
                                   write_submission)
from tests.unprivileged import course_copy, give, unprivileged_folder, unprivileged_python

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

# While a test calls it (the channel's socket is bound then), tries to swap every channel socket it can see for a
# link and back: it must never manage one.
SWAPS = '''def add(a, b):
    import ctypes, glob, os
    libc, done = ctypes.CDLL(None, use_errno=True), []
    for sock in glob.glob("/tmp/*/channel-*.sock") + glob.glob(os.path.join(os.environ["HOME"], "channel-*.sock")):
        try:
            os.symlink("/nonexistent", sock + ".evil")
        except OSError as error:
            done.append(f"no link: {type(error).__name__}")
            continue
        if libc.renameat2(-100, sock.encode(), -100, (sock + ".evil").encode(), 2) == 0:
            libc.renameat2(-100, sock.encode(), -100, (sock + ".evil").encode(), 2)
            done.append("swapped")
    print("SWAPS", done)
    return a + b
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


def _class(base: Path, released: Path, targets: list[Path]) -> Path:
    """The submissions (of the toy notebook ``released``): three racers, the swapper, the FIFO and an honest
    student."""
    submissions = base / "submissions"
    racer = attacks.attack(START_RACER.format(races=RACES, targets=[str(t) for t in targets]))
    answers = {**dict.fromkeys(RACERS, racer), "fifo": attacks.attack(FIFO), "honest": attacks.ADD, "swapper": SWAPS}
    for student, add in answers.items():
        write_submission(submissions, student, "toy", student_notebook(released, {**attacks.REFERENCE, "add": add}))
    return submissions


@pytest.fixture(scope="module", params=[pytest.param((user, mode), id=f"{user}-{mode}") for user in ("root", "uid65534")
                        for mode in ("warm", "cold")])
def raced(request, toy_class):
    if os.geteuid() != 0:
        pytest.skip("needs root: the canary is root's, and the unprivileged run becomes uid 65534")
    user, mode = request.param
    with unprivileged_folder("autograder-races-") as base:
        copy = course_copy(base / "course")
        canary = base / "private" / "canary.txt"
        canary.parent.mkdir()
        canary.write_text(attacks.secret())
        course_files = [copy / "source" / "toy" / "toy.ipynb", copy / "autograder" / "__init__.py"]
        targets = [canary, *course_files]
        submissions = _class(base, toy_class.released["toy"], targets)
        out = base / "out"
        args = [str(submissions), "--out", str(out), "--source", str(copy / "source"), "--jobs", "2", "--quiet",
                "--cell-timeout", "15", "--timeout", "45", *(["--cold"] if mode == "cold" else [])]
        env = {"HOME": str(base), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": str(copy)}
        if user == "root":
            python: tuple[str, ...] = (sys.executable,)
        else:
            python = unprivileged_python()
            give(base)
        canary.chmod(0o600)
        before = _fingerprint(targets)
        done = subprocess.run([*python, "-m", "autograder", "grade", *args], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=900)
        yield {"done": done, "out": out, "before": before, "after": _fingerprint(targets)}


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
def test_no_kernel_can_swap_the_socket_a_test_is_listening_on(raced) -> None:
    page = (OutputFolder(raced["out"]).feedback("swapper", "toy") / "toy.html").read_text()
    printed = re.findall(r"SWAPS \[([^\]]*)\]", html.unescape(re.sub(r"<[^>]+>", "", page)))
    assert printed and not [found for found in printed if "swapped" in found], printed


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_a_fifo_for_the_timings_file_does_not_stop_its_worker(raced) -> None:
    rows = read_grades(raced["out"])
    assert (rows[("fifo", "toy")]["score"], rows[("fifo", "toy")]["reason"]) == ("5", ""), \
        OutputFolder(raced["out"]).grades.read_text()


# Run in a kernel's sandbox: everything it tries on its channel folder, and whether it can still connect there.
CHANNEL_PROBE = '''import ctypes, json, os, socket, sys
folder, home = sys.argv[1], os.environ["HOME"]
libc = ctypes.CDLL(None, use_errno=True)
socket_path, tried = os.path.join(folder, "channel-1.sock"), {}
os.symlink("/etc/passwd", os.path.join(home, "evil"))

def attempt(name, call):
    try:
        result = call()
        if result not in (None, 0):
            raise OSError(ctypes.get_errno(), "")
        tried[name] = "done"
    except OSError as error:
        tried[name] = type(error).__name__

attempt("exchange", lambda: libc.renameat2(-100, socket_path.encode(), -100, os.path.join(home, "evil").encode(), 2))
attempt("symlink", lambda: os.symlink("/etc/passwd", os.path.join(folder, "channel-2.sock")))
attempt("create", lambda: open(os.path.join(folder, "x"), "w").close())
attempt("unlink", lambda: os.unlink(socket_path))
attempt("chmod", lambda: os.chmod(socket_path, 0o777))
attempt("connect", lambda: socket.socket(socket.AF_UNIX).connect(socket_path))
open(os.path.join(home, "tried.json"), "w").write(json.dumps(tried))
'''
REFUSED = {"exchange", "symlink", "create", "unlink", "chmod"}


def _bound(channel) -> socket.socket:
    """The grader's socket in ``channel``, made as `autograder.harness.execute` makes it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(SOCKET_UMASK)
    try:
        listener.bind(str(channel.link / "channel-1.sock"))
    finally:
        os.umask(previous)
    listener.listen(1)
    return listener


@pytest.mark.sandbox
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_kernel_can_connect_to_its_channel_but_never_change_a_name_there(mode: str, tmp_path) -> None:
    require_sandbox()
    scratch = Path(tempfile.mkdtemp(prefix="autograder-channel-", dir=tmp_path))
    limits = Limits()
    zygote = Zygote((), str(scratch)) if mode == "warm" else None
    client = ZygoteClient(zygote.address) if zygote else None
    home = client.new_home() if client else scratch / "home"
    home.mkdir(exist_ok=True)
    prepare_home(home)
    channel = client.new_channel() if client else new_channel(scratch)
    listener = _bound(channel)
    try:
        assert stat.S_IMODE(os.lstat(channel.folder / "channel-1.sock").st_mode) == 0o666, "made 0666, no chmod"
        env = environment(home, limits, ())
        if client:
            probe = CHANNEL_PROBE.replace("sys.argv[1]", repr(str(channel.link)))
            kernel = client.spawn(home, home, home / "link", home / "connection.json", limits, env, probe, channel)
            assert kernel.wait(120) == 0
        else:
            argv = command(home, home, limits, env, [sys.executable, "-c", CHANNEL_PROBE, str(channel.link)],
                           read_only=((channel.folder, channel.link),))
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
        tried = json.loads((home / "tried.json").read_text())
        assert {name for name, result in tried.items() if result == "done"} == {"connect"}, tried
        assert sorted(os.listdir(channel.folder)) == ["channel-1.sock"]
        assert stat.S_ISSOCK(os.lstat(channel.folder / "channel-1.sock").st_mode)
    finally:
        listener.close()
        channel.link.unlink(missing_ok=True)
        if zygote:
            client.close()
            zygote.close()
        shutil.rmtree(scratch, ignore_errors=True)
