"""Command line: `python -m autograder release` and `python -m autograder grade`."""

from __future__ import annotations

import argparse
import sys

from autograder.release import release


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate exercises/ from solutions/ with nbgrader")
    args = parser.parse_args(argv)
    if args.command == "release":
        for folder in release():
            print(f"released {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
