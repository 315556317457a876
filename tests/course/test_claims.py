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

A *comparison* is stricter: a word that compares measurements (COMPARISONS: "faster", "flat",
"linearly", "quadratic", "n times more", "-fold", "memory-bound", "left of the ridge", ...) may
not be typed at all, since an `assert` can check less than the sentence says. A page generates it
from the data, with myst-nb's `glue` (a `{glue:text}` role, whose words do not count here) or in the
text a code cell prints; a build on another machine then says what that machine measured, or fails.
The `## You will learn` list and the summary count. Exempt: code, math, questions, published
figures with their source, and a sentence that says it states a model's prediction ("predicts",
"on paper") rather than a measurement. `typed_comparisons(path)` lists the sentences that break it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jupytext
import pytest

from course import ROOT
from course.chapters import chapters
from course.trends import faster, growth

# Quantities: a typed sentence that states one needs an assert (or is printed). Comparisons of
# measurements (COMPARISONS, below) may not be typed at all.
CLAIM_WORDS = ("peak", "ms", "µs", "MiB", "GiB")
_CLAIM = re.compile(r"(?<![\w-])(" + "|".join(re.escape(word) for word in CLAIM_WORDS) + r")(?![\w-])", re.I)
_ASSERT = re.compile(r"^\s*assert\b", re.M)
_SOURCE = re.compile(r"\]\(|\bpublished\b", re.I)
_DROPDOWN = re.compile(r"^(:{3,}|`{3,})\{dropdown\}.*?^\1\s*$", re.S | re.M)
_OBJECTIVES = re.compile(r"^## You will learn\n.*?(?=^## |\Z)", re.S | re.M)
_GLUE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
_NUMBER = r"(?:\d+(?:\.\d+)?|two|three|four|five|six|seven|eight|nine|ten|a hundred|a thousand)"
COMPARISONS = re.compile(
    r"(?<![\w-])(faster|slower|flat|flatter|linearly|linear (?:in|with)|quadratic(?:ally)?|"
    r"(?:grows?|growing|follows?|rises?) (?:like |as |with |in proportion to )?(?:the )?⟨math⟩|grows? (?:like|as)|"
    r"widens?|by a factor of|" + _NUMBER + r"[ -]fold|" + _NUMBER + r" times (?:more|less|fewer|larger|smaller|as)|"
    r"(?:memory|compute|bandwidth)-bound|(?:left|right|side) of (?:the|its|a) ridge|wins|beats)(?![\w-])", re.I)
_PREDICTION = re.compile(r"\bpredict|\bon paper\b", re.I)


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
        word = _CLAIM.search(re.sub(r"`[^`]*`|\$[^$]*\$", "", _GLUE.sub("", sentence)))
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


def _prose(markdown: str) -> list[str]:
    """The typed sentences of a Markdown cell, with code, math and glued values taken out."""
    text = re.sub(r"^\s*```.*?^\s*```", "", _DROPDOWN.sub("", markdown + "\n"), flags=re.S | re.M)
    return [re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "⟨math⟩", re.sub(r"`[^`]*`", " ", _GLUE.sub(" ", sentence)))
            for sentence in _sentences(text)]


def typed_comparisons(path: Path) -> list[Claim]:
    """The sentences of a MyST page (its prose, the objectives and summary included, and its figure
    captions) that type a comparison of measurements instead of generating it from the data."""
    found = []
    for index, cell in enumerate(jupytext.read(path).cells):
        if cell.cell_type == "markdown":
            texts = _prose(cell.source)
        else:
            caption = str(cell.metadata.get("mystnb", {}).get("figure", {}).get("caption", ""))
            texts = ["caption: " + text for text in _prose(caption)]
        for text in texts:
            word = COMPARISONS.search(text)
            if word and not _SOURCE.search(text) and not _PREDICTION.search(text) and not text.endswith("?"):
                found.append(Claim(index, word.group(1), " ".join(text.split())))
    return found


CHAPTER_PAGES = [ROOT / "book" / f"{found.slug}.md" for found in chapters()]


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda page: page.stem)
def test_every_measured_claim_is_printed_or_asserted(page: Path) -> None:
    unguarded = unguarded_claims(page)
    assert not unguarded, (
        f"{page.name}: {len(unguarded)} sentences interpret a measurement ('{unguarded[0].word}') but the "
        "first code cell after them asserts nothing. Print the sentence from the data (an f-string), or "
        "assert the claim in the next code cell, or move it into an answer dropdown (CONTRIBUTING.md, "
        "'Measured claims'):\n" + "\n".join(f"  cell {c.cell}: [{c.word}] {c.sentence[:160]}" for c in unguarded))


