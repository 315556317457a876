"""`python -m benchmarks.grading`'s pure parts, without grading: the class it makes, its figures' JSON, the grade
comparisons, its tables and ``--compare``; one slow test grades a class of two students."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from autograder.records import GradeRow, Result, Status
from autograder.reports.grades_csv import write_grades
from benchmarks import grading
from benchmarks.grade_agreement import same_rows, same_scores
from benchmarks.grading_figures import Agreement, ClassFigures, Figures, Load, Run, busy_seconds
from benchmarks.grading_runs import describe_code, grade_rows, interpreter, make_class, measured, phase_means
from benchmarks.grading_tables import agreement_text, compare_text, grades_lines, phase_table, ratio_lines, run_table
from benchmarks.memory import MiB, Memory
from course import ROOT
from course.chapters import chapter


def _run(mode: str, seconds: float, pss_mib: int = 400, load: tuple[float, float] = (1.5, 1.75),
         busy: float | None = None) -> Run:
    return Run(mode, seconds, Memory(pss_mib * MiB, pss_mib * MiB // 2, 2 * pss_mib * MiB, 3),
               Load(load[0], 1.0, 0.5), Load(load[1], 1.0, 0.5), busy)


def _small(warm: float = 9.0, setup: float = 0.2) -> ClassFigures:
    phases = {"01_similarity": {"nbgrader_setup": setup, "fork": 0.01, "cells": 0.1, "tests": 0.2},
              "03_multi_head": {"nbgrader_setup": 0.3, "cells": 0.05, "tests": 0.25, "a_new_phase": 0.5}}
    return ClassFigures("small", 6, ("01_similarity", "03_multi_head"), (_run("plain", 90.0), _run("warm", warm)),
                        {"warm": phases}, (Agreement("warm vs cold", 12, ("student001 01_similarity: ...",)),))


def _large(students: int = 120, plain: bool = True) -> ClassFigures:
    runs = ((_run("plain", 400.0),) if plain else ()) + (_run("warm", 60.0, 900, (0.25, 1.9)),)
    return ClassFigures("large", students, ("01_similarity",), runs)


def _row(student: str, score: float, reason: str = "", status: Status = Status.GRADED) -> GradeRow:
    return GradeRow(student, "01_similarity", score, 10.0, status, reason)


def test_the_class_has_a_reference_and_a_blank_notebook_per_student_and_assignment(tmp_path: Path) -> None:
    make_class(tmp_path, 3, ["01_similarity", "03_multi_head"])
    for assignment in ("01_similarity", "03_multi_head"):
        exercise = chapter(assignment).exercise
        found = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.glob(f"*/{assignment}/*.ipynb"))
        assert found == [f"student{i:03d}/{assignment}/{exercise.name}" for i in range(3)]
        blank = exercise.read_text()
        reference, odd, even = (tmp_path / f"student{i:03d}" / assignment / exercise.name for i in range(3))
        assert odd.read_text() == blank, "odd students hand in the blank exercise"
        assert reference.read_text() == even.read_text() != blank, "even students hand in the reference"


def test_the_figures_read_back_from_json_as_written() -> None:
    busy = replace(_large(plain=False), runs=(_run("warm", 60.0, busy=105.0),))
    figures = Figures("CPU: test", 2, 2, (_small(), busy), "a checkout at 490de18")
    text = figures.to_json()
    json.loads(text)  # plain JSON: no NaN, no objects
    assert Figures.from_json(text) == figures
    older = json.loads(text)
    for found in older["classes"]:
        for run in found["runs"]:
            del run["busy"]  # a file written before the busy CPU-seconds were measured
    assert Figures.from_json(json.dumps(older)).classes[1].run("warm").busy is None


def test_the_busy_cpu_seconds_leave_out_idle_iowait_and_steal() -> None:
    # psutil's record of this platform: idle, iowait and steal (the hypervisor running others) are not this
    # machine's work; guest time is inside user time already.
    times = type(psutil.cpu_times())(user=100.0, nice=20.0, system=30.0, idle=4000.0, iowait=50.0, irq=6.0,
                                     softirq=4.0, steal=700.0, guest=0.0, guest_nice=0.0)
    assert busy_seconds(times) == pytest.approx(160.0)
    assert 0 < busy_seconds() <= busy_seconds()  # this machine's, counted up since it started


def test_the_load_is_read_from_proc_loadavg(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("1.63 2.01 2.50 3/171 2748\n")
    assert Load.read(tmp_path / "loadavg") == Load(1.63, 2.01, 2.5)
    assert Load.read().one >= 0  # this machine's


def test_the_ratio_needs_plain_nbgrader() -> None:
    assert _small(warm=9.0).ratio("warm") == pytest.approx(0.1)
    assert _large(plain=False).ratio("warm") is None
    assert _small().ratio("cold") is None


def test_warm_and_cold_agree_when_every_field_of_every_row_does() -> None:
    rows = [_row("a", 10), _row("b", 0, "cell timed out"), _row("c", 0, "no submission", Status.FAILED)]
    agreement = same_rows("warm", rows, "cold", list(rows))
    assert agreement.agree and agreement.compared == 3
    assert "the same on all 3 rows" in agreement_text(agreement)


def test_rows_that_differ_are_listed_with_both_sides() -> None:
    warm = [_row("a", 10), _row("b", 0, "cell timed out"), _row("c", 5)]
    cold = [_row("a", 9), _row("b", 0, "a different note"), _row("d", 5)]
    agreement = same_rows("warm", warm, "cold", cold)
    assert agreement.compared == 4
    assert agreement.differing == ("a 01_similarity: warm 10/10; cold 9/10",
                                   "b 01_similarity: warm 0/10 (cell timed out); cold 0/10 (a different note)",
                                   "c 01_similarity: warm 5/10; cold: no row",
                                   "d 01_similarity: warm: no row; cold 5/10")
    text = agreement_text(agreement)
    assert text.startswith("grades, warm vs cold: 4 of 4 rows differ") and "  - a 01_similarity: warm 10/10" in text


def test_scores_are_compared_with_plain_nbgrader_where_both_graded() -> None:
    rows = [_row("a", 10), _row("b", 0), _row("c", 0, "the kernel died", Status.FAILED)]
    plain = {("a", "01_similarity"): (10.0, 10.0), ("b", "01_similarity"): (0.0, 10.0),
             ("c", "01_similarity"): (0.0, 10.0), ("e", "01_similarity"): (3.0, 10.0)}
    agreement = same_scores("warm", rows, plain)
    assert agreement.agree and agreement.compared == 2 and agreement.left_out == 2
    assert "2 left out: not graded by the autograder" in agreement_text(agreement)
    differing = same_scores("cold", rows, {**plain, ("b", "01_similarity"): (4.0, 10.0)})
    assert differing.differing == ("b 01_similarity: cold 0/10; plain nbgrader 4/10",)


def test_grade_rows_reads_the_grades_csv(tmp_path: Path) -> None:
    rows = [_row("a", 10), _row("b", 0, "=cell timed out")]
    write_grades(tmp_path / "grades.csv", rows)
    assert grade_rows(tmp_path) == rows


def test_phase_means_average_each_phase_over_the_results_that_have_it(tmp_path: Path) -> None:
    timings = [{"feedback": 0.3, "nbgrader_setup": 0.1, "cells": 0.2}, {"nbgrader_setup": 0.3, "cells": 0.4, "z": 1.0},
               {}]
    for i, phases in enumerate(timings):
        result = Result(Status.GRADED, timings=phases)
        path = tmp_path / ".state" / f"s{i}" / "01_similarity.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"result": result.to_dict(stored=True)}))
    means = phase_means(tmp_path, ["01_similarity", "06_rope"])
    assert list(means) == ["01_similarity"], "an assignment without timings is left out"
    assert list(means["01_similarity"]) == ["nbgrader_setup", "cells", "feedback", "z"]
    assert means["01_similarity"] == pytest.approx({"nbgrader_setup": 0.2, "cells": 0.3, "feedback": 0.3, "z": 1.0})


def test_the_run_table_has_each_run_its_ratio_memory_and_load() -> None:
    table = run_table(_small(), jobs=2, cores=2)
    assert table.splitlines()[0] == "|  | plain nbgrader, sequential | autograder warm, --jobs 2 |"
    assert "| ratio to plain nbgrader | 1.000 | 0.100 (goal ≤ 0.10) |" in table
    assert "| peak PSS, sum over processes | 400 MiB | 400 MiB (goal < 1024) |" in table
    assert "| load average (1 min) before → after, 2 cores | 1.50 → 1.75 | 1.50 → 1.75 |" in table
    assert "| cores busy on average (the whole machine) | – | – |" in table, "not measured: a file of an older run"
    measured_busy = run_table(replace(_small(), runs=(_run("plain", 90.0, busy=92.0), _run("warm", 9.0, busy=16.2))),
                              jobs=2, cores=2)
    assert "| cores busy on average (the whole machine) | 1.02 of 2 (92.0 CPU-s) | 1.80 of 2 (16.2 CPU-s) |" in (
        measured_busy)
    alone = run_table(_large(plain=False), jobs=2, cores=2)
    assert "| ratio to plain nbgrader | – |" in alone and "| per submission | 0.50 s |" in alone


def test_the_phase_table_keeps_the_phase_order_and_sums_after_the_setup() -> None:
    figures = _small()
    lines = phase_table("warm", figures.phases["warm"], figures.assignments).splitlines()
    assert lines[0] == "| per submission, warm (mean s) | 01_similarity | 03_multi_head |"
    labels = [line.split(" | ")[0].lstrip("| ") for line in lines[2:]]
    assert labels == ["nbgrader's set-up, before the kernel", "fork from the assignment's warm process",
                      "solution and given cells, in the kernel", "test cells, in the worker", "a_new_phase",
                      "**fork to verdict** (all but the set-up)"]
    assert lines[3] == "| fork from the assignment's warm process | 0.010 | – |"
    assert lines[-1] == "| **fork to verdict** (all but the set-up) | 0.310 | 0.800 |"


def test_the_ratios_name_the_goal_the_load_and_the_cores() -> None:
    alone = replace(_small(), runs=(_run("warm", 9.0),))
    lines = ratio_lines(Figures("CPU", 2, 2, (_small(), _large(300), _large(120, plain=False), alone))).splitlines()
    assert lines[0] == ("small class (6 x 2 = 12), warm: 0.100 of plain nbgrader's wall time (9.0 s against 90.0 s), "
                        "goal ≤ 0.10; load warm 1.50 → 1.75, plain 1.50 → 1.75; 2 cores, --jobs 2")
    assert "large class (300 x 1 = 300), warm: 0.150 of plain" in lines[1] and "goal < 120 s" in lines[1]
    assert lines[2] == "large class (120 x 1 = 120), warm: 60.0 s (plain nbgrader not run); load warm 0.25 → 1.90; " \
                       "2 cores, --jobs 2"
    assert lines[3] == "small class (6 x 2 = 12), warm: 9.0 s (plain nbgrader not run); load warm 1.50 → 1.75; " \
                       "2 cores, --jobs 2", "no goal for a ratio that was not measured"
    busy = replace(_small(), runs=(_run("warm", 9.0, busy=16.2),))
    assert ratio_lines(Figures("CPU", 2, 2, (busy,))) == (
        "small class (6 x 2 = 12), warm: 9.0 s (plain nbgrader not run); load warm 1.50 → 1.75; 1.80 cores busy on "
        "average; 2 cores, --jobs 2")


def test_compare_puts_two_runs_side_by_side() -> None:
    old = Figures("CPU: old\nno CUDA device", 2, 2, (_small(warm=18.0, setup=0.2), _large(120)), "main at 490de18")
    new = Figures("CPU: new", 2, 2, (_small(warm=9.0, setup=0.05), _large(300, plain=False)), "bench at eaf9a50")
    text = compare_text(old, new)
    assert text.startswith("before: main at 490de18; CPU: old\nafter: bench at eaf9a50; CPU: new\n")
    assert "| **fork to verdict** (all but the set-up) | 0.310 → 0.310 | 0.800 → 0.800 |" in text
    assert "| wall time (s) | 90.0 → 90.0 | 18.0 → 9.0 |" in text
    assert "| ratio to plain nbgrader | 1.000 → 1.000 | 0.200 → 0.100 |" in text
    assert "| nbgrader's set-up, before the kernel | 0.200 → 0.050 | 0.300 → 0.300 |" in text
    assert "| fork from the assignment's warm process | 0.010 → 0.010 | – → – |" in text
    assert "large class, before → after (not the same class: 120 submissions before, 300 after)" in text
    assert "| ratio to plain nbgrader | 1.000 → – | 0.150 → – |" in text
    only = compare_text(old, Figures("CPU", 2, 2, (_small(),)))
    assert only.endswith("graded in only one of the two runs: large")
    busy = Figures("CPU", 2, 2, (replace(_small(), runs=(_run("plain", 90.0), _run("warm", 9.0, busy=16.2))),))
    assert "| cores busy on average | – → – | – → 1.80 |" in compare_text(old, busy), "not measured before: –"


def test_compare_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.json").write_text(Figures("CPU", 2, 2, (_small(warm=18.0),)).to_json())
    (tmp_path / "new.json").write_text(Figures("CPU", 2, 2, (_small(),)).to_json())
    grading.main(["--compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    assert "| wall time (s) | 90.0 → 90.0 | 18.0 → 9.0 |" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_class_of_two_students_is_graded_and_its_figures_written(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    grading.main(["--classes", "small", "--students", "2", "--assignments", "01_similarity", "--modes", "warm",
                  "--json", str(tmp_path / "figures.json")])
    printed = capsys.readouterr().out
    figures = Figures.from_json((tmp_path / "figures.json").read_text())
    (found,) = figures.classes
    assert [run.mode for run in found.runs] == ["plain", "warm"] and all(run.seconds > 0 for run in found.runs)
    assert all(run.memory.pss > 0 for run in found.runs)
    assert {"nbgrader_setup", "cells", "tests", "feedback"} <= found.phases["warm"]["01_similarity"].keys()
    (plain,) = found.agreements
    assert (plain.label, plain.compared, plain.differing) == ("warm vs plain nbgrader", 2, ())
    assert "grades, warm vs plain nbgrader: the same on all 2 rows compared" in printed
    assert "small class (2 x 1 = 2), warm: " in printed


def test_a_run_is_timed_with_nothing_sampling_it_and_its_memory_read_in_a_run_before(tmp_path: Path) -> None:
    calls: list[tuple[Path, bool]] = []

    def spin(seconds: float) -> str:
        """A child's code that holds 64 MiB and keeps a core busy for ``seconds`` of its CPU time."""
        return f"import time; b = bytearray(64 << 20)\nwhile time.process_time() < {seconds}: pass"

    def work(folder: Path) -> None:
        folder.mkdir()
        (folder / "made").write_bytes(bytes(1 << 20))
        sampled = any(thread.name == "peak-memory" for thread in threading.enumerate())
        calls.append((folder, sampled))
        subprocess.run([sys.executable, "-c", spin(0.6 if sampled else 0.2)], check=True)

    run = measured("warm", work, tmp_path / "warm")
    assert calls == [(tmp_path / "warm-memory", True), (tmp_path / "warm", False)], (
        f"the sampled run comes first, in a folder of its own, the timed one last, unsampled: {calls}")
    assert run.mode == "warm" and 0 < run.seconds < 5
    # The timed run's child was busy for 0.2 CPU-s; no machine's cores are busier than all of them all the time (a
    # count that took the sampled run's 0.6 CPU-s in too would be, unless the timed run was slowed three-fold).
    assert 0.18 <= run.busy <= (os.cpu_count() or 1) * run.seconds + 0.05, (
        f"the machine was busy {run.busy:.2f} CPU-s in the timed run of {run.seconds:.2f} s: its child alone was "
        "busy 0.2 CPU-s")
    assert run.memory.uss >= 64 * MiB, "the peak memory is the sampled run's (its child held 64 MiB)"
    assert not (tmp_path / "warm-memory").exists() and (tmp_path / "warm" / "made").is_file(), (
        "the folder holds the timed run's output, the sampled run's is removed")


