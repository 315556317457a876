"""The grading sandbox with real bwrap: as an unprivileged instructor (uid 65534 through `setpriv`, with a course
copy it owns and an interpreter it can run), what a stopped sandbox or worker says, and what the sandbox binds.

The unprivileged scenario grades one small class once: a correct submission and the attacks of
tests/sandbox/sandbox_attacks.py (read a file in the grading user's home, a root-only file, another student's
submission and the solutions; connect to a loopback listener; write outside its folder; fork-bomb,
kill its parent and fill /tmp). tests/sandbox/test_hostile.py runs them, and more, as root.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import pytest

from autograder.records import GenerateJob, Template
from autograder.reports.output_folder import OutputFolder
from autograder.sandbox.limits import Limits
from autograder.workers.pool import Pool, WorkerStartError
from autograder.sandbox.bwrap import command, environment, prepare_home, socket_link
from course import ROOT
from tests.sandbox import sandbox_attacks as attacks
from tests.grading_helpers import (FIXTURE_SOURCE, HIDDEN_MARKER, grade_cli, gradebook_scores, read_grades,
                                   require_sandbox, student_notebook, write_submission)
from tests.unprivileged import course_copy, give, grade_as_unprivileged, unprivileged_folder, unprivileged_python

# Rows of the unprivileged class's valid but unusual ids, as grades.csv writes them (NFC, a formula escaped).
NAMES = ["müller", "ana maria", "'+1+1"]
HOARDS = """for i in range(8):
    with open(f"fill-{i}.bin", "wb") as handle:
        handle.write(b"x" * (20 * 2**20))
