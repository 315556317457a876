"""Where a grading run's peak memory goes: `python -m autograder grade` on a small synthetic class
(`benchmarks.grading.make_class`), sampled every 0.2 s; at the sample whose sum of PSS is largest, each process's
role, PSS, USS and RSS (`benchmarks.memory`), then their sums by role.

    python -m benchmarks.memory_by_process [--students 2] [--jobs 2] [--assignments 01_similarity 03_multi_head 06_rope]

Roles, from the process tree: the grader; bubblewrap; the zygote sandbox's first process (``zygote-root``: it
imports what its preload sets share) and the zygote of each set it forks (``zygote``), or with one set the
root serves it itself; each kernel's monitor, init and the kernel (named by its one-time token); the process the
workers are forked from (``worker-forks``) and each worker.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from benchmarks.grading import make_class
from benchmarks.memory import MiB

Row = tuple[int, str, int, int, int]  # pid, role, pss, uss, rss
CHILD_ROLE = {"bwrap": "zygote-root", "zygote-root": "zygote", "zygote": "kernel-monitor",
              "kernel-monitor": "kernel-init"}


def _role(process: psutil.Process, parent_role: str) -> str:
    command, name = " ".join(process.cmdline()), process.name()
    if name.startswith("ag") and len(name) == 14:  # a kernel's one-time name (`autograder.sandbox.zygote`)
        return "kernel"
    if name == "bwrap":
        return "bwrap"
    if "autograder.sandbox.zygote" in command:
        return CHILD_ROLE.get(parent_role, "zygote")
    if "autograder.workers.forks" in command:
        return "worker" if parent_role == "worker-forks" else "worker-forks"
    if "autograder.workers.worker" in command:
        return "worker"
    return "grader" if " grade " in command else name


def snapshot(root: psutil.Process) -> list[Row]:
    """Every descendant of ``root``, parents before children, with its role and memory."""
    roles: dict[int, str] = {}
    rows = []
    for process in sorted(root.children(recursive=True), key=lambda p: p.pid):
        try:
            roles[process.pid] = _role(process, roles.get(process.ppid(), ""))
            memory = process.memory_full_info()
        except psutil.Error:
            continue
        rows.append((process.pid, roles[process.pid], memory.pss, memory.uss, memory.rss))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignments", nargs="+", default=["01_similarity", "03_multi_head", "06_rope"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memory-by-process-") as scratch:
        folder = Path(scratch)
        make_class(folder / "submissions", args.students, args.assignments)
        peak: list[Row] = []
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.wait(0.2):
                rows = snapshot(psutil.Process())
                if sum(row[2] for row in rows) > sum(row[2] for row in peak):
                    peak = rows

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder / "submissions"), "--out",
                        str(folder / "out"), "--jobs", str(args.jobs), "--quiet"], check=True)
        seconds = time.perf_counter() - started
        stop.set()
        sampler.join()
    print(f"wall {seconds:.1f} s; peak PSS sum {sum(row[2] for row in peak) / MiB:.0f} MiB; "
          f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print("| role | processes | PSS MiB | USS MiB | RSS MiB |\n|---|---|---|---|---|")
    for role in dict.fromkeys(row[1] for row in peak):
        mine = [row for row in peak if row[1] == role]
        print(f"| {role} | {len(mine)} | " + " | ".join(f"{sum(row[i] for row in mine) / MiB:.0f}" for i in (2, 3, 4))
              + " |")


if __name__ == "__main__":
    main()
