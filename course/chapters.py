"""The chapter registry: the one list of chapters (`course/chapters.yml`) as typed records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from course import EXERCISES, ROOT, SOLUTIONS

REGISTRY = Path(__file__).with_name("chapters.yml")


@dataclass(frozen=True)
class Chapter:
    """One chapter: its page ``book/<slug>.md``, its nbgrader source ``solutions/<slug>/<notebook>.ipynb``
    and its student notebook ``exercises/<slug>/<notebook>.ipynb``."""

    slug: str
    title: str
    notebook: str
    library: str
    functions: tuple[str, ...]
    learn: str
    optional: bool = False
    preload: tuple[str, ...] = ()  # what a grading kernel imports before student code (torch): its own cells' imports
    packages: tuple[str, ...] | None = None  # the only installed packages its kernel sees (None: all of them)
    forbid: tuple[str, ...] = ()  # its rules (`autograder.sandbox.rules.RULES`): library calls its task forbids

    @property
    def number(self) -> int:
        """The chapter's number, read from its slug (``08_gpu_sdpa`` -> 8)."""
        return int(self.slug.split("_", 1)[0])

    @property
    def page(self) -> Path:
        return ROOT / "book" / f"{self.slug}.md"

    @property
    def solution(self) -> Path:
        """The nbgrader source notebook (reference solutions and hidden tests)."""
        return ROOT / SOLUTIONS / self.slug / f"{self.notebook}.ipynb"

    @property
    def exercise(self) -> Path:
        """The generated student notebook."""
        return ROOT / EXERCISES / self.slug / f"{self.notebook}.ipynb"

    @property
    def heading(self) -> str:
        """``8. Profiling PyTorch's SDPA (optional)``: the title of the chapter's page."""
        return f"{self.number}. {self.title}" + (" (optional)" if self.optional else "")


def read_registry(path: Path = REGISTRY) -> tuple[Chapter, ...]:
    """Parse a registry file; raises ValueError on a malformed or out-of-order entry."""
    entries = yaml.safe_load(path.read_text()) or []
    chapters = tuple(Chapter(**{**entry, "functions": tuple(entry["functions"]),
                                "preload": tuple(entry.get("preload", ())),
                                "packages": None if entry.get("packages") is None else tuple(entry["packages"]),
                                "forbid": tuple(entry.get("forbid", ()))})
                     for entry in entries)
    slugs = [c.slug for c in chapters]
    if slugs != sorted(set(slugs)):
        raise ValueError(f"{path}: chapter slugs must be unique and in order, got {slugs}")
    return chapters


@cache
def chapters() -> tuple[Chapter, ...]:
    """Every chapter of the course, in order."""
    return read_registry()


def slugs() -> tuple[str, ...]:
    """Every chapter's slug (= assignment name), in order."""
    return tuple(c.slug for c in chapters())


def chapter(slug: str) -> Chapter:
    """The chapter with this slug; KeyError names the known ones."""
    for found in chapters():
        if found.slug == slug:
            return found
    raise KeyError(f"no chapter {slug!r}; the registry has {', '.join(slugs())}")
