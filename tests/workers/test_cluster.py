"""`python -m autograder grade --scheduler`: a real Dask cluster (a `dask scheduler` and two `dask worker`
processes, each in its own folder, on 127.0.0.1) grades a small class as a local run does, survives a
worker killed mid-run, refuses a worker whose environment differs, and fails fast on a dead address."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import stored_results
from tests.cluster_local import LocalCluster
from tests.grading_helpers import (FIXTURE_SOURCE, ROOT, grade_cli, read_grades, solution_sources,
                                   student_notebook, write_submission)

pytestmark = pytest.mark.slow

REFERENCE = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
OPTIONS = ("--source", FIXTURE_SOURCE, "--cell-timeout", "10", "--timeout", "60", "--quiet")
WRONG_MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)"
SLOW_MEAN = "import time\ntime.sleep(2)\n" + REFERENCE["mean"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("dask"), workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def classroom(tmp_path_factory, toy_class):
    """Three students (full marks, a wrong mean, a blank notebook) and the generated templates."""
    root = tmp_path_factory.mktemp("classroom")
    released = toy_class.released["toy"]
    submissions = root / "submissions"
    write_submission(submissions, "ada", "toy", student_notebook(released, REFERENCE))
    write_submission(submissions, "b.rown-2", "toy", student_notebook(released, {**REFERENCE, "mean": WRONG_MEAN}))
    write_submission(submissions, "cy", "toy", student_notebook(released, {}))
    return {"root": root, "released": released, "submissions": submissions, "templates": toy_class.cache}


def _out(classroom: dict, name: str) -> Path:
    """A fresh output folder that starts with the generated templates (as a second run would)."""
    out = classroom["root"] / name
    shutil.copytree(classroom["templates"], OutputFolder(out).cache)
    return out


def _feedback(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted(OutputFolder(out).all_feedback.rglob("*.html"))}


def test_cluster_grades_like_a_local_run_and_regrades_only_changes(cluster, classroom) -> None:
    local, remote = _out(classroom, "local"), _out(classroom, "remote")
    done = grade_cli(classroom["submissions"], "--out", local, "--jobs", "2", *OPTIONS)
    assert done.returncode == 0, done.stderr
    done = grade_cli(classroom["submissions"], "--out", remote, "--scheduler", cluster.address, *OPTIONS)
    assert done.returncode == 0, done.stderr
    assert f"on the Dask cluster at {cluster.address}: 2 workers" in done.stderr
    # Each Dask worker forks its kernels from its own zygote, as a local run does (a warm kernel's timings).
    assert "warm start: each kernel is forked" in done.stderr, done.stderr
    assert all("fork" in r.timings for r in stored_results(OutputFolder(remote), "toy").values())
    assert OutputFolder(remote).grades.read_text() == OutputFolder(local).grades.read_text()
    assert {k: r["score"] for k, r in read_grades(remote).items()} == {
        ("ada", "toy"): "5", ("b.rown-2", "toy"): "3", ("cy", "toy"): "0"}
    assert _feedback(remote) == _feedback(local) and len(_feedback(remote)) == 3
    assert OutputFolder(remote).report.exists() and OutputFolder(remote).gradebook.exists()
    assert not list(Path(cluster.folder).glob("worker-*/**/autograder/jobs/*")), "workers keep no submission"
    write_submission(classroom["submissions"], "cy", "toy", student_notebook(classroom["released"], REFERENCE))
    changed = grade_cli(classroom["submissions"], "--out", remote, "--scheduler", cluster.address, *OPTIONS)
    assert "(1 run now, 2 kept from an earlier run)" in changed.stderr, changed.stderr
    assert read_grades(remote)[("cy", "toy")]["score"] == "5"


def test_jobs_and_scheduler_together_are_rejected(classroom) -> None:
    done = grade_cli(classroom["submissions"], "--out", classroom["root"] / "never", "--jobs", "2",
                     "--scheduler", "tcp://127.0.0.1:9", *OPTIONS, timeout=60)
    assert done.returncode == 2 and "--jobs" in done.stderr and "--scheduler" in done.stderr


def test_dead_scheduler_fails_within_seconds(classroom) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    done = grade_cli(classroom["submissions"], "--out", classroom["root"] / "dead", "--scheduler",
                     f"tcp://127.0.0.1:{port}", *OPTIONS, timeout=60)
    assert done.returncode == 2
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in done.stderr, done.stderr
    assert time.monotonic() - started < 30, "the connect timeout is 10 s"
    assert not OutputFolder(classroom["root"] / "dead").grades.exists()


def test_worker_with_another_course_version_is_refused(cluster, classroom, tmp_path) -> None:
    other = tmp_path / "other-checkout"
    for package in ("autograder", "course"):
        shutil.copytree(ROOT / package, other / package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "autograder" / "checks.py", "a") as checks:
        checks.write("\n# another version of the course\n")
    index = cluster.add_worker(env={**cluster.env, "PYTHONPATH": str(other)})
    try:
        cluster.wait_for_workers(3)
        done = grade_cli(classroom["submissions"], "--out", _out(classroom, "mixed"), "--scheduler",
                         cluster.address, *OPTIONS)
        assert done.returncode == 2
        lines = [line for line in done.stderr.splitlines() if "differs from this client" in line]
        assert len(lines) == 1 and "course version" in lines[0], done.stderr
        assert not OutputFolder(classroom["root"] / "mixed").grades.exists()
    finally:
        cluster.kill_worker(index)


def test_worker_killed_mid_run_loses_no_grade(cluster, classroom) -> None:
    submissions, out = classroom["root"] / "slow", _out(classroom, "killed")
    for i in range(3):
        write_submission(submissions, f"s{i}", "toy",
                         student_notebook(classroom["released"], {**REFERENCE, "mean": SLOW_MEAN}))
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), "--scheduler",
               cluster.address, *map(str, OPTIONS)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = Path(cluster.folder) / "worker-1"
    deadline = time.monotonic() + 60
    while not list(victim.glob("**/autograder/jobs/*/*.ipynb")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert time.monotonic() < deadline, "worker 1 never started a job"
    cluster.kill_worker(1)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 0, stderr
    rows = read_grades(out)
    assert {k: (r["score"], r["reason"]) for k, r in rows.items()} == {(f"s{i}", "toy"): ("5", "") for i in range(3)}
    assert len(list(OutputFolder(out).all_feedback.rglob("*.html"))) == 3
