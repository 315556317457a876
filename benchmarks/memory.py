"""Peak memory of a process tree while it runs, with pages shared between processes (forks of one warm process,
the same library mapped twice) not counted twice: the sums of PSS (a shared page split between its sharers) and
of USS (shared pages left out) over the tree, and of RSS (a shared page counted by every sharer) to compare.

    with PeakMemory() as peak:          # samples every descendant of this process, every 0.2 s, from a thread
        subprocess.run(...)
    print(peak.measured.pss / 2**20)    # MiB

Each sample reads every descendant's /proc/<pid>/smaps_rollup (through psutil, which finds descendants by their
parent pid: the kernel here has no /proc/<pid>/task/*/children); a process that vanishes or cannot be read
between the walk and the read is skipped. The sampling process itself is not counted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType

import psutil

MiB = 2**20


@dataclass(frozen=True)
class Memory:
    """Sums over a process tree, in bytes: of one sample, or each sum's peak over many (each peak may come from a
    different sample). pss: proportional set size, each shared page split between its sharers; uss: unique set
    size (Private_Clean + Private_Dirty), the pages only that process maps (the sum leaves shared pages out);
    rss: resident set size, a shared page counted once per process that maps it (overcounts forks: shown for
    comparison)."""

    pss: int = 0
    uss: int = 0
    rss: int = 0
    processes: int = 0  # the most processes seen in one sample

    def __or__(self, other: Memory) -> Memory:
        """Each field's maximum."""
        return Memory(max(self.pss, other.pss), max(self.uss, other.uss), max(self.rss, other.rss),
                      max(self.processes, other.processes))


def sample(root: psutil.Process) -> Memory:
    """One sample: the sums of PSS, USS and RSS over the descendants of ``root`` (not ``root`` itself)."""
    pss = uss = rss = processes = 0
    for process in root.children(recursive=True):
        try:
            info = process.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        pss, uss, rss, processes = pss + info.pss, uss + info.uss, rss + info.rss, processes + 1
    return Memory(pss, uss, rss, processes)


class PeakMemory:
    """Within a ``with`` block, samples this process's descendants every ``interval`` seconds from a background
    thread; ``measured`` holds the peaks so far."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.measured = Memory()
        self._root = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.measured |= sample(self._root)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
