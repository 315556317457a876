"""A class of broken and hostile submissions, graded by root: each costs its author points, never the rest
of the class, and none gets out of its sandbox (tests/sandbox/sandbox_attacks.py; tests/sandbox/test_sandbox.py runs the
same attacks as an unprivileged user).

The fixture course (tests/fixtures/course/source) has `toy` (add: 1 + 2 points, mean: 1 + 1) and
`toy_torch` (scale: 2 points), so that each submission grades in a second or two.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.sandbox import sandbox_attacks as attacks
from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import stored_results
from tests.grading_helpers import (FIXTURE_SOURCE, HIDDEN_MARKER, grade_cli, read_grades,
                                   require_sandbox, solution_sources, student_notebook, write_submission)


AS_ROOT = ("the class is graded by root: run as root (test_sandbox.py's unprivileged scenario needs root too, "
           "to become an unprivileged user)")
pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason=AS_ROOT)]
REFERENCE = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
ADD = REFERENCE["add"]
MEAN = REFERENCE["mean"]

ALWAYS_EQUAL = '''class Anything:
    def __eq__(self, other):
        return True

def add(a, b):
    return Anything()'''

PATCHES_NUMPY = '''np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
np.array_equal = lambda *args, **kwargs: True

def add(a, b):
    return a * b'''

PATCHES_TORCH = '''torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None

def scale(x, s):
    return x'''

PATCHES_CHECKS = '''import autograder.checks as checks
for name in ("expect_close", "expect_equal", "expect_raises", "expect_float", "expect_ndarray"):
    setattr(checks, name, lambda *args, **kwargs: None)

def add(a, b):
    return a * b'''

SWALLOWS_ERRORS = '''def swallow(lines):
    return ["try:\\n"] + ["    " + line for line in lines] + ["\\nexcept BaseException:\\n", "    pass\\n"]

get_ipython().input_transformers_post.append(swallow)

def add(a, b):
    return a * b'''

KILLS_WORKER = '''import os, signal
try:
    os.kill(os.getppid(), signal.SIGKILL)
except OSError:
    pass
''' + ADD

# Deletes every folder above its working directory and every folder the grading command names,
# then kills every process up to the grading command.
VANDAL = '''import os, shutil, signal, tempfile
from pathlib import Path

for folder in list(Path.cwd().parents)[:3]:
    shutil.rmtree(folder, ignore_errors=True)
pid = os.getppid()
while pid > 1:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0")
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
    for arg in args:
        path = Path(arg.decode())
        if path.is_dir() and str(path).startswith(tempfile.gettempdir() + "/pytest"):
            shutil.rmtree(path, ignore_errors=True)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    if b"grade" in args:
        break
    pid = parent
''' + ADD

# Runs the reference solution, read from the course's source folder while being graded.
READS_SOLUTIONS = '''import json
from pathlib import Path

import autograder

source = Path(autograder.__file__).parent.parent / "tests" / "fixtures" / "course" / "source" / "toy" / "toy.ipynb"
try:
    cells = json.loads(source.read_text())["cells"]
    exec("".join(next(c["source"] for c in cells if c["metadata"]["nbgrader"]["grade_id"] == "add")))
except OSError:
    def add(a, b):
        return a - b'''

STUBBORN = '''import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass'''

# One cell's limit for the class: long enough for the filler to fill its 256 MiB /tmp and for the tests right after
# it to get their answers on a loaded machine (one CI run with 3 s took the filler's add points), short enough that
# the loop and the sleeper are stopped soon.
CELL_SECONDS = 6

LOUD = 'print("x" * 20_000_000)\n' + ADD


def _answers(**cells: str) -> dict[str, str]:
    return {**REFERENCE, **cells}


def _build_class(folder: Path, released: dict[str, Path], machine: dict) -> dict[str, tuple]:
    """Write the class; returns student -> (expected toy score, graded?, reason text: '' when the row must
    have no reason at all).

    ``machine``: the planted secret files, the victim's notebook, the output folder and the listener's port.
    """
    toy = released["toy"]

    def submit(student: str, notebook, filename: str | None = None, assignment: str = "toy") -> None:
        write_submission(folder, student, assignment, notebook, filename)

    expected = {}
    submit("jean-luc.picard", student_notebook(toy, _answers()))
    expected["jean-luc.picard"] = (5, True, "")
    submit("blank", json.loads(toy.read_text()))
    expected["blank"] = (0, True, "")
    submit("loop", student_notebook(toy, _answers(add="while True:\n    pass")))
    expected["loop"] = (2, True, f"cell 'add' ran past the {CELL_SECONDS} s limit")
    submit("sleeper", student_notebook(toy, _answers(add="import time\ntime.sleep(10**6)")))
    expected["sleeper"] = (2, True, f"cell 'add' ran past the {CELL_SECONDS} s limit")
    submit("stubborn", student_notebook(toy, _answers(add=STUBBORN)))
    # Ignores the interrupt: its kernel is ended by the CPU limit (graded 0: the kernel died, the cells after it did
    # not run) or, on a loaded machine where CPU time comes slower than wall time, the job by its time limit (not
    # graded): which comes first is the machine's, so either is right (None).
    expected["stubborn"] = (0, None, "")
    submit("dies", student_notebook(toy, _answers(add="import os\nos._exit(1)")))
    expected["dies"] = (0, True, "the kernel died")  # graded: the tests after its death fail, with the reason
    submit("hog", student_notebook(toy, _answers(mean="hog = np.ones(2**31)\n" + MEAN)))
    expected["hog"] = (3, True, "cell 'mean' ran out of memory")
    submit("syntax", student_notebook(toy, _answers(add="def add(a, b)\n    return a + b")))
    expected["syntax"] = (2, True, "")
    submit("edits.tests", student_notebook(toy, _answers(add="def add(a, b):\n    return a - b",
                                                          test_add="pass", test_add_hidden="")))
    expected["edits.tests"] = (2, True, "")
    deleted = student_notebook(toy, _answers())
    deleted["cells"] = [c for c in deleted["cells"]
                        if c["metadata"].get("nbgrader", {}).get("grade_id") not in ("test_add", "test_add_hidden")]
    submit("deletes-tests", deleted)
    # A deleted test cell is put back from the released notebook (autograder.submissions.restore), with a note: the
    # reference answers then earn every point, as they would with the tests in place.
    expected["deletes-tests"] = (5, True, "deleted: restored from")
    submit("always_equal", student_notebook(toy, _answers(add=ALWAYS_EQUAL)))
    # Every trick below only changes the student's own kernel; the tests run outside it (trusted scoring), so
    # each earns what its honest answers earn: a wrong add (0 of 3) and the reference mean (2 of 2).
    expected["always_equal"] = (2, True, "")
    submit("patches_numpy", student_notebook(toy, _answers(add=PATCHES_NUMPY)))
    expected["patches_numpy"] = (2, True, "")
    submit("patches_checks", student_notebook(toy, _answers(add=PATCHES_CHECKS)))
    expected["patches_checks"] = (2, True, "")
    submit("swallows_errors", student_notebook(toy, _answers(add=SWALLOWS_ERRORS)))
    expected["swallows_errors"] = (2, True, "")
    submit("kills-worker", student_notebook(toy, _answers(add=KILLS_WORKER)))
    expected["kills-worker"] = (5, True, "")
    submit("vandal", student_notebook(toy, _answers(add=VANDAL)))
    expected["vandal"] = (5, True, "")
    submit("reads_solutions", student_notebook(toy, _answers(add=READS_SOLUTIONS)))
    expected["reads_solutions"] = (2, True, "")
    victim = student_notebook(toy, _answers())
    victim["cells"].append({"cell_type": "markdown", "metadata": {}, "source": machine["victim_secret"]})
    submit("victim", victim)
    expected["victim"] = (5, True, "")
    read = [machine["home_secret"], machine["root_secret"], "/etc/shadow", "/root",
            str(folder / "victim" / "toy" / "toy.ipynb"), str(folder), str(machine["out"]), str(FIXTURE_SOURCE)]
    submit("snoop", student_notebook(toy, _answers(add=attacks.attack(attacks.READS.format(paths=read)))))
    expected["snoop"] = (5, True, "")
    connect = attacks.CONNECTS.format(host=attacks.host_address(), port=machine["port"])
    submit("network", student_notebook(toy, _answers(add=attacks.attack(connect))))
    expected["network"] = (5, True, "")
    submit("writer", student_notebook(toy, _answers(add=attacks.attack(attacks.WRITES.format(paths=machine["writes"])))))
    expected["writer"] = (5, True, "")
    submit("bomb", student_notebook(toy, _answers(add=attacks.attack(attacks.FORKS_AND_KILLS))))
    expected["bomb"] = (5, True, "")
    submit("filler", student_notebook(toy, _answers(add=attacks.attack(attacks.FILLS_TMP))))
    expected["filler"] = (5, True, "")
    submit("corrupt", "{ this is not json")
    expected["corrupt"] = (0, False, "not a readable notebook")
    submit("misnamed", student_notebook(toy, _answers()), filename="toy (1).ipynb")
    expected["misnamed"] = (5, True, "misnamed notebook: graded toy (1).ipynb as toy.ipynb")
    (folder / "empty.folder" / "toy").mkdir(parents=True)
    expected["empty.folder"] = (0, False, "no notebook named toy.ipynb")
    submit("loud", student_notebook(toy, _answers(add=LOUD)))
    expected["loud"] = (5, True, "")
    torch_reference = solution_sources(FIXTURE_SOURCE / "toy_torch" / "toy_torch.ipynb")
    submit("torch-only", student_notebook(released["toy_torch"], torch_reference), assignment="toy_torch")
    expected["torch-only"] = (0, False, "no submission")
    submit("patches_torch", student_notebook(released["toy_torch"], {"scale": PATCHES_TORCH}),
           assignment="toy_torch")
    return expected


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, toy_class):
    require_sandbox()
    root = tmp_path_factory.mktemp("hostile")
    released = toy_class.released
    submissions, out, home, private = root / "submissions", root / "out", root / "home", root / "root-only"
    shutil.copytree(toy_class.cache, OutputFolder(out).cache)
    machine = {"home_secret": str(home / "secret.txt"), "root_secret": str(private / "secret.txt"),
               "victim_secret": attacks.secret(), "out": out, "secrets": [attacks.secret(), attacks.secret()]}
    home.mkdir()
    Path(machine["home_secret"]).write_text(machine["secrets"][0])
    private.mkdir(mode=0o700)
    Path(machine["root_secret"]).write_text(machine["secrets"][1])
    os.chmod(machine["root_secret"], 0o600)
    written = f"/tmp/{attacks.secret()}"
    machine["writes"] = [str(out / "pwned"), str(submissions / "pwned"), str(home / "pwned"), written,
                         str(FIXTURE_SOURCE / "pwned")]
    listener = attacks.Listener()
    machine["port"] = listener.port
    try:
        expected = _build_class(submissions, released, machine)
        before = _snapshot(submissions)
        done = grade_cli(submissions, "--out", out, "--jobs", "2", "--source", FIXTURE_SOURCE, "--cell-timeout", str(CELL_SECONDS),
                         "--timeout", "10", "--quiet", env={"HOME": str(home)})
    finally:
        listener.close()
    return {"done": done, "out": out, "expected": expected, "before": before, "submissions": submissions,
            "machine": machine, "heard": listener.heard, "written": [p for p in machine["writes"] if Path(p).exists()]}


def test_the_class_is_graded(graded_class) -> None:
    done = graded_class["done"]
    assert done.returncode == 1, done.stderr  # graded, and some submissions (corrupt, dies...) could not be


@pytest.mark.parametrize("student", ["jean-luc.picard", "blank", "loop", "sleeper", "stubborn", "dies", "hog",
                                     "syntax", "edits.tests", "deletes-tests", "always_equal", "patches_numpy",
                                     "patches_checks", "swallows_errors", "kills-worker", "vandal", "reads_solutions",
                                     "corrupt", "misnamed", "empty.folder", "loud", "torch-only", "victim", "snoop",
                                     "network", "writer", "bomb", "filler"])
def test_each_outcome(graded_class, student: str) -> None:
    score, graded, reason = graded_class["expected"][student]
    row = read_grades(graded_class["out"])[(student, "toy")]
    assert (float(row["score"]), row["max_score"]) == (score, "5"), f"{student}: {row['score']} of {row['max_score']}, " \
                                                                    f"reason {row['reason']!r}"
    if graded is None:
        assert row["reason"].startswith("not graded") or "the kernel died" in row["reason"], row
        return
    assert row["reason"].startswith("not graded") != graded, row
    if reason:
        assert reason in row["reason"], row
    else:
        assert row["reason"] == "", f"{student}: no note was expected, {row}"
    feedback = OutputFolder(graded_class["out"]).feedback(student, "toy")
    assert any(feedback.glob("*.html")) == graded, row


def test_patched_torch_comparisons_do_not_fool_the_checks(graded_class) -> None:
    row = read_grades(graded_class["out"])[("patches_torch", "toy_torch")]
    assert (row["score"], row["max_score"], row["reason"]) == ("0", "2", ""), row
    (cell,) = stored_results(OutputFolder(graded_class["out"]), "toy_torch")["patches_torch"].cells
    assert "scale(x, 2.5) is not right" in cell.message, cell  # the true mismatch: the patch never reached the test


def test_every_student_and_assignment_has_one_row(graded_class) -> None:
    rows = read_grades(graded_class["out"])
    students = set(graded_class["expected"]) | {"patches_torch"}
    assert set(rows) == {(s, a) for s in students for a in ("toy", "toy_torch")}
    assert rows[("jean-luc.picard", "toy_torch")]["reason"] == "not graded: no submission (expected toy_torch.ipynb)"


def test_submissions_are_untouched(graded_class) -> None:
    assert _snapshot(graded_class["submissions"]) == graded_class["before"]


def test_feedback_is_small_and_hides_hidden_tests(graded_class) -> None:
    pages = sorted(OutputFolder(graded_class["out"]).all_feedback.rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text()
        assert HIDDEN_MARKER not in text and "expect_equal(add(20, 22)" not in text, page
        assert len(text) < 400_000, f"{page} is {len(text)} characters"
    loud = OutputFolder(graded_class["out"]).feedback("loud", "toy") / "toy.html"
    assert "hidden tests: not shown" in loud.read_text()


def test_report_names_who_was_not_graded(graded_class) -> None:
    report = OutputFolder(graded_class["out"]).report.read_text()
    for student in ("dies", "corrupt", "empty.folder"):
        assert student in report
    assert "<svg " in report, "the charts are drawn"


def test_isolation_is_reported(graded_class) -> None:
    message = graded_class["done"].stderr
    assert "each kernel runs in its own bubblewrap sandbox" in message and "warning:" not in message, message
    # Two at a time (--jobs 2), each forked from the one warm process of the assignment: siblings side by side.
    assert "warm start: each kernel is forked" in message, message


def test_nothing_read_gets_out(graded_class) -> None:
    machine = graded_class["machine"]
    leaks = attacks.files_containing(graded_class["out"], machine["secrets"])
    snoops = OutputFolder(graded_class["out"]).all_feedback / "snoop"
    leaks += [f"snoop's feedback: {p}" for p in attacks.files_containing(snoops, [machine["victim_secret"]])]
    assert not leaks
    assert not any(secret in graded_class["done"].stderr + graded_class["done"].stdout for secret in machine["secrets"])
    snooped = (OutputFolder(graded_class["out"]).feedback("snoop", "toy") / "toy.html").read_text()
    assert "FileNotFoundError" in snooped, "the snoop's attempts ran and printed their failures"


def test_no_network_and_no_writes_outside(graded_class) -> None:
    assert graded_class["heard"] == []
    assert graded_class["written"] == []
    page = (OutputFolder(graded_class["out"]).feedback("network", "toy") / "toy.html").read_text()
    assert len(re.findall(r"no connection: \w+", page)) == 3, "three attempts, all refused"


def test_fork_bomb_and_full_tmp_are_stopped(graded_class) -> None:
    feedback = OutputFolder(graded_class["out"]).all_feedback
    assert "fork stopped: BlockingIOError" in (feedback / "bomb" / "toy" / "toy.html").read_text()
    assert "tmp full after" in (feedback / "filler" / "toy" / "toy.html").read_text()
