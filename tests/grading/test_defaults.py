"""One source for every default: `python -m autograder`'s parsers (`autograder.__main__.build_parser`) are read,
never copied, and README.md's and docs/instructor-cli.md's option tables are held to them: every option of every
subcommand has a row whose default column says its default, and no row names an option that does not exist.

What a table's default column must say, for one option: ``required`` for a required option; nothing for a flag;
a literal default as written (``60``, ``0.75``, ``solutions/`` for a folder of the course); and for a default
computed at run time (an empty or missing value), what the option's help states after ``default:``, else nothing.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from autograder.__main__ import build_parser, options_from
from autograder.grading.options import Options
from autograder.reports.similarity import DEFAULT_THRESHOLD
from autograder.sandbox.limits import Limits
from course import EXERCISES, ROOT, SOLUTIONS

README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "instructor-cli.md"
SECTION = re.compile(r"^## `python -m autograder ([a-z-]+)", re.MULTILINE)
CELL = re.compile(r"(?<!\\)\|")
OPTION = re.compile(r"--[a-z][a-z-]*")
STATED = re.compile(r"\bdefault:? (.+?)(?=[;),]|: |$)")  # "(default: the number of cores; ...)", "(default 60)"


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name, as `python -m autograder` builds them."""
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A parser's options by their long name, --help left out."""
    return {max(a.option_strings, key=len): a for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)}


