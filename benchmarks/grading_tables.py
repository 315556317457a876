"""What `python -m benchmarks.grading` prints, made from its figures (`benchmarks.grading_figures`) alone: for each
class a Markdown table of its runs and one of the mean seconds per phase per submission, the grade comparisons,
the ratios with the load and the core count beside them, and (``--compare``) two runs' figures side by side."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.grading_figures import PHASES, Agreement, ClassFigures, Figures, Load, Run, ordered_phases, \
    to_verdict
from benchmarks.memory import MiB

RATIO_GOAL = 0.10  # warm autograder / plain nbgrader on 2 idle cores, for the class of several assignments (issue 39)
PSS_GOAL = 1024 * MiB  # peak PSS of a --jobs 2 run
LARGE_GOAL = (300, "01_similarity", 120.0)  # students of one assignment graded warm on 2 cores within seconds
TITLES = {"plain": "plain nbgrader, sequential", "warm": "autograder warm", "cold": "autograder --cold"}
MISSING = "–"


def describe_class(figures: ClassFigures) -> str:
    return (f"{figures.name} class: {figures.students} students x {len(figures.assignments)} assignments "
            f"({', '.join(figures.assignments)}) = {figures.submissions} submissions, half reference, half blank")


def _load(run: Run) -> str:
    return f"{run.load_before.one:.2f} → {run.load_after.one:.2f}"


def _busy(run: Run, cores: int) -> str:
    """How many of the cores were busy on average while the run was timed, and the busy CPU-seconds behind it."""
    if run.cores_busy is None:
        return MISSING
    return f"{run.cores_busy:.2f} of {cores} ({run.busy:.1f} CPU-s)"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def run_table(figures: ClassFigures, jobs: int, cores: int) -> str:
    """One column per run: wall time, per submission, ratio to plain nbgrader, peak memory, load average, the cores
    busy."""
    def ratio(run: Run) -> str:
        value = figures.ratio(run.mode)
        goal = f" (goal ≤ {RATIO_GOAL:.2f})" if run.mode == "warm" and figures.name == "small" else ""
        return MISSING if value is None else f"{value:.3f}{goal}"

    def pss(run: Run) -> str:
        goal = f" (goal < {PSS_GOAL / MiB:.0f})" if run.mode != "plain" and jobs == 2 else ""
        return f"{run.memory.pss / MiB:.0f} MiB{goal}"

    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("wall time", lambda run: f"{run.seconds:.1f} s"),
        ("per submission", lambda run: f"{run.seconds / figures.submissions:.2f} s"),
        ("ratio to plain nbgrader", ratio),
        ("peak PSS, sum over processes", pss),
        ("peak USS, sum", lambda run: f"{run.memory.uss / MiB:.0f} MiB"),
        ("peak RSS, sum (shared pages counted per process)", lambda run: f"{run.memory.rss / MiB:.0f} MiB"),
        ("most processes at once", lambda run: str(run.memory.processes)),
        (f"load average (1 min) before → after, {cores} cores", _load),
        ("cores busy on average (the whole machine)", lambda run: _busy(run, cores))]
    header = [""] + [TITLES[run.mode] + ("" if run.mode == "plain" else f", --jobs {jobs}") for run in figures.runs]
    return _markdown(header, [[label, *(cell(run) for run in figures.runs)] for label, cell in rows])


def phase_table(mode: str, means: dict[str, dict[str, float]], assignments: tuple[str, ...]) -> str:
    """The mean seconds per submission of each phase, by assignment, and their sum after nbgrader's set-up."""
    keys = ordered_phases(key for phases in means.values() for key in phases)
    start = "fork" if mode == "warm" else "launch"

    def cell(assignment: str, key: str | None) -> str:
        value = _phase(means, assignment, key)
        return MISSING if value is None else f"{value:.3f}"

    rows = [[PHASES.get(key, key), *(cell(a, key) for a in assignments)] for key in keys]
    rows.append([f"**{start} to verdict** (all but the set-up)", *(cell(a, None) for a in assignments)])
    return _markdown([f"per submission, {mode} (mean s)", *assignments], rows)


def _phase(means: dict[str, dict[str, float]], assignment: str, key: str | None) -> float | None:
    """An assignment's mean seconds in phase ``key`` (None: `to_verdict`), or None when it has none."""
    phases = means.get(assignment)
    if phases is None or (key is not None and key not in phases):
        return None
    return to_verdict(phases) if key is None else phases[key]


def agreement_text(agreement: Agreement) -> str:
    """One line when the grades agree, else a line and one per differing row."""
    left_out = f" ({agreement.left_out} left out: {agreement.why_left_out})" if agreement.left_out else ""
    if agreement.agree:
        return f"grades, {agreement.label}: the same on all {agreement.compared} rows compared{left_out}"
    return "\n".join([f"grades, {agreement.label}: {len(agreement.differing)} of {agreement.compared} rows "
                      f"differ{left_out}", *(f"  - {row}" for row in agreement.differing)])


