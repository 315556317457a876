"""Hidden tests draw their inputs from the instructor's secret (`autograder.grading.secret`,
`autograder.checks.hidden_seed`): fixed in a plain kernel, per hand-in under `grade`; the secret never
leaves the grading process."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.grading.options import Options
from autograder.records import CellResult, Result, Task, Template
from autograder.grading.secret import SecretUnusable, hand_in_key, load_secret
from autograder.harness.hidden_seed import HIDDEN_KEY, derived_seed
from autograder.harness.graded_cells import TrustedCells
from course.chapters import chapter, chapters
from course.notebooks import code_cells, solution_sources, student_notebook
from tests.grading_helpers import InstantPool, NoRecorder, grade_cli, plan_of, read_grades, write_submission
from tests.stand_in import StandIn, run_notebook, score

CH1 = chapter("01_similarity")
CH1_MAX = "10"  # chapter 1's points, as grades.csv writes them
PRINT_SEED = "from autograder.checks import hidden_seed\nprint('seed', hidden_seed(101))\n"
# A generator seeded from anything but hidden_seed(...), or the course's TinyDecoder given a constant seed.
CONSTANT_SEED = re.compile(r"(manual_seed|default_rng|Random|RandomState)\((?!hidden_seed\()|TinyDecoder\(.*seed=\d")


def _seed_printed(namespace: dict) -> str:
    run = TrustedCells((), 10.0, namespace).run_given(PRINT_SEED, "test_dot_hidden")
    assert run.passed, run
    return run.stdout


def test_hidden_seed_is_the_fixed_one_in_a_plain_kernel_and_the_hand_ins_under_grade() -> None:
    plain = _seed_printed({"__name__": "__main__"})
    assert plain == "seed 101\n", "a plain kernel, the student's own run and the harness keep the fixed seeds"
    one, other = "11" * 32, "22" * 32
    first = _seed_printed({"__name__": "__main__", HIDDEN_KEY: one})
    assert first == f"seed {derived_seed(one, 101)}\n" != plain
    assert _seed_printed({"__name__": "__main__", HIDDEN_KEY: one}) == first, "the same hand-in, the same seed"
    assert _seed_printed({"__name__": "__main__", HIDDEN_KEY: other}) != first
    assert 0 <= derived_seed(one, 101) < 2**62 and derived_seed(one, 102) != derived_seed(one, 101)


def test_the_hand_ins_key_changes_with_the_student_the_content_and_the_secret(tmp_path: Path) -> None:
    handed = tmp_path / "a.ipynb"
    handed.write_text("{}")
    key = hand_in_key(b"s" * 32, "ada", CH1.slug, {CH1.notebook: str(handed)})
    assert key == hand_in_key(b"s" * 32, "ada", CH1.slug, {CH1.notebook: str(handed)})
    assert key != hand_in_key(b"s" * 32, "bob", CH1.slug, {CH1.notebook: str(handed)})
    assert key != hand_in_key(b"t" * 32, "ada", CH1.slug, {CH1.notebook: str(handed)})
    handed.write_text("{} ")
    assert key != hand_in_key(b"s" * 32, "ada", CH1.slug, {CH1.notebook: str(handed)})


def test_the_secret_is_made_once_with_mode_0600_and_a_readable_or_linked_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    old = os.umask(0)  # the mode is set at creation, whatever the umask
    try:
        secret = load_secret(path)
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o600 and len(secret) == 32
    assert load_secret(path) == secret, "made once: the next run reads the same secret"
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(SecretUnusable, match="link"):
        load_secret(link)
    path.chmod(0o640)
    with pytest.raises(SecretUnusable, match="chmod 600"):
        load_secret(path)
    path.chmod(0o600)
    path.write_text("not hex\n")
    with pytest.raises(SecretUnusable, match="hex"):
        load_secret(path)


def _template(folder: Path) -> Template:
    released = folder / "release" / CH1.slug
    released.mkdir(parents=True, exist_ok=True)
    shutil.copy(CH1.exercise, released)
    return Template(CH1.slug, "key", folder, (CH1.notebook,), ((CH1.notebook, "test_dot", 1.0),))


class RecordingPool(InstantPool):
    """An `InstantPool` that keeps the jobs it was given."""

    def run(self, jobs: list, timeout: float, done) -> None:
        self.given = list(jobs)
        super().run(jobs, timeout, done)


def _keys(tmp_path: Path, out: Path, tasks: list[Task], monkeypatch, secret_file: Path | None = None) -> list[str]:
    from autograder.workers import recorder
    from autograder.grading import run as grade

    monkeypatch.setattr(recorder, "Recorder", NoRecorder)
    pool = RecordingPool(Result("graded", "", (CellResult(CH1.notebook, "test_dot", 1.0, 1.0, True, ""),)))
    templates = {CH1.slug: _template(tmp_path / "template" / out.name)}
    out.mkdir(exist_ok=True)
    options = Options(tmp_path / "in", out, 1, progress=False, force=True, secret_file=secret_file)
    assert grade._grade_tasks(plan_of(options, tasks, templates), pool, pool, tmp_path) == 0
    for job in pool.given:
        secret = (secret_file or OutputFolder(out).secret).read_text().strip()
        assert secret not in job.to_json(), "a job carries its hand-in's key, never the instructor's secret"
    return [job.hidden_key for job in pool.given]


def test_jobs_carry_a_key_per_hand_in_from_the_folders_secret_or_a_shared_one(tmp_path: Path, monkeypatch) -> None:
    handed = {}
    for student, text in (("ada", "x = 1\n"), ("bob", "x = 1\n"), ("cy", "x = 2\n")):
        path = tmp_path / "in" / student / f"{CH1.notebook}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(student_notebook(CH1.exercise, {"dot": text})))
        handed[student] = Task(student, CH1.slug, {CH1.notebook: str(path)})
    tasks = [handed["ada"], handed["bob"]]
    first = _keys(tmp_path, tmp_path / "out1", tasks, monkeypatch)
    assert (OutputFolder(tmp_path / "out1").secret.stat().st_mode & 0o777) == 0o600
    assert len(set(first)) == 2 and all(re.fullmatch("[0-9a-f]{64}", key) for key in first), "another student"
    assert _keys(tmp_path, tmp_path / "out1", tasks, monkeypatch) == first, "a rerun of the same hand-ins"
    assert _keys(tmp_path, tmp_path / "out1", [handed["cy"]], monkeypatch) != first[:1]
    Path(handed["cy"].notebooks[CH1.notebook]).write_bytes(Path(handed["ada"].notebooks[CH1.notebook]).read_bytes())
    cy = Task("ada", CH1.slug, handed["cy"].notebooks)  # ada's resubmission, same bytes in another file
    assert _keys(tmp_path, tmp_path / "out1", [cy], monkeypatch) == first[:1], "the content counts, not the path"
    assert set(_keys(tmp_path, tmp_path / "out2", tasks, monkeypatch)).isdisjoint(first), "another folder"
    shared = tmp_path / "shared.secret"
    assert _keys(tmp_path, tmp_path / "out3", tasks, monkeypatch, shared) == \
        _keys(tmp_path, tmp_path / "out4", tasks, monkeypatch, shared), "--secret-file shares the secret"
    assert not OutputFolder(tmp_path / "out3").secret.exists(), "with --secret-file, no secret of the folder's own"


def _hidden_sources() -> list[tuple[str, str, str]]:
    found = []
    for each in chapters():
        for meta, source in code_cells(each.solution):
            if "### BEGIN HIDDEN TESTS" in source:
                found.append((each.slug, meta.get("grade_id", ""), source.split("### BEGIN HIDDEN TESTS", 1)[1]))
    return found


def test_every_hidden_test_seeds_through_hidden_seed() -> None:
    """Every seed a hidden test sets (torch's, numpy's, random's, a model's) goes through checks.hidden_seed."""
    unhashed = [f"{slug}:{grade_id}: {line.strip()}" for slug, grade_id, source in _hidden_sources()
                for line in source.splitlines() if CONSTANT_SEED.search(line)]
    assert not unhashed, "hidden tests seeded with a constant:\n" + "\n".join(unhashed)
    assert sum("hidden_seed(" in source for _, _, source in _hidden_sources()) >= 30


# The fast tier tries chapter 1 (NumPy) and chapter 3 (torch), `make test` every chapter: each costs two notebook runs.
FAST_SEEDED = ("01_similarity", "03_multi_head")


@pytest.mark.parametrize("slug", [pytest.param(each.slug, marks=[] if each.slug in FAST_SEEDED else pytest.mark.slow)
                                  for each in chapters()])
def test_references_keep_full_marks_under_a_hand_ins_seeds(bank_kernel: StandIn, slug: str) -> None:
    """The right answer passes whatever the secret: here under two keys, and under the fixed seeds."""
    for key in ("5e" * 32, "a1" * 32):
        results = run_notebook(bank_kernel, slug, hidden_key=key)
        earned, possible = score(results)
        assert earned == possible, [f"{r.grade_id}: {r.message}" for r in results if not r.passed]


# A student who has read the hidden tests: dot records every argument it is called with, and a cell of theirs
# after the tests prints them (its output is kept in the feedback page) and looks for the instructor's secret.
RECORDING_DOT = '''SEEN = []


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Dot product of two 1-D vectors of shape (d,)."""
    SEEN.append(np.asarray(a, dtype=np.float64).round(6).tolist())
    return float(np.sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)))