def test_what_a_run_prepares_is_done_before_and_neither_timed_nor_sampled(tmp_path: Path) -> None:
    calls: list[tuple[str, Path, bool]] = []
    prepared: dict[Path, float] = {}  # when each folder's preparation ended (time.perf_counter, as the run's clock)
    worked: dict[Path, float] = {}  # when each folder's run ended

    def sampling() -> bool:
        return any(thread.name == "peak-memory" for thread in threading.enumerate())

    def prepare(folder: Path) -> None:
        folder.mkdir()
        calls.append(("prepare", folder, sampling()))
        prepared[folder] = time.perf_counter()

    def work(folder: Path) -> None:
        assert folder.is_dir(), f"{folder} was not prepared before the run"
        calls.append(("work", folder, sampling()))
        worked[folder] = time.perf_counter()

    run = measured("plain", work, tmp_path / "plain", prepare)
    memory, timed = tmp_path / "plain-memory", tmp_path / "plain"
    assert calls == [("prepare", memory, False), ("prepare", timed, False), ("work", memory, True),
                     ("work", timed, False)], f"each folder prepared first, with nothing sampling it: {calls}"
    # Timed from before the preparation, the run would take longer than from the preparation's end to its own end.
    since_prepared = worked[timed] - prepared[timed]
    assert run.seconds <= since_prepared, (
        f"the timed run took {run.seconds:.6f} s, more than the {since_prepared:.6f} s from the end of its folder's "
        "preparation to the end of the run: the preparation was timed with it")


def test_the_grades_line_says_which_comparisons_agree() -> None:
    plain = Agreement("warm vs plain nbgrader", 12, left_out=1, why_left_out="not graded")
    figures = Figures("CPU", 2, 2, (replace(_small(), agreements=(*_small().agreements, plain)), _large()))
    assert grades_lines(figures) == ("small class grades: warm vs cold DIFFER on 1 of 12 rows; "
                                     "warm vs plain nbgrader the same of 12 rows")


def test_the_code_timed_is_this_checkout_or_another_with_its_own_environment(tmp_path: Path) -> None:
    assert interpreter(ROOT) == sys.executable
    assert interpreter(tmp_path) == str(tmp_path / ".venv" / "bin" / "python")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    assert describe_code(ROOT).startswith(f"{ROOT.resolve()} at {commit}")
    assert describe_code(tmp_path) == f"{tmp_path.resolve()} at no git commit"
    with pytest.raises(SystemExit):
        grading.main(["--checkout", str(tmp_path)])  # a checkout without its .venv is refused before any grading
