"""Command line of the course package: `python -m course new NN_name --title ... [--library ...]` adds a chapter;
`python -m course check NOTEBOOK` runs a notebook's tests the way the grader will and names the ones that fail."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course.check import Outcome, check, report
from course.scaffold import new_chapter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="create and register a chapter (page, source notebook, bank file)")
    new.add_argument("slug", help="two digits, an underscore and a lower-case name, e.g. 07_flash_attention")
    new.add_argument("--title", required=True, help="the chapter's title, e.g. 'Attention in tiles'")
    new.add_argument("--library", choices=["NumPy", "PyTorch"], default="NumPy")
    new.add_argument("--learn", default="(one line: what the reader learns)",
                     help="one line for the introduction's map of the course")
    new.add_argument("--functions", nargs="+", default=["example"],
                     help="the graded functions' names, as separate words or one quoted, space-separated list")
    checked = commands.add_parser("check", help="run a notebook's tests the way the grader will: a fresh kernel, "
                                  "every cell in order; each test cell passed or FAILED with its message")
    checked.add_argument("notebook", type=Path, help="the notebook file, e.g. similarity.ipynb")
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(parser, args.notebook)
    try:
        functions = tuple(name for words in args.functions for name in words.split())  # "f g" or f g
        chapter = new_chapter(args.slug, args.title, args.library, functions, args.learn)
    except (ValueError, FileExistsError) as error:
        parser.error(str(error))
    print(f"created {chapter.page.name}, solutions/{chapter.slug}/{chapter.notebook}.ipynb and "
          f"tests/bank/ch{chapter.slug}.py; registered in course/chapters.yml, _toc.yml, README.md and "
          f"book/intro.md. Next: write them (CONTRIBUTING.md), then `python -m autograder release`.")
    return 0


def _check(parser: argparse.ArgumentParser, notebook: Path) -> int:
    """Exit status 0 when every visible test cell passes, 1 when one fails or the notebook has no test cell."""
    if not notebook.is_file():
        parser.error(f"{notebook} is not a file: give the notebook's path, e.g. similarity.ipynb")
    cells = check(notebook)
    if not cells:
        print(f"{notebook.name} has no test cell (nbgrader metadata grade: true): is it one of the course's "
              "exercise notebooks?")
        return 1
    print(report(notebook.name, cells))
    return 0 if all(cell.outcome is not Outcome.FAILED for cell in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
