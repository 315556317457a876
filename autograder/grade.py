"""`python -m autograder grade`: grade a class in parallel with nbgrader, resumably.

1. Each assignment of the course is generated once (nbgrader's generate_assignment, run by a worker)
   into a template gradebook, cached under ``DIR/.cache`` by a hash of its source folder, the
   nbgrader config and `autograder.checks` (which the hidden tests import).
2. Each (student, assignment) becomes a job keyed by a hash of the submitted notebook(s), the
   template and the limits. A job whose key matches a stored result in ``DIR/.state`` is not
   graded again, so re-running is idempotent and an interrupted run resumes where it stopped.
3. ``--jobs`` worker processes (`autograder.worker`) grade the jobs, each in its own temporary
   folder with a sandboxed kernel (`autograder.sandbox`). A worker that dies or overruns the
   submission time limit is killed with its kernel and replaced; only that job fails.
4. The parent merges every result into the class gradebook (``--db``, any SQLAlchemy URL) and
   writes ``grades.csv``, ``feedback/`` (written by the workers) and ``report.html``.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import os
import pwd
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from autograder import NBGRADER_CONFIG
from course import ROOT
from autograder.release import nbgrader_environment
from autograder.sandbox import check_unprivileged, write_kernelspec
from autograder.submissions import find

FIRST_SANDBOX_UID = 62000
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Options:
    """Everything `grade` needs; the CLI fills it from its arguments."""

    submissions: Path
    out: Path
    jobs: int
    db_url: str = ""
    source: Path = ROOT / "solutions"
    cell_timeout: int = 60
    submission_timeout: int = 600
    memory_bytes: int = 3 * 2**30
    file_bytes: int = 64 * 2**20
    processes: int = 256
    isolate: bool = True
    progress: bool = True


@dataclass(frozen=True)
class Template:
    """An assignment generated into its own gradebook: what every worker copies."""

    assignment: str
    key: str
    gradebook: Path
    released: Path
    notebooks: tuple[str, ...]
    cells: tuple[tuple[str, str, float], ...]  # (notebook, grade_id, max points), notebook order
    preload_torch: bool

    @property
    def max_score(self) -> float:
        return sum(points for _, _, points in self.cells)


@dataclass
class Task:
    """One student's one assignment: what to grade (notebook name -> file) or why it cannot be."""

    student: str
    assignment: str
    notebooks: dict[str, str | None] = field(default_factory=dict)
    note: str = ""
    problem: str = ""
    key: str = ""


# ---------------------------------------------------------------- templates