import time
time.sleep(5)
"""
@pytest.fixture(scope="module")
def unprivileged_run(toy_class):
    if os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    unprivileged_python()  # fails here, before any grading, when uid 65534 can run no interpreter
    released = toy_class.released["toy"]
    listener = attacks.Listener()
    try:
        with unprivileged_folder("autograder-unprivileged-") as base:
            copy = course_copy(base / "course")
            home, private = base / "home", Path(tempfile.mkdtemp(prefix="autograder-root-only-"))
            home.mkdir()
            secrets = [attacks.secret(), attacks.secret()]
            (home / "secret.txt").write_text(secrets[0])
            (home / "secret.txt").chmod(0o600)
            (private / "secret.txt").write_text(secrets[1])
            submissions, out = base / "submissions", base / "out"
            shutil.copytree(released.parent.parent.parent, OutputFolder(out).cache / released.parent.parent.parent.name)
            writes = [str(out / "pwned"), str(submissions / "pwned"), str(home / "pwned"), f"/tmp/{attacks.secret()}",
                      str(copy / "source" / "pwned")]
            reads = [str(home / "secret.txt"), str(private / "secret.txt"), "/etc/shadow", str(copy / "source"),
                     str(submissions / "ada" / "toy" / "toy.ipynb"), str(out)]
            answers = {"ada": attacks.ADD, "snoop": attacks.attack(attacks.READS.format(paths=reads)),
                       "network": attacks.attack(attacks.CONNECTS.format(host=attacks.host_address(),
                                                                         port=listener.port)),
                       "writer": attacks.attack(attacks.WRITES.format(paths=writes)),
                       "bomb": attacks.attack(attacks.FORKS_AND_KILLS), "filler": attacks.attack(attacks.FILLS_TMP)}
            # Bad input costs only its own student here too: ids a folder may hold, a notebook past the disk quota.
            names = {unicodedata.normalize("NFD", "müller"): attacks.ADD, "ana maria": attacks.ADD,
                     "+1+1": attacks.ADD, "hoarder": HOARDS + attacks.ADD}
            for student, add in {**answers, **names}.items():
                write_submission(submissions, student, "toy",
                                 student_notebook(released, {**attacks.REFERENCE, "add": add}))
            done = grade_as_unprivileged(base, submissions, out, "--jobs", "2", "--source", copy / "source",
                                         "--cell-timeout", "10", "--timeout", "60", "--quiet", "--disk", "64",
                                         timeout=600)
            yield {"done": done, "out": out, "secrets": secrets, "heard": list(listener.heard), "answers": answers,
                   "written": [p for p in writes if Path(p).exists()]}
    finally:
        listener.close()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_unprivileged_instructor_grades_the_class(unprivileged_run) -> None:
    done = unprivileged_run["done"]
    assert done.returncode == 1, done.stderr + OutputFolder(unprivileged_run["out"]).grades.read_text()  # the hoarder
    assert "each kernel runs in its own bubblewrap sandbox" in done.stderr and "warning" not in done.stderr
    assert "warm start: each kernel is forked" in done.stderr, done.stderr  # two hostile kernels side by side
    rows = read_grades(unprivileged_run["out"])
    assert {student: (rows[(student, "toy")]["score"], rows[(student, "toy")]["reason"])
            for student in [*unprivileged_run["answers"], *NAMES]} == dict.fromkeys([*unprivileged_run["answers"], *NAMES],
                                                                               ("5", "")), rows
    assert rows[("hoarder", "toy")]["reason"].startswith("not graded: too large: the notebook filled its home, the 64 MiB")
    # The class gradebook, written by the run's recording worker (forked as the unprivileged instructor's), holds them.
    scores = gradebook_scores(OutputFolder(unprivileged_run["out"]).gradebook)
    assert {student: scores.get((student, "toy")) for student in unprivileged_run["answers"]} == \
        dict.fromkeys(unprivileged_run["answers"], 5.0), scores


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_unprivileged_sandbox_keeps_everything_in(unprivileged_run) -> None:
    out = unprivileged_run["out"]
    assert sorted(p.parent.parent.name for p in out.glob("feedback/*/toy/toy.html")) == \
        sorted([*unprivileged_run["answers"], "müller", "ana maria", "+1+1"]), \
        OutputFolder(out).grades.read_text() + unprivileged_run["done"].stderr
    assert attacks.files_containing(out, unprivileged_run["secrets"]) == []
    assert attacks.files_containing(OutputFolder(out).all_feedback, [HIDDEN_MARKER]) == []
    assert unprivileged_run["heard"] == [] and unprivileged_run["written"] == []
    feedback = {s: (OutputFolder(out).feedback(s, "toy") / "toy.html").read_text()
                for s in ("snoop", "network", "bomb", "filler")}
    assert "FileNotFoundError" in feedback["snoop"]
    assert len(re.findall(r"no connection: \w+", feedback["network"])) == 3, "three attempts, all refused"
    assert "fork stopped: BlockingIOError" in feedback["bomb"] and "tmp full after" in feedback["filler"]


def test_a_worker_that_cannot_start_names_the_cause(tmp_path) -> None:
    not_executable = tmp_path / "python"
    not_executable.write_text("#!/bin/sh\n")
    pool = Pool(1, tmp_path / "logs", python=str(not_executable))
    with pytest.raises(WorkerStartError, match="Permission denied"):
        job = GenerateJob(Template("toy", "", tmp_path / "template", ("toy",), ()), str(tmp_path), "source")
        pool.run([job], 30, lambda index, result: None)
    pool.close()


@pytest.mark.slow
def test_a_worker_that_dies_at_start_ends_the_run(tmp_path) -> None:
    broken = tmp_path / "broken" / "nbgrader"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('this nbgrader is broken')\n")
    (tmp_path / "subs" / "ada" / "toy").mkdir(parents=True)
    done = grade_cli(tmp_path / "subs", "--out", tmp_path / "out", "--source", FIXTURE_SOURCE, "--quiet",
                     env={"PYTHONPATH": os.pathsep.join([str(tmp_path / "broken"), str(ROOT)])}, timeout=180)
    assert done.returncode == 2
    assert "a grading worker could not start" in done.stderr and "this nbgrader is broken" in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.sandbox
def test_no_sandbox_stops_the_run_unless_no_isolate(tmp_path, toy_class) -> None:
    released = toy_class.released["toy"]
    refusing = tmp_path / "bin" / "bwrap"
    refusing.parent.mkdir()
    refusing.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.11.0' && exit 0\n"
                        "echo 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    refusing.chmod(0o755)
    write_submission(tmp_path / "subs", "ada", "toy", student_notebook(released, attacks.REFERENCE))
    env = {"PATH": f"{refusing.parent}{os.pathsep}{os.environ['PATH']}"}
    for out in ("out", "out-no-isolate"):
        shutil.copytree(toy_class.cache, OutputFolder(tmp_path / out).cache)
    stopped = grade_cli(tmp_path / "subs", "--out", tmp_path / "out", "--source", FIXTURE_SOURCE, "--quiet", env=env)
    assert stopped.returncode == 2 and not OutputFolder(tmp_path / "out").grades.exists()
    assert "No permissions to create a new namespace" in stopped.stderr and "sysctl" in stopped.stderr
    assert "--no-isolate" in stopped.stderr
    unsafe = grade_cli(tmp_path / "subs", "--out", tmp_path / "out-no-isolate", "--source", FIXTURE_SOURCE,
                       "--quiet", "--no-isolate", env=env)
    assert unsafe.returncode == 0, unsafe.stderr
    assert "warning: --no-isolate" in unsafe.stderr
    assert read_grades(tmp_path / "out-no-isolate")[("ada", "toy")]["score"] == "5"


def test_the_sandbox_binds_only_what_the_interpreter_needs(tmp_path) -> None:
    home = tmp_path / "kernel"
    argv = command(home, home, Limits(), environment(home, Limits(), ()), ["python"])
    sources = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--ro-bind", "--bind")]
    for hidden in (ROOT, ROOT / "solutions", ROOT / "tests", Path.home(), Path("/etc/shadow"), Path("/root")):
        assert str(hidden) not in sources, hidden
        assert not any(hidden.is_relative_to(source) for source in sources if source != "/"), hidden
    assert [source for source in sources if source != "/" and not source.startswith(("/usr", "/etc/", "/bin", "/lib", "/sbin", "/proc"))
            and not source.startswith((sys.prefix, sys.base_prefix)) and "site-packages" not in source] == \
        [str(ROOT / "autograder"), str(ROOT / "course"), str(home)]
    for option in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                   "--die-with-parent", "--new-session", "--clearenv"):
        assert option in argv, option


@pytest.mark.sandbox
def test_the_sandbox_has_no_network_and_its_own_processes(tmp_path) -> None:
    require_sandbox()
    home = tmp_path / "kernel"
    home.mkdir()
    code = ("import os, socket; print((sorted(n for _, n in socket.if_nameindex()), os.getpid(), "
            "sorted(p for p in os.listdir('/proc') if p.isdigit())))")
    done = subprocess.run(command(home, home, Limits(), environment(home, Limits(), ()),
                                  [sys.executable, "-c", code]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    interfaces, pid, processes = eval(done.stdout)  # noqa: S307 - our own probe's repr
    assert interfaces == ["lo"] and pid <= 3 and len(processes) <= 3, done.stdout


def test_an_environment_under_tmp_stays_visible(monkeypatch, tmp_path) -> None:
    # CI may clone the course (and its .venv) under /tmp: the private /tmp must be mounted before it is bound.
    from autograder.sandbox import filesystem

    monkeypatch.setattr(filesystem, "python_dirs", lambda: ["/tmp/checkout/.venv"])
    args = command(tmp_path, tmp_path, Limits(), {}, ["python"])
    binds = [i for i, arg in enumerate(args) if arg == "/tmp/checkout/.venv" and args[i - 1] == "--ro-bind"]
    assert binds and args.index("--tmpfs") < binds[0], "the private /tmp would hide the interpreter under /tmp"


@pytest.mark.sandbox
def test_a_kernel_under_a_long_tmpdir_binds_its_sockets_through_the_short_link(tmp_path) -> None:
    # A Unix socket's path fits in 107 bytes; a job folder under a long TMPDIR (pytest-xdist's) does not.
    require_sandbox()
    home = tmp_path / ("a-long-folder-name-" * 5) / "kernel"
    home.mkdir(parents=True)
    prepare_home(home)
    link = socket_link(home)
    try:
        assert len(str(home / "k-1")) > 107 and len(str(link / "k-1")) < 40
        code = f"import socket; socket.socket(socket.AF_UNIX).bind({str(link / 'k-1')!r})"
        done = subprocess.run(command(home, home, Limits(), environment(home, Limits(), ()),
                                      [sys.executable, "-c", code], link), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert stat.S_ISSOCK((home / "k-1").lstat().st_mode), "the socket should land in the kernel's own folder"
    finally:
        link.unlink()


# Run as uid 65534: start a sandboxed process that allocates 200 MiB when told to, and measure it from outside.
MEASURES = '''
import subprocess, sys, time
from pathlib import Path
from autograder.sandbox.limits import Limits
from autograder.measure import TARGET, peak_memory
from autograder.sandbox.bwrap import command, environment, prepare_home
from autograder.harness.kernel_manager import kernel_pid

home = Path(sys.argv[1])
(home / "hog.py").write_text("import time, os, numpy\\nwhile not os.path.exists('go'): time.sleep(0.05)\\n"
                             "a = numpy.ones(25 * 2**20)\\nopen('done', 'w').close()\\ntime.sleep(60)")
program = [sys.executable, "-m", "hog"]
child = subprocess.Popen(command(home, home, Limits(), environment(home, Limits(), ()), program))
for _ in range(600):
    TARGET.set(kernel_pid(child.pid, "hog"))
    if TARGET.get():
        break
    time.sleep(0.1)
with peak_memory() as peak:
    (home / "go").touch()
    while not (home / "done").exists():
        time.sleep(0.05)
child.kill()
print(peak.bytes)
'''


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_peak_memory_of_a_sandboxed_process_is_read_from_outside_as_an_unprivileged_user(tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    require_sandbox()
    with unprivileged_folder("autograder-measure-") as base:
        copy = course_copy(base / "course")
        home = base / "kernel"
        home.mkdir()
        give(base)
        done = subprocess.run([*unprivileged_python(), "-c", MEASURES, str(home)], cwd=copy, capture_output=True,
                              text=True, timeout=300, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(copy)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert 190 * 2**20 < int(done.stdout.split()[-1]) < 260 * 2**20, done.stdout
