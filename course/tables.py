"""The chapter tables of README.md and book/intro.md, and _toc.yml, as the registry renders them.

Tests compare these files with the registry; `python -m course new` inserts a new chapter's lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from course import ROOT
from course.chapters import Chapter

README = ROOT / "README.md"
INTRO = ROOT / "book" / "intro.md"
TOC = ROOT / "_toc.yml"
CHAPTER_FILE = re.compile(r"book/\d\d_\w+")  # a chapter's page in _toc.yml, as the registry's slugs name it


def _names(chapter: Chapter) -> str:
    return ", ".join(f"`{name}`" for name in chapter.functions)


def readme_row(chapter: Chapter) -> str:
    """``| 8 | Profiling PyTorch's SDPA (optional) | PyTorch | `attention_flops`, ... |``"""
    title = chapter.title + (" (optional)" if chapter.optional else "")
    return f"| {chapter.number} | {title} | {chapter.library} | {_names(chapter)} |"


def intro_row(chapter: Chapter) -> str:
    """``| [8. Profiling PyTorch's SDPA](08_gpu_sdpa) (optional) | what you learn | `names` |``"""
    link = f"[{chapter.number}. {chapter.title}]({chapter.slug})" + (" (optional)" if chapter.optional else "")
    return f"| {link} | {chapter.learn} | {_names(chapter)} |"


def chapter_rows(path: Path) -> list[str]:
    """The rows of a file's chapter table: lines that start with ``| N |`` or ``| [N.``."""
    return [line.rstrip() for line in path.read_text().splitlines() if re.match(r"\| (\d+ \||\[\d+\.)", line)]


def toc_files(path: Path = TOC) -> list[str]:
    """The chapter pages listed in _toc.yml, in order (``book/01_similarity``, ...); other pages (the set-up page,
    the references) are not chapters."""
    return [entry["file"] for part in yaml.safe_load(path.read_text())["parts"] for entry in part["chapters"]
            if CHAPTER_FILE.fullmatch(entry["file"])]


def insert_row(path: Path, row: str, rows: list[str], position: int) -> None:
    """Insert ``row`` into the table whose current rows are ``rows``, before row ``position``."""
    lines = path.read_text().splitlines(keepends=True)
    anchor = rows[position] if position < len(rows) else rows[-1]
    index = next(i for i, line in enumerate(lines) if line.rstrip() == anchor)
    lines.insert(index if position < len(rows) else index + 1, row + "\n")
    path.write_text("".join(lines))


def insert_toc_entry(slug: str, path: Path = TOC) -> None:
    """Add ``- file: book/<slug>`` to _toc.yml in slug order, keeping the file's own formatting."""
    lines = path.read_text().splitlines(keepends=True)
    entries = [i for i, line in enumerate(lines)
               if line.strip().startswith("- file: ") and CHAPTER_FILE.fullmatch(line.strip()[len("- file: "):])]
    later = [i for i in entries if lines[i].split("book/", 1)[1].strip() > slug]
    index = later[0] if later else entries[-1] + 1
    indent = lines[entries[-1]].split("-", 1)[0]
    lines.insert(index, f"{indent}- file: book/{slug}\n")
    path.write_text("".join(lines))
