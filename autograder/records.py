"""The records the grader passes around: options, limits, assignment templates and tasks.

They live here, apart from the modules that make and use them (`autograder.grade`,
`autograder.assignments`, `autograder.gradebook`), so that no two of those import each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.submissions import STAGING_BYTES
from course import ROOT


@dataclass(frozen=True)
class Limits:
    """Resource limits of one kernel: bytes of address space, seconds of CPU time, bytes of any file it
    writes, processes (and threads) in its sandbox, bytes of its private /tmp, and bytes of all the files
    in its writable folder (the disk quota, `autograder.guards.DiskQuota`)."""

    memory_bytes: int = 3 * 2**30
    cpu_seconds: int = 600
    file_bytes: int = 64 * 2**20
    processes: int = 256
    tmp_bytes: int = 256 * 2**20
    disk_bytes: int = 512 * 2**20

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def key(self) -> str:
        """Part of each job's cache key: results graded under other limits are graded again."""
        return (f"{self.cpu_seconds}:{self.memory_bytes}:{self.file_bytes}:{self.processes}:{self.tmp_bytes}:"
                f"{self.disk_bytes}")


@dataclass(frozen=True)
class Options:
    """Everything `grade` needs; the CLI fills it from its arguments."""

    submissions: Path
    out: Path
    jobs: int
    db_url: str = ""
    source: Path = ROOT / "solutions"
    cell_timeout: int = 60
    submission_timeout: int = 600
    memory_bytes: int = 3 * 2**30
    file_bytes: int = 64 * 2**20
    processes: int = 256
    disk_bytes: int = 512 * 2**20
    unpacked_bytes: int = STAGING_BYTES  # what a zip of submissions may unpack in all
    isolate: bool = True
    progress: bool = True
    scheduler: str = ""  # a Dask scheduler's address: grade there (`autograder.cluster`) instead of locally
    similarity_threshold: float | None = None  # list pairs this similar (`autograder.similarity`); None: off
    assignments: tuple[str, ...] = ()  # grade only these (all when empty)
    students: tuple[str, ...] = ()  # grade only these students (all when empty)
    force: bool = False  # grade again what is stored

    @property
    def limits(self) -> Limits:
        return Limits(memory_bytes=self.memory_bytes, cpu_seconds=self.submission_timeout,
                      file_bytes=self.file_bytes, processes=self.processes, disk_bytes=self.disk_bytes)


@dataclass(frozen=True)
class Template:
    """An assignment generated into its own folder (``gradebook.db`` and ``release/<assignment>/``):
    what every grading job starts from."""

    assignment: str
    key: str
    folder: Path
    notebooks: tuple[str, ...]
    cells: tuple[tuple[str, str, float], ...]  # (notebook, grade_id, max points), notebook order
    preload_torch: bool

    @property
    def gradebook(self) -> Path:
        return self.folder / "gradebook.db"

    @property
    def released(self) -> Path:
        return self.folder / "release" / self.assignment

    @property
    def max_score(self) -> float:
        return sum(points for _, _, points in self.cells)


@dataclass
class Task:
    """One student's one assignment: what to grade (notebook name -> file) or why it cannot be."""

    student: str
    assignment: str
    notebooks: dict[str, str | None] = field(default_factory=dict)
    note: str = ""
    problem: str = ""
    key: str = ""
    lms_user_id: str = ""  # the Canvas user id a Canvas zip's file names carried ("" otherwise)
    late: bool = False  # Canvas marked the submission that counts as late
    missing: bool = False  # nothing handed in for this assignment: not graded, and not a failure of the run
