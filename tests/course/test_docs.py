"""The contract in docs/ agrees with the code: every graded function of every registered chapter is in
docs/chapters.md with the signature its reference solution really has, and the repository never
points outside itself."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import subprocess
from dataclasses import dataclass, field

import pytest

from course import ROOT
from course.chapters import Chapter, chapters
from course.notebooks import solution_sources
from tests.course import requirements

CHAPTERS_DOC = ROOT / "docs" / "chapters.md"
CLI_DOC = ROOT / "docs" / "instructor-cli.md"
OUTSIDE = ("shared" + "/", "course-" + "spec.md")  # split so that this file does not match itself
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")


@dataclass(frozen=True)
class Signature:
    """What a caller relies on: parameter kinds, names and defaults (annotations are left out), or a
    class's bases, or a property's name (``params`` None)."""

    kind: str  # "def", "class" or "property"
    params: tuple | None = None
    text: str = field(default="", compare=False)  # how it is written, for messages

    def __str__(self) -> str:
        return {"property": "a property", "class": f"class with bases ({self.text})"}.get(self.kind, f"({self.text})")


def _default(node: ast.expr) -> object:
    """A default value as a comparable object: the literal's value (10000 == 10000.0), else its source."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _params(args: ast.arguments) -> tuple:
    """(kind, name, default or None) of each parameter, in order."""
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [("positional", a.arg, None if d is None else _default(d)) for a, d in zip(positional, defaults)]
    if args.vararg:
        params.append(("*", args.vararg.arg, None))
    params += [("keyword", a.arg, None if d is None else _default(d)) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append(("**", args.kwarg.arg, None))
    return tuple(params)


def code_signatures(chapter: Chapter) -> dict[str, Signature]:
    """``name``, ``Class`` and ``Class.method`` -> signature, for the graded names that the chapter's
    solution cells define at top level (a class contributes ``__init__`` and its public methods)."""
    found: dict[str, Signature] = {}
    for source in solution_sources(chapter.solution).values():
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name in chapter.functions:
                found[node.name] = Signature("def", _params(node.args), ast.unparse(node.args))
            elif isinstance(node, ast.ClassDef) and node.name in chapter.functions:
                found[node.name] = _class(node)
                found.update({f"{node.name}.{method.name}": _method(method) for method in node.body
                              if isinstance(method, ast.FunctionDef)
                              and (method.name == "__init__" or not method.name.startswith("_"))})
    return found


def _class(node: ast.ClassDef) -> Signature:
    bases = tuple(ast.unparse(b) for b in node.bases)
    return Signature("class", bases, ", ".join(bases))


def _method(method: ast.FunctionDef) -> Signature:
    if any(ast.unparse(d) == "property" for d in method.decorator_list):
        return Signature("property")
    return Signature("def", _params(method.args), ast.unparse(method.args))


def _parse_doc_signature(text: str) -> tuple[str, Signature]:
    """``class Name(Base)``, ``name(a, b=1) -> ret``, ``Class.method(self, x)`` or ``Class.attribute``."""
    if text.startswith("class "):
        node = ast.parse(f"{text}: pass").body[0]
        return node.name, _class(node)
    if "(" not in text:
        return text, Signature("property")
    name, rest = text.split("(", 1)
    node = ast.parse(f"def {name.rsplit('.', 1)[-1]}({rest}: pass").body[0]
    return name, Signature("def", _params(node.args), ast.unparse(node.args))


def doc_sections() -> dict[str, str]:
    """The text of each ``## NN_slug: Title`` section of docs/chapters.md, by slug."""
    sections = re.split(r"^## ", CHAPTERS_DOC.read_text(), flags=re.MULTILINE)[1:]
    return {section.split(":", 1)[0].strip(): section for section in sections}


def doc_signatures(section: str) -> dict[str, Signature]:
    """Name -> signature of every row of every ``| signature | ... |`` table in a section."""
    found: dict[str, Signature] = {}
    in_table = False
    for line in section.splitlines():
        if line.startswith("| signature |"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and (row := ROW.match(line)):
            name, signature = _parse_doc_signature(row[1])
            assert name not in found, f"docs/chapters.md documents {name} twice"
            found[name] = signature
    return found


def test_the_repository_never_points_outside_itself() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    offending = []
    for name in filter(None, tracked.decode().split("\0")):
        path = ROOT / name
        if path.is_file() and any(word.encode() in path.read_bytes() for word in OUTSIDE):
            offending.append(name)
    assert not offending, f"these tracked files point outside the repository ({' or '.join(OUTSIDE)}): {offending}"


def test_docs_have_one_section_per_registered_chapter() -> None:
    assert list(doc_sections()) == [c.slug for c in chapters()], (
        "docs/chapters.md needs one '## NN_slug: Title' section per chapter of course/chapters.yml, in order")


@pytest.mark.parametrize("chapter", chapters(), ids=lambda c: c.slug)
def test_every_graded_function_is_documented_with_its_real_signature(chapter: Chapter) -> None:
    documented = doc_signatures(doc_sections().get(chapter.slug, ""))
    in_code = code_signatures(chapter)
    missing = [name for name in chapter.functions if name not in in_code]
    assert not missing, f"{chapter.solution.name}: no solution cell defines {missing}"
    for name, signature in in_code.items():
        assert name in documented, f"docs/chapters.md, section {chapter.slug}: {name} has no row in a signature table"
        assert documented[name] == signature, (
            f"docs/chapters.md, section {chapter.slug}: {name} is documented as {documented[name]} "
            f"but {chapter.solution.relative_to(ROOT)} defines {signature}")
    extra = sorted(set(documented) - set(in_code))
    assert not extra, f"docs/chapters.md, section {chapter.slug}: {extra} are not graded names the solution defines"


@pytest.mark.parametrize("command", ["grade", "export"])
def test_every_documented_option_exists(command: str) -> None:
    from autograder.__main__ import main

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        main([command, "--help"])
    sections = re.split(r"^## `python -m autograder (\w+)", CLI_DOC.read_text(), flags=re.MULTILINE)
    section = dict(zip(sections[1::2], sections[2::2]))[command]
    documented = set(re.findall(r"`(--[a-z-]+)", section))
    assert {"grade": {"--out", "--jobs", "--db", "--scheduler"},
            "export": {"--lms", "--gradebook", "--map", "--out", "--match", "--late-penalty"}}[command] <= documented
    missing = sorted(option for option in documented if option not in help_text.getvalue())
    assert not missing, (f"docs/instructor-cli.md documents options that `python -m autograder {command}` lacks: "
                         f"{missing}")


@pytest.mark.parametrize("chapter", chapters(), ids=lambda c: c.slug)
def test_every_requirement_a_task_states_has_a_row_naming_its_test(chapter: Chapter) -> None:
    table = requirements.table_path(chapter)
    assert table.exists(), f"{table.relative_to(ROOT)} is missing: one | requirement | test | row per task sentence"
    missing = requirements.missing_rows(chapter)
    assert not missing, (
        f"{table.relative_to(ROOT)} has no row for these task sentences (quote each verbatim in the first column; "
        f"`python -m tests.course.requirements {chapter.slug}` prints the missing rows):\n" + "\n".join(missing))
    every_sentence = {s for text in requirements.task_texts(chapter).values() for s in requirements.sentences(text)}
    cells = requirements.test_cells(chapter)
    for row in requirements.read_table(table):
        assert row.requirement in every_sentence, (
            f"{table.relative_to(ROOT)}: this row quotes no sentence of a task cell (stale?): {row.requirement}")
        named = requirements.CELL_ID.findall(row.test)
        assert named and set(named) <= cells, (
            f"{table.relative_to(ROOT)}: the row for {row.requirement!r} must name its test cell in backticks, one of "
            f"{sorted(cells)}; it says {row.test!r}")


def test_task_sentences_are_cut_as_contributing_says() -> None:
    text = ("## 1. `f(x)` ⭐\n\nReturn a `float`. It must not warn (see `np.errstate`). Then\nsay so (e.g. `ValueError`).\n\n"
            "- **Masked.** A `-inf` score gets weight 0; it raises nothing.\n1. returns `x.max()`. Done!\n\n"
            "| a | b |\n|---|---|\n| must | x |\n\n```python\nreturn 1\n```\n\n$$x. Must$$\n\n"
            "<details><summary>Hint</summary>\n\nReturn it.\n</details>\n(Odd case.) Raise then.")
    assert requirements.sentences(text) == [
        "Return a `float`.", "It must not warn (see `np.errstate`).", "Then say so (e.g. `ValueError`).",
        "**Masked.** A `-inf` score gets weight 0; it raises nothing.", "returns `x.max()`.", "Done!",
        "(Odd case.)", "Raise then."]
    assert [s for s in requirements.sentences(text) if requirements.WORD.search(s)] == [
        "Return a `float`.", "It must not warn (see `np.errstate`).",
        "**Masked.** A `-inf` score gets weight 0; it raises nothing.", "returns `x.max()`.", "Raise then."]
