"""The launch buttons work: the environment Binder builds runs every chapter page top to bottom.

Binder (repo2docker) clones the repository, installs `binder/requirements.txt` (or, without a
`binder/` folder, the root's requirements.txt and setup.py), runs `postBuild`, and opens
`book/NN_*.md` with `book/` as the working directory. This test does the same in a fresh virtual
environment, on a copy of the files git would clone, with nothing of the development venv on the
path, then executes every registered page from `book/`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from course import ROOT
from course.chapters import chapters

pytestmark = [pytest.mark.slow, pytest.mark.network]
PAGES = [f"{found.slug}.md" for found in chapters()]
# repo2docker's base environment provides the notebook server and its executor (nbclient).
BASE_ENVIRONMENT = ["nbclient"]
# What JupyterLab does when a reader opens a page and runs every cell: jupytext reads the MyST page as
# a notebook, a python3 kernel of this environment runs it in the page's folder.
EXECUTE = """
import sys, jupytext, nbclient
notebook = jupytext.read(sys.argv[1])
nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
"""


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: int) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} failed in {cwd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _clone(target: Path) -> Path:
    """The files a clone would hold: tracked files and new files git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def binder(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(a clone of the repository, the environment of a fresh venv built the way repo2docker builds it)."""
    repo = _clone(tmp_path_factory.mktemp("clone"))
    home = tmp_path_factory.mktemp("home")
    prefix = tmp_path_factory.mktemp("env") / "venv"
    venv.create(prefix, with_pip=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    env.update(HOME=str(home), VIRTUAL_ENV=str(prefix), PATH=f"{prefix / 'bin'}{os.pathsep}{env['PATH']}",
               PIP_CACHE_DIR=env.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")), MPLBACKEND="Agg",
               # Only to save time: pip skips byte-compiling what it installs (torch and transformers are thousands
               # of files); the first page's kernel compiles each module it imports, and the later pages reuse it.
               PIP_NO_COMPILE="1")
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--retries", "1", "--timeout", "60", "-q"]
    config = repo / "binder" if (repo / "binder").is_dir() else repo
    if (config / "requirements.txt").is_file():
        _run([*pip, "-r", str(config / "requirements.txt")], repo, env, timeout=900)
    if config == repo and (repo / "setup.py").is_file():
        _run([*pip, "."], repo, env, timeout=600)
    _run([*pip, *BASE_ENVIRONMENT], repo, env, timeout=600)
    if (config / "postBuild").is_file():
        _run(["bash", str(config / "postBuild")], repo, env, timeout=600)
    return repo, env


def test_binder_requirements_pin_a_cpu_torch() -> None:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines, "torch must come from the CPU index"
    assert any(line.startswith("torch==") and line.endswith("+cpu") for line in lines), \
        "pin the CPU build of torch (torch==X+cpu): PyPI's Linux wheel pulls several GB of CUDA libraries"


def test_the_course_imports_from_book_folder(binder: tuple[Path, dict[str, str]]) -> None:
    repo, env = binder
    python = str(Path(env["VIRTUAL_ENV"]) / "bin" / "python")
    out = _run([python, "-c", "import course, benchmarks, autograder, torch; print(course.ROOT, torch.__version__)"],
               repo / "book", env, timeout=120)
    root, version = out.split()
    assert Path(root) == repo, f"course.ROOT is {root}, not the clone {repo}: the editable install is missing"
    assert version.endswith("+cpu"), f"torch {version} is not the CPU build"


def test_postbuild_opens_pages_as_notebooks(binder: tuple[Path, dict[str, str]]) -> None:
    _, env = binder
    settings = Path(env["HOME"]) / ".jupyter/lab/user-settings/@jupyterlab/docmanager-extension/plugin.jupyterlab-settings"
    assert "Jupytext Notebook" in settings.read_text(), "JupyterLab would open the .md pages as plain text"


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_from_book_folder(binder: tuple[Path, dict[str, str]], page: str) -> None:
    repo, env = binder
    python = str(Path(env["VIRTUAL_ENV"]) / "bin" / "python")
    _run([python, "-c", EXECUTE, page], repo / "book", env, timeout=900)