def ratio_lines(figures: Figures) -> str:
    """One line per autograder run of each class: its ratio to plain nbgrader (or its wall time alone), the goal
    where the issue sets one, the load average before and after each run it uses, the cores it kept busy (where
    measured), and the core count."""
    lines = []
    for found in figures.classes:
        plain = found.run("plain")
        for run in found.runs:
            if run.mode == "plain":
                continue
            ratio = found.ratio(run.mode)
            figure = (f"{ratio:.3f} of plain nbgrader's wall time ({run.seconds:.1f} s against {plain.seconds:.1f} s)"
                      if plain and ratio is not None else f"{run.seconds:.1f} s (plain nbgrader not run)")
            goal = ""
            if run.mode == "warm" and found.name == "small" and ratio is not None:
                goal = f", goal ≤ {RATIO_GOAL:.2f}"
            elif run.mode == "warm" and (found.students, found.assignments) == (LARGE_GOAL[0], LARGE_GOAL[1:2]):
                goal = f", goal < {LARGE_GOAL[2]:.0f} s"
            load = f"load {run.mode} {_load(run)}" + (f", plain {_load(plain)}" if plain else "")
            if run.cores_busy is not None:
                load += f"; {run.cores_busy:.2f} cores busy on average"
            lines.append(f"{found.name} class ({found.students} x {len(found.assignments)} = {found.submissions}), "
                         f"{run.mode}: {figure}{goal}; {load}; {figures.cores} cores, --jobs {figures.jobs}")
    return "\n".join(lines)


def grades_lines(figures: Figures) -> str:
    """For each class, one line: whether each comparison of its grades agreed."""
    return "\n".join(f"{found.name} class grades: " + "; ".join(
        f"{a.label} {'the same' if a.agree else f'DIFFER on {len(a.differing)}'} of {a.compared} rows"
        for a in found.agreements) for found in figures.classes if found.agreements)


def _change(old: float | None, new: float | None, form: str) -> str:
    shown = [MISSING if value is None else format(value, form) for value in (old, new)]
    return f"{shown[0]} → {shown[1]}"


def _load_change(old: Run | None, new: Run | None) -> str:
    def one(load: Load | None) -> float | None:
        return None if load is None else load.one
    return (f"{_change(one(old and old.load_before), one(new and new.load_before), '.2f')} at start; "
            f"{_change(one(old and old.load_after), one(new and new.load_after), '.2f')} at end")


def compare_class(old: ClassFigures, new: ClassFigures, cores: tuple[int, int]) -> str:
    """Two gradings of a class side by side (before → after): the runs, then each mode's phases."""
    modes = [mode for mode in TITLES if old.run(mode) or new.run(mode)]
    sizes = "" if (old.students, old.assignments) == (new.students, new.assignments) else \
        f" (not the same class: {old.submissions} submissions before, {new.submissions} after)"

    def seconds(figures: ClassFigures, mode: str) -> float | None:
        run = figures.run(mode)
        return run and run.seconds

    def pss(figures: ClassFigures, mode: str) -> float | None:
        run = figures.run(mode)
        return run and run.memory.pss / MiB

    def busy(figures: ClassFigures, mode: str) -> float | None:
        run = figures.run(mode)
        return run and run.cores_busy

    rows = [["wall time (s)", *(_change(seconds(old, m), seconds(new, m), ".1f") for m in modes)],
            ["ratio to plain nbgrader", *(_change(old.ratio(m), new.ratio(m), ".3f") for m in modes)],
            ["peak PSS (MiB)", *(_change(pss(old, m), pss(new, m), ".0f") for m in modes)],
            ["cores busy on average", *(_change(busy(old, m), busy(new, m), ".2f") for m in modes)],
            [f"load average (1 min), cores {cores[0]} → {cores[1]}",
             *(_load_change(old.run(m), new.run(m)) for m in modes)]]
    parts = [f"{new.name} class, before → after{sizes}",
             _markdown([f"{new.name} class", *(TITLES[m] for m in modes)], rows)]
    assignments = list(dict.fromkeys([*old.assignments, *new.assignments]))
    parts += [_compare_phases(mode, old.phases.get(mode, {}), new.phases.get(mode, {}), assignments)
              for mode in modes if old.phases.get(mode) or new.phases.get(mode)]
    return "\n\n".join(parts)


def _compare_phases(mode: str, before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
                    assignments: list[str]) -> str:
    """One mode's mean seconds per phase per submission, before → after, for the assignments either run has."""
    shown = [a for a in assignments if a in before or a in after]
    keys = ordered_phases(key for means in (before, after) for phases in means.values() for key in phases)
    start = "fork" if mode == "warm" else "launch"
    rows = [[label, *(_change(_phase(before, a, key), _phase(after, a, key), ".3f") for a in shown)]
            for label, key in [*((PHASES.get(key, key), key) for key in keys),
                               (f"**{start} to verdict** (all but the set-up)", None)]]
    return _markdown([f"per submission, {mode} (mean s)", *shown], rows)


def compare_text(old: Figures, new: Figures) -> str:
    """The code and machine of each run, then every class that both graded, side by side; a class only one of
    them graded is named."""
    olds = {found.name: found for found in old.classes}
    parts = [f"before: {old.code or 'autograder not named'}; {old.machine.splitlines()[0]}\n"
             f"after: {new.code or 'autograder not named'}; {new.machine.splitlines()[0]}"]
    parts += [compare_class(olds[found.name], found, (old.cores, new.cores)) for found in new.classes
             if found.name in olds]
    alone = sorted(olds.keys() ^ {found.name for found in new.classes})
    if alone:
        parts.append(f"graded in only one of the two runs: {', '.join(alone)}")
    return "\n\n".join(parts)
