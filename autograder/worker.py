"""A grading worker: a long-lived process that grades one submission at a time with nbgrader.

`autograder.grade` starts one worker per job slot (``python -m autograder.worker``), so nbgrader's
import cost is paid once per slot. The worker reads one job per line (JSON) on stdin and answers
one result per line on its original stdout; everything else it prints goes to stderr.

For each job it builds a throw-away nbgrader course in the job's own folder: the assignment's
released files as the source, the submission as ``submitted/student/<assignment>/``, and a copy of
the assignment's template gradebook (made by ``nbgrader generate_assignment``, so autograde restores
locked cells and hidden tests from it). nbgrader's Autograde converter runs the notebook in the
sandboxed kernel (`autograder.sandbox`); the scores are read back from that gradebook, the hidden
test code is removed and the outputs are shortened, and nbgrader's GenerateFeedback writes the HTML.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import resource
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

# jsonschema (imported by nbformat) compiles ~40 grammars at import when rfc3987_syntax is installed,
# for a string format ("iri") that notebook validation never checks: about 2 s per worker. Skip it.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402

from autograder.sandbox import KERNEL_NAME  # noqa: E402

STUDENT = "student"
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)
HIDDEN_PLACEHOLDER = "# (hidden tests: not shown)\n"
OUTPUT_LIMIT = 2000
MESSAGE_LIMIT = 2000
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


CANARY = """# autograder canary {token}
### BEGIN HIDDEN TESTS
from autograder.checks import expect_close, expect_equal, expect_float, expect_ndarray, expect_raises

_canary_caught = 0
for _canary in (lambda: expect_equal(1, 2, "canary"), lambda: expect_close(1.0, 2.0, "canary"),
                lambda: expect_float("1", "canary"), lambda: expect_ndarray([1.0], "canary"),
                lambda: expect_raises(ValueError, lambda: None, "canary")):
    try:
        _canary()
    except AssertionError:
        _canary_caught += 1
raise AssertionError(f"{token} {{_canary_caught}}")
### END HIDDEN TESTS
"""
CANARY_CHECKS = 5
TAMPERED = ("the notebook tampered with grading: it replaced autograder.checks or changed how cells run "
            "(a failing test no longer failed)")


def add_canary(path: Path, token: str) -> None:
    """Append a last cell that must fail with ``token`` and the number of checks that failed in it.

    It is written like a hidden test. If solution code replaced the checks (``autograder.checks``)
    or made IPython swallow errors, the cell's outputs differ and the submission is not graded.
    """
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(CANARY.format(token=token)))
    nbformat.write(notebook, path)


def canary_problem(notebook: nbformat.NotebookNode, token: str) -> str:
    """Empty if the canary cell failed exactly as it must, else why not; removes it from ``notebook``."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and token in c.source]
    notebook.cells = [c for c in notebook.cells if c not in cells]
    errors = [o for c in cells for o in c.get("outputs", []) if o.output_type == "error"]
    if any(o.ename in ("CellTimeoutError", "KeyboardInterrupt") for o in errors):
        return "the notebook did not finish: the kernel was still busy at its last cell"
    if [(o.ename, o.evalue) for o in errors] != [("AssertionError", f"{token} {CANARY_CHECKS}")]:
        return TAMPERED
    return ""


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [{len(text) - limit} more characters not shown]"


def cell_message(cell: nbformat.NotebookNode) -> str:
    """Why a graded test cell failed: its error (name and message) or what it wrote to stderr."""
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            return shorten(ANSI.sub("", f"{output.ename}: {output.evalue}"), MESSAGE_LIMIT)
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stderr":
            return shorten("wrote to stderr (a graded cell must not): " + _text(output.text).strip(), MESSAGE_LIMIT)
    return ""


