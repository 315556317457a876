"""The instructor command line's own checks (`python -m autograder`), in process and without grading: usage
errors and unreadable input stop with one line and exit status 2 before any work; which templates a run
builds; what a worker's death means for the stored results; a result crosses the workers' protocol and the
stored state unchanged."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.workers import pool as pool_module
from autograder.__main__ import main
from autograder.grading.plan import handed_in
from autograder.grading.secret import hand_in_key
from autograder.grading.templates import prepare_templates, read_course
from autograder.sandbox.limits import Limits
from autograder.reports.output_folder import OutputFolder
from autograder.grading.options import Options
from autograder.records import CellResult, Job, Result, Task, Template
from autograder.reports.state import load_state, save_state
from autograder.submissions.find import find
from autograder.workers.dispatch import Dispatcher, Isolation, KernelSet
from course import ROOT
from tests.grading_helpers import FIXTURE_SOURCE, InstantPool, NoRecorder, plan_of, read_grades

JOB = Job(Template("toy", "key", Path("/nonexistent"), ("toy",), ()), {"toy": None}, Limits(), isolate=True)


def _error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured
    return lines[0]


@pytest.fixture()
def submissions(tmp_path: Path) -> Path:
    (tmp_path / "subs" / "ada" / "toy").mkdir(parents=True)
    return tmp_path / "subs"


@pytest.mark.parametrize("inside", ["solutions/01_similarity/out", "exercises/out", "solutions"])
def test_an_output_folder_inside_the_course_sources_is_refused(capsys, submissions: Path, inside: str) -> None:
    assert main(["grade", str(submissions), "--out", str(ROOT / inside)]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: --out {ROOT / inside} is inside {inside.split('/')[0]}/"), line
    assert not OutputFolder(ROOT / inside).grades.exists()


def test_an_output_folder_inside_source_or_submissions_is_refused(capsys, submissions: Path, tmp_path) -> None:
    assert main(["grade", str(submissions), "--out", str(FIXTURE_SOURCE / "toy" / "out"),
                 "--source", str(FIXTURE_SOURCE)]) == 2
    assert "is inside --source" in _error_line(capsys)
    assert main(["grade", str(submissions), "--out", str(submissions / "out"), "--source", str(FIXTURE_SOURCE)]) == 2
    assert "is inside SUBMISSIONS" in _error_line(capsys)
    assert not (submissions / "out").exists() and not (FIXTURE_SOURCE / "toy" / "out").exists()


@pytest.mark.parametrize(("arguments", "expected"), [
    (["--source", "/nowhere"], "error: --source: no such folder: /nowhere"),
    (["--assignment", "nope"], "error: --assignment nope: not an assignment of"),
    (["--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"], "error: --jobs has no meaning with --scheduler"),
])
def test_usage_errors_are_one_line_and_status_2(capsys, submissions: Path, tmp_path, arguments, expected) -> None:
    source = [] if "--source" in arguments else ["--source", str(FIXTURE_SOURCE)]
    assert main(["grade", str(submissions), "--out", str(tmp_path / "out"), *source, *arguments]) == 2
    assert _error_line(capsys).startswith(expected)
    assert not (tmp_path / "out").exists(), "nothing is written on a usage error"


def test_missing_and_unreadable_submissions_stop_with_one_line(capsys, tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "out"), "--source", str(FIXTURE_SOURCE), "--quiet"]
    assert main(["grade", str(tmp_path / "nowhere.zip"), *out]) == 2
    assert _error_line(capsys) == f"error: SUBMISSIONS: no such folder or zip: {tmp_path / 'nowhere.zip'}"
    with zipfile.ZipFile(tmp_path / "class.zip", "w") as archive:
        archive.writestr("ada/toy/toy.ipynb", b"{}" * 1000)
    (tmp_path / "class.zip").write_bytes((tmp_path / "class.zip").read_bytes()[:500])
    assert main(["grade", str(tmp_path / "class.zip"), *out]) == 2
    assert _error_line(capsys).startswith(f"error: cannot read {tmp_path / 'class.zip'} as a zip")


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_jobs_must_be_at_least_one(capsys, submissions: Path, tmp_path, jobs: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["grade", str(submissions), "--out", str(tmp_path / "out"), "--jobs", jobs])
    assert stopped.value.code == 2 and "argument --jobs: must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["--version"], ["grade", "--version"]])
def test_version(capsys, command: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(command)
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("python -m autograder")


def test_the_grader_starts_its_workers_before_numpy_imports() -> None:
    # Nothing runs beside the grader's own start (one core idle): what it imports before the workers start delays
    # every verdict. numpy (the similarity report's, about 45 ms of it) is imported where it is used.
    probe = "import sys; import autograder.__main__, autograder.grading.run; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", "the grader's start imported numpy"


def test_release_of_an_unknown_assignment_is_a_usage_error(capsys) -> None:
    assert main(["release", "01_similarity", "99_nothing"]) == 2
    assert _error_line(capsys).startswith("error: 99_nothing is not an assignment of this course")


def test_templates_are_built_only_for_the_assignments_handed_in(tmp_path: Path) -> None:
    (tmp_path / "subs" / "ada" / "toy").mkdir(parents=True)
    (tmp_path / "subs" / "ada" / "toy" / "toy.ipynb").write_text("{}")
    found, _ = find(tmp_path / "subs", {"toy.ipynb": "toy", "toy_torch.ipynb": "toy_torch"}, tmp_path / "staging")
    course = read_course(FIXTURE_SOURCE)
    assert handed_in(found, course, ()) == {"toy"}

    class Recorder:
        jobs: list[dict] = []

        def run(self, jobs, timeout, on_result) -> None:
            self.jobs.extend(jobs)
            raise RuntimeError("stop here")

    recorder = Recorder()
    with pytest.raises(RuntimeError, match="stop here"):
        prepare_templates(course, tmp_path / "cache", recorder, {"toy"})
    assert [job.template.assignment for job in recorder.jobs] == ["toy"]


def test_a_worker_that_dies_mid_job_is_transient_a_timeout_is_final(tmp_path: Path) -> None:
    dies = tmp_path / "dies"
    dies.write_text("#!/bin/sh\necho '{\"ready\": 1}'\nread line\nkill -9 $$\n")
    dies.chmod(0o755)
    worker = pool_module.Worker(0, {}, tmp_path / "log", python=str(dies))
    result = worker.run(JOB, timeout=30)
    assert result.transient is True and "graded again on the next run" in result.reason, result
    sleeps = tmp_path / "sleeps"
    sleeps.write_text("#!/bin/sh\necho '{\"ready\": 1}'\nread line\nsleep 30\n")
    sleeps.chmod(0o755)
    worker = pool_module.Worker(0, {}, tmp_path / "log", python=str(sleeps))
    result = worker.run(JOB, timeout=0.5)
    assert result.transient is False and result.reason == "grading took longer than 0 s and was stopped", result



def test_a_job_is_built_once_and_the_pool_sends_it_as_built(tmp_path: Path) -> None:
    """`RunPlan.job` makes each job whole (its zygote's address where the run's kernels start warm, its hand-in's
    key); the local pool sends it to its worker as it was made, without filling anything in."""
    template = Template("toy", "key", tmp_path / "template", ("toy",), (("toy", "test_add", 1.0),), ("math",))
    task = Task("ada", "toy", {"toy": str(tmp_path / "toy.ipynb")})
    (tmp_path / "toy.ipynb").write_text("{}")
    options = Options(tmp_path / "in", tmp_path / "out", 1)
    plan = plan_of(options, [task], {"toy": template})
    warm = replace(plan, isolation=Isolation("", True), zygotes={KernelSet.of(template): "/run/zygote.sock"})
    job = warm.job(task, tmp_path)
    assert (job.warm, job.zygote, job.isolate, job.scratch) == (True, "/run/zygote.sock", True, str(tmp_path))
    assert job.hidden_key == hand_in_key(warm.secret, "ada", "toy", task.notebooks) and job.hidden_key
    cold = replace(plan, isolation=Isolation("", False), zygotes=warm.zygotes).job(task, tmp_path)
    assert (cold.warm, cold.zygote) == (False, ""), "a cold run's job names no zygote"
    # A worker that answers each job with the line it was sent.
    echo = tmp_path / "echo"
    echo.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps({{'ready': 1}}), flush=True)\n"
                    "for line in sys.stdin:\n    print(json.dumps({'status': 'failed', 'reason': line.strip()}), "
                    "flush=True)\n")
    echo.chmod(0o755)
    pool = pool_module.Pool(1, tmp_path / "logs", python=str(echo))
    sent: list[str] = []
    try:
        pool.run([replace(job, zygote="")], 30, lambda index, result: sent.append(result.reason))
    finally:
        pool.close()
    assert sent == [replace(job, zygote="").to_json()], "the pool changed the job it was given"
    assert not pool.zygotes, "the pool started a zygote of its own for a job made without one"


def test_the_local_pool_and_the_cluster_are_the_same_dispatcher() -> None:
    """`grade` uses either without asking which: both have every method of `Dispatcher`, with its parameters."""
    from autograder.workers.dask_pool import ClusterPool

    methods = [name for name in vars(Dispatcher) if not name.startswith("_")]
    assert methods == ["prepare", "isolation", "describe", "run", "close"]
    for name in methods:
        wanted = list(inspect.signature(getattr(Dispatcher, name)).parameters)
        for dispatcher in (pool_module.Pool, ClusterPool):
            assert list(inspect.signature(getattr(dispatcher, name)).parameters) == wanted, (dispatcher, name)


def test_a_result_crosses_the_protocol_and_the_state_unchanged(tmp_path: Path) -> None:
    result = Result("graded", "a note", (CellResult("toy", "test_add", 1.0, 2.0, False, "AssertionError: x"),),
                    {"run_notebook": 1.5}, {"toy.html": "<p>feedback</p>"})
    assert Result.from_json(result.to_json()) == result
    assert Result.from_json(replace(result, transient=True).to_json()).transient is True
    out, task = OutputFolder(tmp_path), Task("ada", "toy", key="k")
    save_state(out, task, result)
    assert load_state(out, task) is None, "a graded result whose feedback pages are gone is graded again"
    out.feedback("ada", "toy").mkdir(parents=True)
    (out.feedback("ada", "toy") / "toy.html").write_text("<p>feedback</p>")
    assert load_state(out, task) == replace(result, feedback={}), "the pages are kept in feedback/, not stored"
    assert load_state(out, replace(task, key="other")) is None
    # A failure as the format before `Result` stored it (no timings) is read back, not graded again.
    old = {"key": "k", "result": {"status": "failed", "reason": "the kernel died", "cells": []}}
    out.state("bo", "toy").parent.mkdir(parents=True)
    out.state("bo", "toy").write_text(json.dumps(old))
    assert load_state(out, Task("bo", "toy", key="k")) == Result("failed", "the kernel died")

@pytest.mark.slow
def test_release_copies_only_the_assignments_own_files(tmp_path: Path) -> None:
    import shutil

    from autograder.records import GenerateJob, Template
    from autograder.harness.notebook import generate

    source = tmp_path / "course" / "source"
    shutil.copytree(FIXTURE_SOURCE / "toy", source / "toy")
    (source / "toy" / "data.csv").write_text("x\n1\n")  # the assignment's own file: released
    run = OutputFolder(source / "toy")  # a grading run's output, written into the assignment's folder
    for junk in (run.gradebook, run.grades, run.report, run.similarity, run.state("ada", "toy"),
                 run.feedback("ada", "toy") / "toy.html"):
        junk.parent.mkdir(parents=True, exist_ok=True)
        junk.write_text("a grading run's output")
    template = Template("toy", "key", tmp_path / "template", (), ())
    assert generate(GenerateJob(template, str(tmp_path / "course"), "source")).status == "done"
    released = template.released
    assert sorted(str(p.relative_to(released)) for p in released.rglob("*")) == ["data.csv", "toy.ipynb"]


def test_a_rerun_shows_a_tasks_note_once(tmp_path: Path, monkeypatch) -> None:
    from autograder.workers import recorder
    from autograder.grading import run as grade

    monkeypatch.setattr(recorder, "Recorder", NoRecorder)
    template = Template("toy", "key", tmp_path / "template", ("toy",), (("toy", "test_add", 1.0),))
    note = "misnamed notebook: graded mine.ipynb as toy.ipynb"
    task = Task("ada", "toy", {"toy": str(tmp_path / "mine.ipynb")}, note=note, key="k")
    (tmp_path / "mine.ipynb").write_text("{}")
    pool = InstantPool(Result("graded", "", (CellResult("toy", "test_add", 1.0, 1.0, True, ""),),
                              feedback={"toy.html": "<p>your grade</p>"}))
    options = Options(tmp_path / "in", tmp_path / "out", 1, progress=False)
    for run in range(2):  # the second run reuses the stored result
        assert grade._grade_tasks(plan_of(options, [task], {"toy": template}), pool, pool, tmp_path) == 0
        assert read_grades(tmp_path / "out")[("ada", "toy")]["reason"] == note, f"run {run + 1}"
    assert pool.jobs == 1, "the second run should have reused the stored result"
