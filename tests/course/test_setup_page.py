"""The set-up page (book/setup.md) works as a student follows it, from a fresh virtual environment.

The commands come from the page itself: its ```bash blocks in order, with the Linux row of its torch table
between the install block and the import check, so that the page and this test cannot drift. They run in bash
in an empty temporary folder; then the page's validate command runs on a NumPy chapter's notebook (chapter 1)
and a torch chapter's (chapter 3) in that environment: the released notebook with the reference solutions
filled in must validate, and the blank notebook must fail and show each visible test cell.

PyTorch's CPU index: where download.pytorch.org can be reached, the page's torch command runs as written. The
project's machines reach PyPI only; there the command runs with its index unreachable (`--retries 0`) and a
constraint to the CPU build of the version requirements.txt pins, which pip finds through this machine's own
configuration (its find-links holds that wheel; PyPI's Linux wheel is the CUDA build). Either way the test
checks that the environment holds a CPU torch and no CUDA library. pip's cache (its default place, or
PIP_CACHE_DIR) makes a second run download nothing, and pip does not byte-compile (PIP_NO_COMPILE): the time
left is mostly unpacking torch.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from course import ROOT
from course.chapters import chapter
from course.notebooks import solution_sources, student_notebook

PAGE = ROOT / "book" / "setup.md"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
CHAPTERS = ["01_similarity", "03_multi_head"]  # NumPy, then torch
SUCCESS = "Success! Your notebook passes all the tests."


@dataclass(frozen=True)
class SetupPage:
    blocks: tuple[str, ...]  # the ```bash blocks, in the page's order
    torch_linux: str  # the torch table's "Linux, Windows" command
    validate: str  # the validate command the page shows, e.g. `nbgrader validate similarity.ipynb`
    check: str  # the `python -m course check ...` command the page shows


def read_page(text: str) -> SetupPage:
    blocks = tuple(re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M))
    rows = [line for line in text.splitlines() if line.startswith("| Linux")]
    assert len(rows) == 1, f"the torch table should have one Linux row, found {rows}"
    inline = re.findall(r"`([^`\n]+)`", text)
    validate = [code for code in inline if code.startswith("nbgrader validate ")]
    check = [code for code in inline if code.startswith("python -m course check ")]
    assert validate and check, "the page should show `nbgrader validate NOTEBOOK` and `python -m course check NOTEBOOK`"
    return SetupPage(blocks, re.findall(r"`([^`]+)`", rows[0])[0], validate[0], check[0])


def _torch_index_reachable() -> bool:
    try:
        socket.getaddrinfo("download.pytorch.org", 443)
    except OSError:
        return False
    return True


def _torch_command(page: SetupPage, folder: Path) -> str:
    if _torch_index_reachable():
        return page.torch_linux
    pin = next(line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch=="))
    constraint = folder / "torch-cpu.txt"
    constraint.write_text(f"{pin}+cpu\n")
    return f"{page.torch_linux} --retries 0 --constraint {shlex.quote(str(constraint))}"


def test_the_page_shows_the_steps_a_student_needs() -> None:
    page = read_page(PAGE.read_text())
    commands = "\n".join(page.blocks)
    assert "python3 --version" in commands and "-m venv" in commands and "activate" in commands
    for package in ("numpy", "jupyterlab", "nbgrader"):
        assert package in commands, f"the install block should install {package}"
    assert '"torch>=2.5"' in page.torch_linux and f"--index-url {TORCH_INDEX}" in page.torch_linux, \
        f"Linux's torch command should ask for torch 2.5 or newer from PyTorch's CPU index: {page.torch_linux}"
    assert "import numpy, torch" in page.blocks[-1], "the last block should check that numpy and torch import"


def test_the_page_names_a_real_notebook() -> None:
    """The example file names are the ones a student downloads (chapter 1's notebook), not the chapter's folder."""
    page = read_page(PAGE.read_text())
    first = chapter("01_similarity").exercise
    assert page.validate.split()[-1] == first.name, f"`{page.validate}` should name {first.name}"
    assert (ROOT / page.check.split()[-1]) == first, f"`{page.check}` should name {first.relative_to(ROOT)}"


def _bash(script: str, cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHON"))}
    # Nothing of the project's own environment on the path: python3 is the machine's.
    env["PATH"] = os.pathsep.join(entry for entry in env["PATH"].split(os.pathsep)
                                  if Path(entry).resolve() != Path(sys.executable).parent.resolve())
    # Only to save time: pip skips byte-compiling what it installs (torch alone is thousands of files); Python
    # compiles each module when it is first imported, as it would have anyway.
    env["PIP_NO_COMPILE"] = "1"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class Student:
    folder: Path  # where the page's commands ran; the environment is folder/attention
    output: str  # what they printed


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Student:
    page = read_page(PAGE.read_text())
    folder = tmp_path_factory.mktemp("student")
    *install, imports = page.blocks
    script = "\n".join(["set -eo pipefail", *install, _torch_command(page, folder), imports])
    done = _bash(script, folder, timeout=1500)
    assert done.returncode == 0, f"the page's commands failed:\n{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return Student(folder, done.stdout)


@pytest.mark.slow
@pytest.mark.network
def test_the_page_installs_python_jupyter_numpy_and_a_cpu_torch(student: Student) -> None:
    version = re.search(r"^Python (\d+)\.(\d+)", student.output, flags=re.M)
    assert version and (int(version[1]), int(version[2])) >= (3, 10), f"Python 3.10 or newer: {student.output}"
    torch_version = re.search(r"^numpy \S+ torch (\d+)\.(\d+)\S*$", student.output, flags=re.M)
    assert torch_version and (int(torch_version[1]), int(torch_version[2])) >= (2, 5), student.output
    probe = ("import importlib.metadata as m, torch; "
             "print(torch.version.cuda, sorted(d.metadata['Name'] for d in m.distributions() "
             "if d.metadata['Name'].lower().startswith('nvidia')))")
    done = _bash(f"source attention/bin/activate && python -c {shlex.quote(probe)} && jupyter lab --version "
                 "&& nbgrader --version", student.folder, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("None []\n"), f"torch should be the CPU build, with no CUDA library: {done.stdout}"


def _validate(student: Student, slug: str, answers: dict[str, str], name: str) -> str:
    """The page's validate command, run in the page's environment on the chapter's notebook saved as `name`."""
    page = read_page(PAGE.read_text())
    released = chapter(slug).exercise
    folder = student.folder / name
    folder.mkdir()
    nbformat.write(nbformat.from_dict(student_notebook(released, answers)), folder / released.name)
    command = page.validate.replace(chapter("01_similarity").exercise.name, released.name)
    done = _bash(f"source ../attention/bin/activate && {command}", folder, timeout=900)
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("slug", CHAPTERS)
def test_the_reference_solutions_validate(student: Student, slug: str) -> None:
    out = _validate(student, slug, solution_sources(chapter(slug).solution), f"{slug}_reference")
    assert SUCCESS in out, f"chapter {slug}'s reference solutions should validate:\n{out[-4000:]}"


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("slug", CHAPTERS)
def test_the_blank_notebook_fails_and_shows_each_visible_test(student: Student, slug: str) -> None:
    out = _validate(student, slug, {}, f"{slug}_blank")
    visible = [cell for cell in nbformat.read(chapter(slug).exercise, as_version=4).cells
               if cell.metadata.get("nbgrader", {}).get("grade") and "# Visible test" in cell.source]
    assert SUCCESS not in out and f"VALIDATION FAILED ON {len(visible)} CELL(S)" in out, out[-4000:]
    for cell in visible:  # each visible test ends by printing that it passed; validate shows the cell's source
        last = cell.source.strip().splitlines()[-1]
        assert last.startswith("print(") and last in out, f"validate should show the failing cell {last}:\n{out}"