@pytest.mark.parametrize("page", [ROOT / "book" / "intro.md", *CHAPTER_PAGES], ids=lambda page: page.stem)
def test_no_comparison_of_measurements_is_typed(page: Path) -> None:
    typed = typed_comparisons(page)
    assert not typed, (
        f"{page.name}: {len(typed)} typed sentences compare measurements ('{typed[0].word}'). An assert may "
        "check less than the sentence says, and another machine may measure otherwise: glue the comparison "
        "from the data ({glue:text}`key`, myst_nb.glue) or print the sentence (CONTRIBUTING.md, "
        "'Measured claims'):\n" + "\n".join(f"  cell {c.cell}: [{c.word}] {c.sentence[:160]}" for c in typed))


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
    ("The tiled peak is 3 MiB here.", "print(tiled_mib)", ["peak"]),
    ("The tiled peak is 3 MiB here.", "assert tiled_mib < 4, 'tiled peak is not under 4 MiB'", []),
    ("The cache takes 12 MiB.", "x = 1", ["MiB"]),
    ("The cache takes {glue:text}`cache_mib` MiB.", "x = 1", ["MiB"]),
    (":::{dropdown} Answer\nIts peak is 3 MiB.\n:::", "x = 1", []),
    ("## You will learn\n\n- to measure a peak in MiB\n\n## Next", "x = 1", []),
    ("Dao et al. [report](https://arxiv.org/abs/2205.14135) a peak of 3 GiB.", "x = 1", []),
    ("The `MiB` option and $ms$ are code and math, not claims.", "x = 1", []),
])
def test_the_rule_flags_unguarded_claims_only(tmp_path: Path, prose: str, code: str, flagged: list[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose=prose, code=code))
    assert [claim.word for claim in unguarded_claims(page)] == flagged


def test_a_caption_claim_needs_an_assert_in_its_cell(tmp_path: Path) -> None:
    cell = "---\nmystnb:\n  figure:\n    caption: The tiled peak is 3 MiB.\n---\nplot()"
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose="Text.", code=cell))
    assert [claim.word for claim in unguarded_claims(page)] == ["peak"]
    page.write_text(_PAGE.format(prose="Text.", code=cell.replace("plot()", "assert peak < 4\nplot()")))
    assert unguarded_claims(page) == []


@pytest.mark.parametrize(("prose", "code", "flagged"), [
    # an assert does not license a typed comparison: the sentence can say more than the assert checks
    ("The tiled peak stays flat.", "assert tiled[-1] < 3 * tiled[0]", ["flat"]),
    ("It is 4 times more than the tiled one.", "x = 1", ["4 times more"]),
    ("Memory grows like $n^2$ here.", "x = 1", ["grows like ⟨math⟩"]),
    ("The decode point sits left of the ridge.", "x = 1", ["left of the ridge"]),
    ("## You will learn\n\n- why the tiled peak stays flat\n\n## Next", "x = 1", ["flat"]),
    ("## Summary\n\n- Chapter 2's peak grows quadratically.\n\n## Next", "x = 1", ["quadratically"]),
    ("Here the cache is {glue:text}`verdict` than recomputing.", "glue('verdict', 'faster')", []),
    ("The $n^2$ model predicts that each doubling costs four times as much.", "x = 1", []),
    ("Dao et al. [report](https://arxiv.org/abs/2205.14135) being 3 times faster.", "x = 1", []),
    ("Is it faster on a GPU?", "x = 1", []),
    ("Projected three times, by `nn.Linear` layers, it is a linear map.", "x = 1", []),
])
def test_a_typed_comparison_of_measurements_fails(tmp_path: Path, prose: str, code: str, flagged: list[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose=prose, code=code))
    assert [claim.word for claim in typed_comparisons(page)] == flagged


def test_a_typed_comparison_in_a_caption_fails_even_with_an_assert(tmp_path: Path) -> None:
    cell = "---\nmystnb:\n  figure:\n    caption: The tiled curve stays flat.\n---\nassert flat\nplot()"
    page = tmp_path / "page.md"
    page.write_text(_PAGE.format(prose="Text.", code=cell))
    assert [claim.word for claim in typed_comparisons(page)] == ["flat"]


@pytest.mark.parametrize(("sizes", "values", "words"), [
    # chapter 7's tiled peak, 1.90 -> 4.29 MiB for n = 256 -> 4096, is not flat
    ([256, 4096], [1.90, 4.29], "grew like n^0.29, far slower than linearly"),
    ([256, 512, 1024], [3.0, 3.0, 3.01], "stayed flat"),
    ([256, 512, 1024], [1.0, 2.0, 4.0], "grew like n^1.00, about linearly"),
    ([256, 512, 1024], [1.0, 4.0, 16.0], "grew like n^2.00, about quadratically"),
    ([256, 512, 1024], [1.0, 2.8, 8.0], "grew like n^1.50, between linearly and quadratically"),
])
def test_growth_words_match_the_numbers(sizes: list[int], values: list[float], words: str) -> None:
    assert growth(sizes, values) == words


def test_faster_compares_times_with_a_tolerance() -> None:
    assert (faster(1.0, 2.0), faster(2.0, 1.0), faster(1.0, 1.02)) == ("faster", "slower", "as fast")
