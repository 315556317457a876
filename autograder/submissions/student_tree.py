"""`python -m autograder release --student-tree DIR [--repository-url URL] [--branch NAME]`: the student-only copy
of the course, for a term run for credit.

This repository publishes the reference solutions and the hidden tests (solutions/, and the right and wrong
answers of tests/bank/). A term for credit keeps them in a private copy and gives students a repository (or
branch) made from DIR: every file git tracks in the course but solutions/, tests/ and the CI folders, with
``_config.yml``'s ``repository.url`` and ``repository.branch`` pointing at that student repository, so the
book's launch buttons and every exercise's Binder, Colab and JupyterHub links open it. The book pages that
plot with a reference solution (`course.solutions.load_solution`) do not run there: students read them on
the site built from the private copy. The private copy grades with ``grade --source`` as usual.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

from course import ROOT, SOLUTIONS

LEFT_OUT = (SOLUTIONS, "tests", ".ci", ".github")


class StudentTreeError(Exception):
    """Why the student tree cannot be written: one line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``release`` options that write the student-only tree."""
    parser.add_argument("--student-tree", type=Path, metavar="DIR",
                        help="also write the student-only copy of the course to DIR (a new or empty folder): "
                             "everything but solutions/ and tests/, for a private term's student repository")
    parser.add_argument("--repository-url", metavar="URL",
                        help="with --student-tree: the student repository the launch links open")
    parser.add_argument("--branch", metavar="NAME",
                        help="with --student-tree: its branch (default: the branch _config.yml names)")


def tracked_files(root: Path = ROOT) -> list[Path]:
    """The course's files as git tracks them (what a clone holds), relative to ``root``."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True,
                                timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise StudentTreeError(f"cannot list the course's files with git in {root} ({error}): the student tree "
                               "is made from a git checkout of the course") from None
    return [Path(name) for name in listed.decode().split("\0") if name]


def _point_at(config: str, url: str | None, branch: str | None) -> str:
    """``_config.yml`` with the url and branch of its top-level ``repository:`` block replaced."""
    head, found, block = config.partition("\nrepository:\n")
    end = re.search(r"^\S", block, re.MULTILINE)
    body, rest = (block[:end.start()], block[end.start():]) if end else (block, "")
    for key, value in (("url", url), ("branch", branch)):
        if value is not None:
            body, count = re.subn(rf"^([ \t]+{key}:)[^\n]*$", rf"\g<1> {value}", body, count=1, flags=re.MULTILINE)
            if not found or count != 1:
                raise StudentTreeError(f"_config.yml has no repository {key} to point at the student repository")
    return head + found + body + rest


def write_student_tree(out: Path, url: str | None, branch: str | None, root: Path = ROOT) -> list[Path]:
    """Copy the course but `LEFT_OUT` into ``out`` (new or empty); the files written, relative to ``out``."""
    written = []
    for relative in tracked_files(root):
        if relative.parts[0] in LEFT_OUT or not (root / relative).is_file():
            continue
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, target)
        written.append(relative)
    config = out / "_config.yml"
    config.write_text(_point_at(config.read_text(), url, branch))
    return written


def options_problem(args: argparse.Namespace) -> str:
    """What is wrong with the ``--student-tree`` options ('' when nothing), before anything is released."""
    if args.student_tree is None:
        return "--repository-url and --branch go with --student-tree DIR" if args.repository_url or args.branch else ""
    out = args.student_tree.resolve()
    if out == ROOT.resolve() or ROOT.resolve() in out.parents:
        return f"--student-tree {args.student_tree} is inside the course: choose a folder outside it"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"--student-tree {args.student_tree} exists and is not an empty folder"
    return ""


def run(args: argparse.Namespace) -> str:
    """The ``--student-tree`` part of ``release`` (after `check`): the line it prints ('' without the option)."""
    if args.student_tree is None:
        return ""
    written = write_student_tree(args.student_tree, args.repository_url, args.branch)
    where = (f"; its launch links open {args.repository_url}" if args.repository_url
             else "; its launch links still open the public repository: give --repository-url")
    return f"wrote the student tree {args.student_tree}: {len(written)} files, no solutions/ or tests/{where}"
