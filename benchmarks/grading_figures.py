"""The figures of one `python -m benchmarks.grading` run, as typed records and as JSON (``--json PATH`` writes
them, ``--compare OLD NEW`` reads two back), so that a run before a change and one after can be put side by side.

    Figures: the machine, its core count, --jobs, the autograder's checkout and commit, and one ClassFigures per
        class graded
    ClassFigures: the class (students x assignments), one Run per grading of it (plain nbgrader, warm, cold),
        the mean seconds per submission of each phase (mode -> assignment -> phase -> seconds) and the grade
        comparisons (Agreement)
    Run: the wall time, the peak memory (`benchmarks.memory.Memory`), the load average before and after and the
        CPU-seconds the whole machine was busy while it ran
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import psutil

from benchmarks.memory import Memory

SETUP = "nbgrader_setup"
PHASES = MappingProxyType({  # the keys of a stored result's timings, in order, and what each measures
    SETUP: "nbgrader's set-up, before the kernel",
    "fork": "fork from the assignment's warm process",
    "sandbox": "sandbox (namespaces, filesystem)",
    "sandbox_start": "sandbox start (bwrap to the kernel's first line)",
    "kernel_preload": "imports in the kernel",
    "ipykernel_start": "ipykernel start",
    "cells": "solution and given cells, in the kernel",
    "tests": "test cells, in the worker",
    "nbgrader_rest": "nbgrader's bookkeeping, kernel shutdown",
    "feedback": "feedback (tests hidden, HTML)",
})
LOADAVG = Path("/proc/loadavg")


@dataclass(frozen=True)
class Load:
    """The machine's load averages over 1, 5 and 15 minutes (/proc/loadavg)."""

    one: float
    five: float
    fifteen: float

    @classmethod
    def read(cls, path: Path = LOADAVG) -> Load:
        one, five, fifteen = (float(word) for word in path.read_text().split()[:3])
        return cls(one, five, fifteen)


def busy_seconds(times: NamedTuple | None = None) -> float:
    """The CPU-seconds all the machine's cores have been busy since it started: the user, nice, system, irq and
    softirq times of ``times``, `psutil.cpu_times()`'s record (this machine's now when None; idle, iowait and steal,
    the time the hypervisor ran others, left out)."""
    found = psutil.cpu_times() if times is None else times
    return sum(getattr(found, name) for name in ("user", "nice", "system", "irq", "softirq"))


@dataclass(frozen=True)
class Run:
    """One grading of a whole class: its wall time, its process tree's peak memory, the load around it and the
    CPU-seconds the whole machine was busy while it ran (``busy``: over ``seconds``, how many cores the run kept
    busy on average, its own processes and anything else; None in the figures of a run that did not measure it)."""

    mode: str  # plain (nbgrader), warm or cold (the autograder)
    seconds: float
    memory: Memory
    load_before: Load
    load_after: Load
    busy: float | None = None

    @property
    def cores_busy(self) -> float | None:
        """The cores busy on average while the run was timed."""
        return None if self.busy is None else self.busy / self.seconds


@dataclass(frozen=True)
class Agreement:
    """The grades of two runs compared row by row (student and assignment): how many rows were compared, the
    rows that differ (each described with both sides), and how many were left out as not comparable."""

    label: str  # e.g. "warm vs cold"
    compared: int
    differing: tuple[str, ...] = ()
    left_out: int = 0
    why_left_out: str = ""

    @property
    def agree(self) -> bool:
        return not self.differing


@dataclass(frozen=True)
class ClassFigures:
    """One class: every student hands in every assignment (half reference solutions, half blank notebooks)."""

    name: str  # "small" (several assignments) or "large" (one assignment, many students)
    students: int
    assignments: tuple[str, ...]
    runs: tuple[Run, ...]
    phases: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # mode -> assignment -> phase -> s
    agreements: tuple[Agreement, ...] = ()

    @property
    def submissions(self) -> int:
        return self.students * len(self.assignments)

    def run(self, mode: str) -> Run | None:
        return next((run for run in self.runs if run.mode == mode), None)

    def ratio(self, mode: str) -> float | None:
        """``mode``'s wall time over plain nbgrader's, or None when either did not run."""
        plain, run = self.run("plain"), self.run(mode)
        return run.seconds / plain.seconds if plain and run else None


@dataclass(frozen=True)
class Figures:
    """Everything one benchmark run measured."""

    machine: str  # `course.machine.describe_machine`
    cores: int
    jobs: int
    classes: tuple[ClassFigures, ...]
    code: str = ""  # the autograder timed: its checkout and commit (`benchmarks.grading_runs.describe_code`)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Figures:
        given = json.loads(text)
        return cls(given["machine"], given["cores"], given["jobs"],
                   tuple(_class_figures(figures) for figures in given["classes"]), given.get("code", ""))


def _class_figures(given: dict[str, Any]) -> ClassFigures:
    runs = tuple(Run(run["mode"], run["seconds"], Memory(**run["memory"]), Load(**run["load_before"]),
                     Load(**run["load_after"]), run.get("busy")) for run in given["runs"])
    agreements = tuple(Agreement(a["label"], a["compared"], tuple(a["differing"]), a["left_out"], a["why_left_out"])
                       for a in given.get("agreements", []))
    return ClassFigures(given["name"], given["students"], tuple(given["assignments"]), runs,
                        given.get("phases", {}), agreements)


def ordered_phases(present: Iterable[str]) -> list[str]:
    """The phases named in ``present``, once each: those of `PHASES` in its order, then any other (a phase a
    later autograder adds) by name."""
    found = set(present)
    return [key for key in PHASES if key in found] + sorted(found - PHASES.keys())


def to_verdict(phases: dict[str, float]) -> float:
    """The sum of the phases after nbgrader's set-up: from the kernel's fork (or launch) to the verdict."""
    return sum(seconds for key, seconds in phases.items() if key != SETUP)