'''
LOOK_AROUND = '''import os
for place in {places!r}:
    try:
        print("READ", place, open(place).read())
    except OSError as error:
        print("UNREADABLE", place, type(error).__name__)
print("ENVIRONMENT", sorted(os.environ.items()))
for seen in SEEN:
    print("ARGUMENT", seen[:3])
'''


def _handed_in(folder: Path, student: str, places: list[str], comment: str = "") -> None:
    notebook = student_notebook(CH1.exercise, {**solution_sources(CH1.solution), "dot": RECORDING_DOT + comment})
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                              "source": LOOK_AROUND.format(places=places)})
    write_submission(folder, student, CH1.slug, notebook, CH1.exercise.name)


def _arguments(out: Path, student: str) -> tuple[str, list[str]]:
    """(the student's score, the arguments its dot was called with, in order) from a graded folder."""
    page = "".join(p.read_text() for p in OutputFolder(out).feedback(student, CH1.slug).glob("*.html"))
    return read_grades(out)[(student, CH1.slug)]["score"], re.findall(r"ARGUMENT (\[[^\]]*\])", page)


@pytest.mark.slow
def test_grade_draws_hidden_inputs_per_hand_in_and_the_secret_never_reaches_the_kernel(tmp_path: Path) -> None:
    """Another student, a resubmission and another output folder get other hidden inputs, which a later cell can
    print; a rerun gets the same inputs and grade; the secret (0600) is neither readable by nor given to the kernel."""
    submissions, shared = tmp_path / "submissions", tmp_path / "shared.secret"
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    places = [str(OutputFolder(out).secret) for out in (out1, out2)] + [str(shared)]
    _handed_in(submissions, "ada", places)
    _handed_in(submissions, "bob", places)  # ada's notebook, byte for byte
    _handed_in(submissions, "cy", places, comment="# resubmitted\n")
    runs = {}
    for name, out, extra in (("first", out1, ()), ("rerun", out1, ("--force",)),
                             ("other folder", out2, ("--student", "ada", "--secret-file", shared))):
        done = grade_cli(submissions, "--out", out, "--jobs", "1", "--quiet", "--no-similarity", *extra)
        assert done.returncode == 0, done.stderr
        runs[name] = {student: _arguments(out, student) for student in ("ada", "bob", "cy") if name == "first"
                      or name == "rerun" or student == "ada"}
    first = runs["first"]
    visible = [a for a in first["ada"][1] if a in first["bob"][1]]
    assert visible and len(visible) < len(first["ada"][1]), "the visible tests' inputs are fixed, the hidden ones not"
    assert first["ada"][0] == first["bob"][0] == first["cy"][0] == CH1_MAX, first
    assert runs["rerun"] == first, "a rerun of the same hand-ins draws the same inputs and gives the same grades"
    assert first["bob"][1] != first["ada"][1], "another student gets other hidden inputs"
    assert first["cy"][1] != first["ada"][1], "a resubmission gets other hidden inputs"
    assert runs["other folder"]["ada"][0] == CH1_MAX and runs["other folder"]["ada"][1] != first["ada"][1], \
        "another secret gets other hidden inputs"
    assert not OutputFolder(out2).secret.exists()
    for secret in (OutputFolder(out1).secret, shared):
        assert (secret.stat().st_mode & 0o777) == 0o600
    for page in [*OutputFolder(out1).all_feedback.rglob("*.html"), *OutputFolder(out2).all_feedback.rglob("*.html")]:
        text = page.read_text()
        assert "ENVIRONMENT [" in text and not re.search(r"(?<!UN)READ /", text), page
        assert re.findall(r"UNREADABLE (/\S+) FileNotFoundError", text) == places, page
        for secret in (OutputFolder(out1).secret, shared):
            assert secret.read_text().strip() not in text, f"{page} shows the secret"


def test_a_secret_file_inside_the_course_is_refused(tmp_path: Path, capsys) -> None:
    from autograder.__main__ import main
    from course import ROOT

    (tmp_path / "submissions").mkdir()
    status = main(["grade", str(tmp_path / "submissions"), "--out", str(tmp_path / "out"),
                   "--secret-file", str(ROOT / "solutions" / "course.secret")])
    assert status == 2 and "--secret-file" in capsys.readouterr().err
    assert not (ROOT / "solutions" / "course.secret").exists()