def _hash_folder(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and ".ipynb_checkpoints" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _read_template(assignment: str, key: str, folder: Path, source: Path) -> Template:
    from nbgrader.api import Gradebook

    from autograder.gradebook import COURSE_ID

    released = folder / "release" / assignment
    notebooks = tuple(sorted(p.stem for p in released.glob("*.ipynb")))
    cells = []
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", COURSE_ID) as gradebook:
        for name in notebooks:
            order = [c["metadata"].get("nbgrader", {}).get("grade_id")
                     for c in json.loads((released / f"{name}.ipynb").read_text())["cells"]]
            grade_cells = gradebook.find_notebook(name, assignment).grade_cells
            for cell in sorted(grade_cells, key=lambda c: order.index(c.name) if c.name in order else len(order)):
                cells.append((name, cell.name, float(cell.max_score)))
    # Hidden tests count too: torch must be imported before student code whenever any cell uses it.
    text = "".join(path.read_text() for path in sorted(source.glob("*.ipynb")))
    return Template(assignment, key, folder / "gradebook.db", released, notebooks, tuple(cells),
                    "import torch" in text or "from torch" in text)


def prepare_templates(source: Path, cache: Path, pool: Pool) -> dict[str, Template]:
    """Generate (or reuse from ``cache``) the template of every assignment folder in ``source``."""
    assignments = sorted(p.name for p in source.iterdir()
                         if p.is_dir() and not p.name.startswith((".", "_")) and any(p.glob("*.ipynb")))
    shared = hashlib.sha256(NBGRADER_CONFIG.read_bytes() + (ROOT / "autograder" / "checks.py").read_bytes())
    keys = {a: hashlib.sha256(f"{FORMAT_VERSION}:{a}:{_hash_folder(source / a)}:{shared.hexdigest()}".encode())
            .hexdigest() for a in assignments}
    folders = {a: cache / f"{a}-{keys[a][:16]}" for a in assignments}
    missing = [a for a in assignments if not (folders[a] / "gradebook.db").exists()]
    jobs = []
    for assignment in missing:
        shutil.rmtree(folders[assignment], ignore_errors=True)
        jobs.append({"kind": "generate", "assignment": assignment, "root": str(source.parent),
                     "source_directory": source.name, "folder": str(folders[assignment]) + ".partial"})
    failures = []

    def done(index: int, result: dict) -> None:
        partial = Path(jobs[index]["folder"])
        if result["status"] == "done":
            partial.rename(folders[missing[index]])
        else:
            shutil.rmtree(partial, ignore_errors=True)
            failures.append(result["reason"])

    pool.run(jobs, 600, done)
    if failures:
        raise RuntimeError("\n".join(failures))
    return {a: _read_template(a, keys[a], folders[a], source / a) for a in assignments}


# ---------------------------------------------------------------- tasks


def make_tasks(found: dict, templates: dict[str, Template], limits_key: str) -> list[Task]:
    """A task for every student and every assignment that anyone submitted (or that the course has)."""
    given = sorted({a for entry in found.values() for a in entry.files if a})
    assignments = [a for a in given if a in templates] or sorted(templates)
    unknown = [a for a in given if a not in templates]
    tasks = []
    for student, entry in sorted(found.items()):
        stray = [p.name for p in entry.files.get("", [])]
        for assignment in assignments:
            tasks.append(_task(student, templates[assignment], entry.files.get(assignment), stray, limits_key))
        for assignment in unknown:
            if assignment in entry.files:
                tasks.append(Task(student, assignment, problem=f"'{assignment}' is not an assignment of this course"))
    return tasks


def _task(student: str, template: Template, files: list[Path] | None, stray: list[str], limits_key: str) -> Task:
    task = Task(student, template.assignment)
    expected = ", ".join(f"{n}.ipynb" for n in template.notebooks)
    if files is None:
        task.problem = f"no submission (expected {expected})"
        if stray:
            task.problem += f"; notebooks that match no assignment: {', '.join(stray)}"
        return task
    by_name = {p.name: p for p in files}
    unmatched = [p for p in files if p.stem not in template.notebooks]
    for name in template.notebooks:
        path = by_name.get(f"{name}.ipynb")
        if path is None and len(template.notebooks) == 1 and len(unmatched) == 1:
            path = unmatched[0]
            task.note = f"misnamed notebook: graded {path.name} as {name}.ipynb"
        task.notebooks[name] = str(path) if path is not None else None
    too_large = [Path(p).name for p in task.notebooks.values() if p and p.endswith(".too-large")]
    if too_large:
        task.problem = f"notebook too large to grade: {', '.join(too_large)}"
    elif not any(task.notebooks.values()):
        found_names = ", ".join(p.name for p in files) or "an empty folder"
        task.problem = f"no notebook named {expected} (found {found_names})"
    else:
        digest = hashlib.sha256(f"{template.key}:{limits_key}".encode())
        for name, path in sorted(task.notebooks.items()):
            digest.update(f"\0{name}\0".encode() + (Path(path).read_bytes() if path else b"<missing>"))
        task.key = digest.hexdigest()
    return task


# ---------------------------------------------------------------- workers


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_uid(uid: int) -> None:
    """Kill every process owned by ``uid`` (leftovers of a sandboxed kernel)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


class Worker:
    """One job slot: a persistent `autograder.worker` process, replaced when it dies or overruns."""

    def __init__(self, slot: int, env: dict[str, str], log: Path):
        self.slot, self.env, self.log = slot, env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the worker process unless it is running (it imports nbgrader while the parent goes on)."""
        if self.process is None or self.process.poll() is not None:
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen([sys.executable, "-m", "autograder.worker"], stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=log, env=self.env,
                                                start_new_session=True)

    def run(self, job: dict, timeout: float) -> dict:
        """Send a job; its result, or a failure when the worker died or took longer than ``timeout``."""
        self.start()
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
            line = self._read_line(time.monotonic() + timeout)
        except (BrokenPipeError, OSError):
            line = None
        if line is None:
            timed_out = self.process.poll() is None
            self.stop()
            reason = (f"grading took longer than {timeout:.0f} s and was stopped" if timed_out
                      else "the grading process was killed (by the notebook?) while grading it")
            result = {"status": "failed", "reason": reason, "cells": []}
        else:
            result = json.loads(line)
        self._clean(job)
        return result

    def _read_line(self, deadline: float) -> bytes | None:
        buffer = b""
        fd = self.process.stdout.fileno()
        while not buffer.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            buffer += chunk
        return buffer

    @staticmethod
    def _clean(job: dict) -> None:
        """Kill what is left of a grading job's kernel and delete its folder."""
        if "workdir" not in job:
            return
        workdir = Path(job["workdir"])
        pid_file = workdir / "kernel.pid"
        if pid_file.exists() and pid_file.read_text().strip().isdigit():
            _kill_group(int(pid_file.read_text()))
        if job["uid"]:
            kill_uid(job["uid"])
        shutil.rmtree(workdir, ignore_errors=True)

    def stop(self) -> None:
        if self.process is not None:
            _kill_group(self.process.pid)
            self.process.wait()
            self.process = None


_reserved: list = []


def _reserve_uids(count: int) -> list[int]:
    """``count`` uids that no account and no other running grader uses, held until this process exits.

    Two graders on one machine must not share a uid: each kills whatever its uids leave running.
    """
    locks = Path(tempfile.gettempdir()) / "autograder-uids"
    locks.mkdir(mode=0o700, exist_ok=True)
    uids = []
    candidate = FIRST_SANDBOX_UID
    while len(uids) < count:
        try:
            pwd.getpwuid(candidate)
        except KeyError:
            handle = open(locks / str(candidate), "w")  # noqa: SIM115 - held open as the reservation
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
            else:
                _reserved.append(handle)
                uids.append(candidate)
        candidate += 1
    return uids


def sandbox_uids(jobs: int, isolate: bool) -> tuple[list[int], bool, str]:
    """One unprivileged uid per job slot when running as root and it works here (else zeros), whether
    kernels can also have folders hidden from them, and a line that says which."""
    if not isolate:
        return [0] * jobs, False, "warning: kernels run as this user, with resource limits only (--no-isolate)"
    if os.geteuid() != 0:
        return [0] * jobs, False, ("warning: not running as root, so kernels run as this user with resource "
                                   "limits only: student code could reach this user's files and processes")
    uids = _reserve_uids(jobs)
    if not check_unprivileged(uids[0], hide=True):
        return uids, True, (f"isolation: each kernel runs as its own unprivileged uid ({uids[0]}..{uids[-1]}) "
                            "with resource limits; solutions, submissions and output are hidden from it")
    problem = check_unprivileged(uids[0], hide=False)
    if problem:
        return [0] * jobs, False, (f"warning: kernels cannot run as an unprivileged user here ({problem}), so "
                                   "they run as root with resource limits only")
    return uids, False, (f"isolation: each kernel runs as its own unprivileged uid ({uids[0]}..{uids[-1]}) with "
                         "resource limits (no mount namespace here: it could read the solutions)")


# ---------------------------------------------------------------- results


def _score(result: dict) -> float:
    return sum(c["points"] for c in result.get("cells", []))


class Progress:
    """Students done, failed and left, on one updating line (a line per event when not a terminal)."""

    def __init__(self, tasks: list[Task], enabled: bool):
        self.left = {}
        for task in tasks:
            self.left[task.student] = self.left.get(task.student, 0) + 1
        self.failed: set[str] = set()
        self.submissions = len(tasks)
        self.finished = 0
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def update(self, task: Task, ok: bool) -> None:
        self.left[task.student] -= 1
        self.finished += 1
        if not ok:
            self.failed.add(task.student)
        if not self.enabled:
            return
        students = len(self.left)
        done = sum(1 for s, n in self.left.items() if n == 0 and s not in self.failed)
        failed = sum(1 for s in self.failed if self.left[s] == 0)
        width = 30
        filled = int(width * self.finished / max(1, self.submissions))
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.finished}/{self.submissions} submissions | "
                f"students: {done} done, {failed} with a failure, {students - done - failed} left")
        if self.tty:
            print(f"\r{line}", end="\n" if self.finished == self.submissions else "", file=sys.stderr, flush=True)
        else:
            status = "ok" if ok else "FAILED"
            print(f"{line} ({task.student}/{task.assignment}: {status})", file=sys.stderr, flush=True)


