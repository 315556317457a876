"""Command line of the course package: `python -m course new NN_name --title ... [--library ...]`."""

from __future__ import annotations

import argparse
import sys

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
    args = parser.parse_args(argv)
    try:
        functions = tuple(name for words in args.functions for name in words.split())  # "f g" or f g
        chapter = new_chapter(args.slug, args.title, args.library, functions, args.learn)
    except (ValueError, FileExistsError) as error:
        parser.error(str(error))
    print(f"created {chapter.page.name}, solutions/{chapter.slug}/{chapter.notebook}.ipynb and "
          f"tests/bank/ch{chapter.slug}.py; registered in course/chapters.yml, _toc.yml, README.md and "
          f"book/intro.md. Next: write them (CONTRIBUTING.md), then `python -m autograder release`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