def incidents(notebook: nbformat.NotebookNode, cell_timeout: int) -> list[str]:
    """Notes on cells outside the tests that were stopped: timeouts, interrupts, memory errors."""
    notes = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        name = meta.get("grade_id", "a cell")
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if output.ename in ("CellTimeoutError", "KeyboardInterrupt"):
                notes.append(f"cell '{name}' ran past the {cell_timeout} s limit and was interrupted")
            elif output.ename == "MemoryError":
                notes.append(f"cell '{name}' ran out of memory")
    return list(dict.fromkeys(notes))


def sanitize_for_feedback(notebook: nbformat.NotebookNode) -> None:
    """Remove hidden test code (sources and traceback lines) and shorten every output, in place."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        hidden = "### BEGIN HIDDEN TESTS" in cell.source
        cell.source = HIDDEN.sub(HIDDEN_PLACEHOLDER, cell.source)
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                output.text = shorten(_text(output.text), OUTPUT_LIMIT)
            elif output.output_type == "error":
                output.evalue = shorten(output.evalue, OUTPUT_LIMIT)
                # A traceback quotes the lines of the cell: in a hidden test cell keep only the error.
                output.traceback = ([f"{output.ename}: {output.evalue}"] if hidden
                                    else [shorten(line, OUTPUT_LIMIT) for line in output.traceback[-20:]])
            elif "data" in output:
                data = output.data
                for kind in list(data):
                    if kind.startswith("text/") and len(_text(data[kind])) > OUTPUT_LIMIT:
                        data[kind] = shorten(_text(data[kind]), OUTPUT_LIMIT)
                    elif not kind.startswith("text/") and len(_text(data[kind])) > 200_000:
                        del data[kind]
                if not data:
                    data["text/plain"] = "[a large output, not shown]"


def course_config(root: Path, db_url: str, **overrides: str):
    """The course's nbgrader config (autograder/nbgrader_config.py) pointed at another course folder."""
    from traitlets.config.loader import PyFileConfigLoader

    from autograder import NBGRADER_CONFIG

    config = PyFileConfigLoader(NBGRADER_CONFIG.name, str(NBGRADER_CONFIG.parent)).load_config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = db_url
    for name, value in overrides.items():
        setattr(config.CourseDirectory, name, value)
    return config


def grading_config(course: Path, db_url: str, cell_timeout: int):
    """nbgrader's config for one job's throw-away course, with the sandbox kernel."""
    config = course_config(course, db_url, source_directory="source", submitted_directory="submitted",
                           autograded_directory="autograded", feedback_directory="feedback")
    config.Execute.timeout = cell_timeout
    config.Execute.kernel_name = KERNEL_NAME
    config.Execute.allow_errors = True
    config.Execute.interrupt_on_timeout = True
    config.Execute.startup_timeout = 120
    config.Execute.iopub_timeout = 10
    config.Execute.raise_on_iopub_timeout = False
    config.LimitOutput.max_lines = 200
    config.LimitOutput.max_traceback = 60
    return config


def run_converter(converter_class, config, assignment: str, student: str | None = None) -> str:
    """Run an nbgrader converter; returns its error log ('' when it succeeded)."""
    from nbgrader.coursedir import CourseDirectory

    config.CourseDirectory.assignment_id = assignment
    if student is not None:
        config.CourseDirectory.student_id = student
    log = _job_log()
    stream = log.handlers[0].stream
    stream.seek(0)
    stream.truncate()
    converter = converter_class(coursedir=CourseDirectory(config=config), config=config)
    converter.log = log
    try:
        converter.start()
    except Exception as error:  # noqa: BLE001 - nbgrader reports failures as exceptions and log lines
        return stream.getvalue() or f"{type(error).__name__}: {error}"
    return ""