def _state_path(out: Path, task: Task) -> Path:
    return out / ".state" / task.student / f"{task.assignment}.json"


def _load_state(out: Path, task: Task) -> dict | None:
    path = _state_path(out, task)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if state.get("key") != task.key:
        return None
    feedback = out / "feedback" / task.student / task.assignment
    if state["result"]["status"] == "graded" and not any(feedback.glob("*.html")):
        return None
    return state["result"]


def _save_state(out: Path, task: Task, result: dict) -> None:
    path = _state_path(out, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"key": task.key, "result": result}))
    scratch.replace(path)


def write_grades(path: Path, rows: list[dict]) -> None:
    """grades.csv: student_id, assignment, score, max_score, reason (empty when graded normally)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "assignment", "score", "max_score", "reason"])
        for row in rows:
            writer.writerow([row["student_id"], row["assignment"], f"{row['score']:g}", f"{row['max_score']:g}",
                             row["reason"]])


# ---------------------------------------------------------------- the command


class Pool:
    """Up to ``jobs`` workers, started when there is work; `run` hands out jobs and reports each result."""

    def __init__(self, jobs: int, scratch: Path, logs: Path, memory_bytes: int = 3 * 2**30):
        env = nbgrader_environment()
        env["AUTOGRADER_WORKER_MEMORY_BYTES"] = str(memory_bytes + 3 * 2**30)
        env["JUPYTER_PATH"] = str(write_kernelspec(scratch / "jupyter"))
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if jobs > 1:
            env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        logs.mkdir(parents=True, exist_ok=True)
        self.scratch = scratch
        self.uids = [0] * jobs
        self.hidden: list[str] = []
        self.workers = [Worker(i, env, logs / f"worker-{i}.log") for i in range(jobs)]
        self.closing = threading.Event()

    def run(self, jobs: list[dict], timeout: float, on_result) -> None:
        """Run every job; calls ``on_result(index, result)`` in this thread as each one finishes.

        A grading job (one with "assignment" and "notebooks") gets its own folder and its slot's uid.
        """
        pending: queue.Queue[int] = queue.Queue()
        for index in range(len(jobs)):
            pending.put(index)
        results: queue.Queue[tuple[int, dict]] = queue.Queue()

        def serve(worker: Worker) -> None:
            while not self.closing.is_set():
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                job = dict(jobs[index])
                if "notebooks" in job:
                    job.update(workdir=_workdir(self.scratch, worker.slot), uid=self.uids[worker.slot],
                               hidden=self.hidden)
                results.put((index, worker.run(job, timeout)))

        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in self.workers[:len(jobs)]]
        for thread in threads:
            thread.start()
        for _ in jobs:
            on_result(*results.get())

    def close(self) -> None:
        """Stop the workers and whatever kernels they left running (after an interruption)."""
        self.closing.set()
        for worker in self.workers:
            worker.stop()
        for pid_file in self.scratch.glob("job-*/kernel.pid"):
            if pid_file.read_text().strip().isdigit():
                _kill_group(int(pid_file.read_text()))
        for uid in self.uids:
            if uid:
                kill_uid(uid)


def grade(options: Options) -> int:
    """Grade every submission; returns the exit status (1 only when nothing could be graded)."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    # A terminated run stops its workers and kernels on the way out; what finished is kept for the next run.
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    os.chmod(scratch, 0o711)
    pool = Pool(options.jobs, scratch, out / ".logs", options.memory_bytes)
    try:
        with ThreadPoolExecutor(1) as background:
            isolation_check = background.submit(sandbox_uids, options.jobs, options.isolate)
            templates = prepare_templates(options.source, out / ".cache", pool)
            pool.uids, can_hide, isolation = isolation_check.result()
        if can_hide:
            pool.hidden = [str(p) for p in (options.source, options.out.resolve(), options.submissions.resolve(),
                                            scratch / "submissions")]
        if not templates:
            print(f"no assignments found in {options.source}", file=sys.stderr)
            return 1
        notebooks = {f"{n}.ipynb": t.assignment for t in templates.values() for n in t.notebooks}
        found, rejected = find(options.submissions, notebooks, scratch / "submissions")
        for name in rejected:
            print(f"skipped '{name}': not a valid student id", file=sys.stderr)
        limits_key = f"{options.cell_timeout}:{options.memory_bytes}:{options.file_bytes}:{options.processes}"
        tasks = make_tasks(found, templates, limits_key)
        if not tasks:
            print(f"no submissions found in {options.submissions}", file=sys.stderr)
            return 1
        print(f"grading {len(tasks)} submissions of {len(found)} students with {options.jobs} jobs\n{isolation}",
              file=sys.stderr)
        return _grade_tasks(options, tasks, templates, pool)
    finally:
        pool.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _grade_tasks(options: Options, tasks: list[Task], templates: dict[str, Template], pool: Pool) -> int:
    from autograder.gradebook import ClassGradebook
    from autograder.report import write_report

    out = options.out
    gradebook = ClassGradebook(options.db_url or f"sqlite:///{out / 'gradebook.db'}", templates)
    progress = Progress(tasks, options.progress)
    outcomes: dict[tuple[str, str], dict] = {}

    def finish(task: Task, result: dict, fresh: bool) -> None:
        if task.note:
            result = {**result, "reason": "; ".join(r for r in (task.note, result.get("reason", "")) if r)}
        if fresh and task.key:
            _save_state(out, task, result)
        if result["status"] != "graded":
            shutil.rmtree(out / "feedback" / task.student / task.assignment, ignore_errors=True)
        outcomes[(task.student, task.assignment)] = result
        gradebook.record(task, result)
        progress.update(task, result["status"] == "graded")

    to_grade, reused = [], 0
    for task in tasks:
        if task.problem:
            finish(task, {"status": "failed", "reason": task.problem, "cells": []}, fresh=False)
        elif (stored := _load_state(out, task)) is not None:
            finish(task, stored, fresh=False)
            reused += 1
        else:
            to_grade.append(task)
    limits = {"memory_bytes": options.memory_bytes, "cpu_seconds": options.submission_timeout,
              "file_bytes": options.file_bytes, "processes": options.processes}
    jobs = [{"assignment": t.assignment, "notebooks": t.notebooks, "released": str(templates[t.assignment].released),
             "gradebook": str(templates[t.assignment].gradebook),
             "feedback": str(out / "feedback" / t.student / t.assignment), "cell_timeout": options.cell_timeout,
             "preload_torch": templates[t.assignment].preload_torch, "limits": limits} for t in to_grade]
    try:
        pool.run(jobs, options.submission_timeout + 30, lambda index, result: finish(to_grade[index], result, True))
    finally:
        gradebook.close()
    rows = []
    for task in tasks:
        result = outcomes[(task.student, task.assignment)]
        template = templates.get(task.assignment)
        rows.append({"student_id": task.student, "assignment": task.assignment, "score": _score(result),
                     "max_score": template.max_score if template else 0.0,
                     "reason": result.get("reason", "") if result["status"] == "graded"
                     else f"not graded: {result['reason']}", "result": result})
    write_grades(out / "grades.csv", rows)
    write_report(out / "report.html", rows, templates)
    graded = sum(r["result"]["status"] == "graded" for r in rows)
    print(f"graded {graded} of {len(rows)} submissions ({len(to_grade)} run now, {reused} kept from an earlier "
          f"run); wrote {out / 'grades.csv'}, {out / 'feedback'}, {out / 'report.html'}", file=sys.stderr)
    return 0 if graded else 1


def _terminate(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def _workdir(scratch: Path, slot: int) -> str:
    """A fresh job folder that sandboxed users may traverse (not list) to reach their own home in it."""
    folder = tempfile.mkdtemp(prefix=f"job-{slot}-", dir=scratch)
    os.chmod(folder, 0o711)
    return folder