def shown(value: object) -> str:
    """A literal default as a table writes it."""
    if isinstance(value, Path):
        return f"{value.relative_to(ROOT)}/" if value.is_relative_to(ROOT) else str(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


def stated(action: argparse.Action) -> str | None:
    found = STATED.search(action.help or "")
    return found.group(1).strip() if found else None


def literal(action: argparse.Action) -> bool:
    return action.default not in (None, "", [], ()) and not isinstance(action.default, bool)


def expected_default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0:  # a flag (store_true, --version)
        return ""
    return shown(action.default) if literal(action) else stated(action) or ""


def usage(action: argparse.Action) -> str:
    """How a table row names the option: ``--name METAVAR`` (``--name`` for a flag or a choice)."""
    name = max(action.option_strings, key=len)
    return f"{name} {action.metavar}" if action.metavar else name


def option_rows(text: str) -> dict[str, tuple[str, str]]:
    """The option tables of ``text`` (a header whose first cell is ``option`` and with a ``default`` column): the
    option each row names (its first cell's first ``--name``) -> (how the row writes it, its first code span
    without the value of a choice; its default cell, backticks left out)."""
    rows: dict[str, tuple[str, str]] = {}
    for table in re.findall(r"(?:^\|.*\n?)+", text, re.MULTILINE):
        lines = table.strip().splitlines()
        header = [cell.strip() for cell in CELL.split(lines[0].strip().strip("|"))]
        if header[0] != "option":
            continue
        assert "default" in header, f"an option table without a default column: {lines[0]}"
        column = header.index("default")
        for line in lines[2:]:
            cells = [cell.strip() for cell in CELL.split(line.strip().strip("|"))]
            named = OPTION.search(cells[0])
            assert named, f"an option row that names no --option: {line}"
            written = re.search(r"`([^`]*)`", cells[0])
            rows[named.group()] = (written.group(1) if written else cells[0], cells[column].replace("`", "").strip())
    return rows


def table_problems(text: str, parser: argparse.ArgumentParser) -> list[str]:
    """How the option tables of ``text`` disagree with ``parser``: a missing row, a wrong default, a row too many."""
    rows, real = option_rows(text), options(parser)
    problems = [f"{name}: no row in the option table (its default: {expected_default(action)!r})"
                for name, action in real.items() if name not in rows]
    problems += [f"{name}: the table says default {rows[name][1]!r}, the parser's is {expected_default(action)!r}"
                 for name, action in real.items() if name in rows and rows[name][1] != expected_default(action)]
    problems += [f"{name}: the table writes it {rows[name][0]!r}, the parser's usage is {usage(action)!r}"
                 for name, action in real.items() if name in rows
                 and rows[name][0] != usage(action) and not (action.choices and rows[name][0].startswith(name))]
    problems += [f"{name}: a row for an option that `{parser.prog}` does not have" for name in rows if name not in real]
    return problems


def doc_sections() -> dict[str, str]:
    parts = SECTION.split(CLI_DOC.read_text())
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_subcommand_has_a_section() -> None:
    assert sorted(doc_sections()) == sorted(subcommands()), (
        "docs/instructor-cli.md needs one '## `python -m autograder COMMAND ...`' section per subcommand")


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_the_cli_docs_option_table_is_the_parsers(command: str) -> None:
    problems = table_problems(doc_sections()[command], subcommands()[command])
    assert not problems, f"docs/instructor-cli.md, section `{command}`:\n" + "\n".join(problems)


def test_the_readme_option_table_is_grades() -> None:
    problems = table_problems(README.read_text(), subcommands()["grade"])
    assert not problems, "README.md's option table against `python -m autograder grade`:\n" + "\n".join(problems)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_a_default_the_help_states_is_the_real_one(command: str) -> None:
    wrong = [f"{name}: the help says default {stated(action)!r}, the parser's is {shown(action.default)!r}"
             for name, action in options(subcommands()[command]).items()
             if literal(action) and stated(action) is not None and stated(action) != shown(action.default)]
    assert not wrong, f"`python -m autograder {command} --help`:\n" + "\n".join(wrong)


def test_the_check_finds_a_wrong_default_a_missing_row_and_an_extra_row() -> None:
    text, grade = README.read_text(), subcommands()["grade"]
    real = expected_default(options(grade)["--cell-timeout"])
    row = re.search(r"^\| `--cell-timeout S` \|[^|]*\|", text, re.MULTILINE)
    assert row, "README.md has no --cell-timeout row"
    found = table_problems(text, grade)  # the README's own problems, if any, are another test's

    def new(changed: str) -> list[str]:
        return [problem for problem in table_problems(changed, grade) if problem not in found]

    off_by_one = f"{int(real) * 2 + 1}"  # a wrong default (unlike any the table may already hold)
    assert new(text.replace(row.group(), f"| `--cell-timeout S` | {off_by_one} |")) == [
        f"--cell-timeout: the table says default '{off_by_one}', the parser's is '{real}'"]
    assert new(text.replace(row.group(), "| `--no-such-option S` | 1 |")) == [
        f"--cell-timeout: no row in the option table (its default: '{real}')",
        "--no-such-option: a row for an option that `python -m autograder grade` does not have"]


def test_a_grade_run_without_options_gets_the_options_defaults(tmp_path: Path) -> None:
    args = build_parser().parse_args(["grade", str(tmp_path / "in"), "--out", str(tmp_path / "out")])
    from_cli = options_from(args)
    own = Options(from_cli.submissions, from_cli.out, from_cli.jobs)
    differ = {name: (getattr(from_cli, name), getattr(own, name)) for name in vars(own)
              if getattr(from_cli, name) != getattr(own, name)}
    assert not differ, f"`python -m autograder grade` without options and `Options` disagree (CLI, Options): {differ}"


def test_the_prose_states_the_defaults_the_code_has() -> None:
    """Defaults the option tables do not hold (limits without an option, the threshold's reasoning, a message
    under the default cell timeout), as README.md and docs/instructor-cli.md word them."""
    limits, mib = Limits(), 2**20
    said = {README: [f"a private `/tmp` (tmpfs, {limits.tmp_bytes // mib} MiB)",
                     f"{limits.file_bytes // mib} MiB per file, {limits.processes} processes",
                     f"limit but the {limits.file_bytes // mib} MiB per file",
                     f"**The default threshold, {DEFAULT_THRESHOLD:g},**",
                     f"no result within the {limits.cell_seconds} s a test cell may take"],
            CLI_DOC: [f"(each file at most {limits.file_bytes // mib} MiB)"]}
    for path, phrases in said.items():
        text = " ".join(path.read_text().split())
        missing = [phrase for phrase in phrases if phrase not in text]
        assert not missing, f"{path.name} should say, as the code has it: {missing}"


def test_the_course_folders_are_named_once() -> None:
    """`course.SOLUTIONS` and `course.EXERCISES` are the folders' only spelling in the code."""
    spelled = []
    for folder in ("autograder", "course", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in (SOLUTIONS, EXERCISES):
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert [place.split(":")[0] for place in spelled] == ["course/__init__.py"] * 2, (
        f"{SOLUTIONS!r} or {EXERCISES!r} spelled outside course/__init__.py; import course.SOLUTIONS or "
        f"course.EXERCISES instead: {spelled}")