def generate(job: dict) -> dict:
    """``nbgrader generate_assignment`` (its Python API) for one assignment into job['folder']."""
    from nbgrader.converters import GenerateAssignment

    folder = Path(job["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    config = course_config(Path(job["root"]), f"sqlite:///{folder / 'gradebook.db'}",
                           source_directory=job["source_directory"], release_directory=str(folder / "release"))
    config.GenerateAssignment.force = True
    error_log = run_converter(GenerateAssignment, config, job["assignment"])
    if error_log:
        return {"status": "failed", "reason": f"nbgrader generate_assignment {job['assignment']} failed: "
                                              f"{_failure_reason(error_log)}"}
    return {"status": "done"}


def _failure_reason(log_text: str) -> str:
    """The one line of nbgrader's error log that says why (a dead kernel, a timeout, bad JSON...)."""
    patterns = [
        (r"DeadKernelError|Kernel died", "the kernel died while running the notebook (memory or CPU time limit, "
                                         "or the notebook ended its own process)"),
        (r"UnresponsiveKernelError|became unresponsive", "the kernel stopped responding (an infinite loop that "
                                                         "ignores interrupts?)"),
        (r"NotJSONError|JSONDecodeError|Notebook does not appear to be JSON", "the notebook file is not valid JSON"),
        (r"ValidationError|not valid", "the notebook file is not a valid notebook"),
        (r"RuntimeError: Kernel didn't respond|Kernel didn't respond", "the kernel did not start in time"),
    ]
    for pattern, reason in patterns:
        if re.search(pattern, log_text):
            return reason
    lines = [line for line in log_text.strip().splitlines() if line.strip()]
    return shorten(lines[-1] if lines else "nbgrader could not grade the notebook", MESSAGE_LIMIT)


def _read_scores(db_url: str, assignment: str, notebooks: list[str], course: Path) -> list[dict]:
    """Per graded cell: notebook, grade_id, points, max_points, passed, message."""
    from nbgrader.api import Gradebook

    cells = []
    with Gradebook(db_url) as gradebook:
        for name in notebooks:
            autograded = course / "autograded" / STUDENT / assignment / f"{name}.ipynb"
            notebook = nbformat.read(autograded, as_version=4) if autograded.exists() else None
            by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in notebook.cells} if notebook else {}
            order = {grade_id: i for i, grade_id in enumerate(by_id)}
            grades = gradebook.find_submission_notebook(name, assignment, STUDENT).grades
            for grade in sorted(grades, key=lambda g: (order.get(g.name, len(order)), g.name)):
                points = float(grade.score or 0.0)
                cell = by_id.get(grade.name)
                if cell is None:
                    message = "this test cell is missing from the submitted notebook"
                else:
                    message = cell_message(cell)
                cells.append({"notebook": name, "grade_id": grade.name, "points": points,
                              "max_points": float(grade.max_score), "passed": points >= float(grade.max_score),
                              "message": message})
    return cells


