"""The guarded-claims rule, and its test on every chapter page: a book page may state a measured
claim only where the build checks it.

A *claim sentence* is a sentence of a page's Markdown that contains a claim word (CLAIM_WORDS:
words that interpret a measurement, such as "faster", "grows", "peak", "ms" or "MiB"). Each claim
sentence must be guarded: the first code cell after its Markdown cell contains an `assert`
statement (which checks the claim on the data, so the build fails when the data contradicts it).

Words inside `code`, `$math$` or a fenced code block do not count. A claim sentence needs no
guard when it is

- a question (it ends with "?"), in the answer of a "Check your understanding" question (a
  `{dropdown}` block), or in the `## You will learn` list (objectives, not results);
- a published figure, with its source in the same sentence: a Markdown link, or the word
  "published" (the number itself should come from `course.configs` where the page computes with it).

A figure's caption (`mystnb.figure.caption` of a code cell) that contains a claim word must be
guarded by an `assert` in that same cell. A sentence that a code cell prints (an f-string computed
from the data) is not Markdown and needs no guard: printing is the other way to follow the data.

`unguarded_claims(path)` lists the sentences of a page that break the rule; the test below runs it
on every registered page, and CONTRIBUTING.md states the rule for authors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jupytext
import pytest

from course import ROOT
from course.chapters import chapters

CLAIM_WORDS = ("faster", "slower", "speedup", "speed-up", "flat", "quadratic", "quadratically", "linearly",
               "grows", "peak", "ms", "µs", "MiB", "GiB", "memory-bound", "compute-bound", "bandwidth-bound")
_CLAIM = re.compile(r"(?<![\w-])(" + "|".join(re.escape(word) for word in CLAIM_WORDS) + r")(?![\w-])", re.I)
_ASSERT = re.compile(r"^\s*assert\b", re.M)
_SOURCE = re.compile(r"\]\(|\bpublished\b", re.I)
_DROPDOWN = re.compile(r"^(:{3,}|`{3,})\{dropdown\}.*?^\1\s*$", re.S | re.M)
_OBJECTIVES = re.compile(r"^## You will learn\n.*?(?=^## |\Z)", re.S | re.M)


@dataclass(frozen=True)
class Claim:
    """An unguarded claim sentence: where it is, the claim word found, and the sentence."""

    cell: int  # index of the page's cell (jupytext's reading of the MyST page)
    word: str
    sentence: str


def _sentences(markdown: str) -> list[str]:
    """The sentences of a Markdown text: headings, list items and paragraphs are split apart (their
    markers dropped), line breaks folded, and each block cut after ".", "!" or "?"."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:#|[-*] |\d+\. ))", markdown)
    found = []
    for block in blocks:
        text = " ".join(re.sub(r"^\s*(?:#+|[-*]|\d+\.)\s+", "", block).split())
        found += [part.strip() for part in re.split(r"(?<=[.!?])\s+(?=[A-Z*_`(\[])", text) if part.strip()]
    return found


def _claims(markdown: str) -> list[tuple[str, str]]:
    """(claim word, sentence) for each claim sentence of a Markdown cell that is not exempt."""
    text = _OBJECTIVES.sub("", _DROPDOWN.sub("", markdown + "\n"))
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)  # plain code blocks are not prose
    found = []
    for sentence in _sentences(text):
        word = _CLAIM.search(re.sub(r"`[^`]*`|\$[^$]*\$", "", sentence))
        if word and not _SOURCE.search(sentence) and not sentence.endswith("?"):
            found.append((word.group(1), sentence))
    return found


def unguarded_claims(path: Path) -> list[Claim]:
    """The claim sentences of a MyST page that the rule of this module's docstring finds unguarded."""
    cells = jupytext.read(path).cells
    unguarded = []
    for index, cell in enumerate(cells):
        source = cell.source
        if cell.cell_type == "markdown":
            following = next((c for c in cells[index + 1:] if c.cell_type == "code"), None)
            if following is not None and _ASSERT.search(following.source):
                continue
            unguarded += [Claim(index, word, sentence) for word, sentence in _claims(source)]
        elif cell.cell_type == "code":
            caption = str(cell.metadata.get("mystnb", {}).get("figure", {}).get("caption", ""))
            if not _ASSERT.search(source):
                unguarded += [Claim(index, word, "caption: " + sentence) for word, sentence in _claims(caption)]
    return unguarded


CHAPTER_PAGES = [ROOT / "book" / f"{found.slug}.md" for found in chapters()]


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda page: page.stem)
def test_every_measured_claim_is_printed_or_asserted(page: Path) -> None:
    unguarded = unguarded_claims(page)
    assert not unguarded, (
        f"{page.name}: {len(unguarded)} sentences interpret a measurement ('{unguarded[0].word}') but the "
        "first code cell after them asserts nothing. Print the sentence from the data (an f-string), or "
        "assert the claim in the next code cell, or move it into an answer dropdown (CONTRIBUTING.md, "
        "'Measured claims'):\n" + "\n".join(f"  cell {c.cell}: [{c.word}] {c.sentence[:160]}" for c in unguarded))


_PAGE = """---
jupytext:
  text_representation: {{extension: .md, format_name: myst}}
kernelspec: {{display_name: Python 3, language: python, name: python3}}
---
# A page

{prose}

```{{code-cell}} ipython3
{code}
```
"""


@pytest.mark.parametrize(("prose", "code", "flagged"), [
    ("The tiled version is faster here.", "print(tiled_ms, naive_ms)", ["faster"]),
    ("The tiled version is faster here.", "assert tiled_ms < naive_ms, 'tiled is not faster'", []),
    ("The cache takes 12 MiB.", "x = 1", ["MiB"]),
    ("Memory grows with n.", "x = 1", ["grows"]),
    (":::{dropdown} Answer\nIt grows quadratically.\n:::", "x = 1", []),
    ("## You will learn\n\n- why the cost grows quadratically\n\n## Next", "x = 1", []),
    ("Dao et al. [report](https://arxiv.org/abs/2205.14135) a 7.6x speedup.", "x = 1", []),
    ("The `flat` option and $ms$ are code and math, not claims.", "x = 1", []),
])
def test_the_rule_flags_unguarded_claims_only(tmp_path: Path, prose: str, code: str, flagged: list[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose=prose, code=code))
    assert [claim.word for claim in unguarded_claims(page)] == flagged


def test_a_caption_claim_needs_an_assert_in_its_cell(tmp_path: Path) -> None:
    cell = "---\nmystnb:\n  figure:\n    caption: The tiled curve stays flat.\n---\nplot()"
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose="Text.", code=cell))
    assert [claim.word for claim in unguarded_claims(page)] == ["flat"]
    page.write_text(_PAGE.format(prose="Text.", code=cell.replace("plot()", "assert flat\nplot()")))
    assert unguarded_claims(page) == []