def grade(job: dict) -> dict:
    """Grade one submission; returns {"status", "reason", "cells", "timings"}.

    The job (built by `autograder.grade`): assignment, notebooks (name -> submitted file or None),
    workdir (this job's own folder), released and gradebook (the assignment's template), feedback
    (the folder for the HTML), cell_timeout, preload_torch, uid (0: no privilege drop), hidden (folders
    the kernel must not see) and limits.
    """
    assignment, workdir = job["assignment"], Path(job["workdir"])
    course = workdir / "course"
    source = course / "source" / assignment
    shutil.copytree(job["released"], source, ignore=shutil.ignore_patterns("*.ipynb"), dirs_exist_ok=True)
    submitted = course / "submitted" / STUDENT / assignment
    submitted.mkdir(parents=True)
    problems = []
    token = f"canary-{secrets.token_hex(16)}"
    for name, path in job["notebooks"].items():
        if path is None:
            continue
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as error:  # noqa: BLE001 - any unreadable notebook is the student's problem
            problems.append(f"{name}.ipynb is not a readable notebook ({type(error).__name__}: "
                            f"{shorten(str(error).splitlines()[0] if str(error) else '', 200)})")
            continue
        shutil.copyfile(path, submitted / f"{name}.ipynb")
        add_canary(submitted / f"{name}.ipynb", token)
    if problems:
        return {"status": "failed", "reason": "; ".join(problems), "cells": []}
    gradebook = workdir / "gradebook.db"
    shutil.copyfile(job["gradebook"], gradebook)
    db_url = f"sqlite:///{gradebook}"
    os.environ.update({
        "AUTOGRADER_SANDBOX_HOME": str(workdir / "kernel"),
        "AUTOGRADER_KERNEL_PID_FILE": str(workdir / "kernel.pid"),
        "AUTOGRADER_KERNEL_TIMES_FILE": str(workdir / "kernel.times"),
        "AUTOGRADER_PRELOAD_TORCH": "1" if job["preload_torch"] else "0",
        "AUTOGRADER_SANDBOX_UID": str(job["uid"]),
        "AUTOGRADER_HIDDEN_PATHS": os.pathsep.join(job["hidden"]),
        **{f"AUTOGRADER_{key.upper()}": str(value) for key, value in job["limits"].items()},
    })
    from nbgrader.converters import Autograde, GenerateFeedback

    started = time.time()
    error_log = run_converter(Autograde, grading_config(course, db_url, job["cell_timeout"]), assignment, STUDENT)
    autograded_at = time.time()
    if error_log:
        return {"status": "failed", "reason": _failure_reason(error_log), "cells": []}
    cells = _read_scores(db_url, assignment, list(job["notebooks"]), course)
    notes = []
    for name, path in job["notebooks"].items():
        autograded = course / "autograded" / STUDENT / assignment / f"{name}.ipynb"
        if autograded.exists():
            notebook = nbformat.read(autograded, as_version=4)
            problem = canary_problem(notebook, token) if path is not None else ""
            if problem:
                return {"status": "failed", "reason": problem, "cells": []}
            notes += incidents(notebook, job["cell_timeout"])
            sanitize_for_feedback(notebook)
            nbformat.write(notebook, autograded)
    error_log = run_converter(GenerateFeedback, grading_config(course, db_url, job["cell_timeout"]), assignment, STUDENT)
    feedback = Path(job["feedback"])
    shutil.rmtree(feedback, ignore_errors=True)
    feedback.mkdir(parents=True)
    for html in sorted((course / "feedback" / STUDENT / assignment).glob("*.html")):
        shutil.copyfile(html, feedback / html.name)
    if error_log:
        notes.append("feedback could not be written")
    return {"status": "graded", "reason": "; ".join(notes), "cells": cells,
            "timings": _timings(workdir / "kernel.times", started, autograded_at)}


def _timings(kernel_times: Path, started: float, autograded_at: float) -> dict[str, float]:
    """Seconds spent: starting the kernel process, its imports, starting ipykernel, running the notebook
    (with nbgrader's bookkeeping and the kernel's shutdown), writing the feedback."""
    try:
        kernel = json.loads(kernel_times.read_text())
    except (OSError, ValueError):
        return {}
    return {"kernel_process_start": kernel["started"] - started,
            "kernel_preload": kernel["preloaded"] - kernel["started"],
            "ipykernel_start": kernel["ready"] - kernel["preloaded"],
            "run_notebook": autograded_at - kernel["ready"], "feedback": time.time() - autograded_at}


def _job_log() -> logging.Logger:
    log = logging.getLogger("autograder.worker.nbgrader")
    if not log.handlers:
        log.addHandler(logging.StreamHandler(io.StringIO()))
        log.setLevel(logging.ERROR)
        log.propagate = False
    return log


def main() -> None:
    """Serve jobs from stdin until it closes."""
    memory = int(os.environ.get("AUTOGRADER_WORKER_MEMORY_BYTES", "0"))
    if memory:
        # Outputs pile up here while a notebook prints: a flood ends this worker, not the machine.
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import nbgrader.converters  # noqa: F401 - imported once, before the first job

    from autograder.gradebook import use_inprocess_alembic

    use_inprocess_alembic()

    for line in sys.stdin:
        job = json.loads(line)
        try:
            result = generate(job) if job.get("kind") == "generate" else grade(job)
        except Exception as error:  # noqa: BLE001 - a failure of one submission is reported, not fatal
            result = {"status": "failed", "reason": f"grading failed: {type(error).__name__}: {error}", "cells": []}
        answers.write(json.dumps(result) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
