"""Shared pytest set-up: OpenMP threads that sleep when idle, each xdist worker's share of the cores, the fixtures
that several test files use (the stand-in kernel, the fixture course's templates), the files' order (the longest
first), the wrong-answer bank's size reported at the end of every run, and a quick end to each process."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

# Test cells run here and the student's code in another process, each waiting on the other: OpenMP threads
# that spin while they wait would take the cores from the process that works (as autograder.workers.pool does).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Under xdist each worker, and every process it starts (the stand-in kernel, the book's kernels, a grader and its
# kernels: `autograder.sandbox.bwrap.environment` passes these on), computes on its share of the cores, as the
# grader's own workers do (autograder.workers.pool): torch's and the BLAS libraries' pools hold cores // workers
# threads. Two workers on two cores each running two threads oversubscribe them: `make test-fast` took 63-68 s against
# 59-60 s with the share (two paired runs on 2 cores).
# Set before anything here imports torch or numpy; whoever runs the tests with one of them set keeps what they set.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
CORE_SHARE = max(1, len(os.sched_getaffinity(0)) // WORKERS)
THREAD_POOLS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SHARING = WORKERS > 1 and not any(variable in os.environ for variable in THREAD_POOLS)
if SHARING:
    os.environ.update(dict.fromkeys(THREAD_POOLS, str(CORE_SHARE)))

import pytest  # noqa: E402

from tests import bank  # noqa: E402
from tests.grading_helpers import ToyClass, released_notebooks  # noqa: E402
from tests.stand_in import StandIn  # noqa: E402


# `make test` sends each file whole to a free worker (--dist loadfile), in the order the files are collected
# (pyproject.toml's --no-loadscope-reorder keeps that order; xdist's own would put the files with the most tests
# first, and the files of a few long tests, such as test_warm_cold.py, last). These files hold the most work, longest
# first (`pytest --durations` of a whole run on 2 cores): once they are out, what is left is short files that keep
# both workers busy to the end, instead of one long file running while the other worker has nothing to do.
TESTS = Path(__file__).parent
LONGEST_FIRST = (
    "course/test_launch.py", "course/test_bank.py", "course/test_book.py", "course/test_setup_page.py",
    "grading/test_warm_cold.py", "sandbox/test_disk.py", "workers/test_cluster.py", "grading/test_autograder.py",
    "grading/test_bad_input.py", "sandbox/test_races.py", "grading/test_grading.py", "harness/test_hidden_inputs.py",
    "harness/test_trusted_oracles.py", "harness/test_tampering.py", "grading/test_term.py", "sandbox/test_hostile.py",
    "course/test_notebooks.py", "course/test_course_check.py", "sandbox/test_rules.py", "reports/test_class_record.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in its order; every other file after them, as collected. Within a file the
    tests keep their order."""
    rank = {TESTS / name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture(scope="session")
def stand_in() -> Iterator[StandIn]:
    """One stand-in kernel (`tests.stand_in.StandIn`) for the session's channel tests; each test starts from
    ``stand_in.session()``, which empties its namespace."""
    kernel = StandIn()
    yield kernel
    kernel.close()


@pytest.fixture(scope="session")
def bank_kernel() -> Iterator[StandIn]:
    """The stand-in kernel that runs whole notebooks (`tests.stand_in.run_notebook`: the bank, the hidden seeds, the
    harness's agreement with `grade`). Apart from ``stand_in``: the channel tests' attacks change what a namespace
    reset keeps (torch's generator, for one)."""
    kernel = StandIn()
    yield kernel
    kernel.close()


@pytest.fixture(scope="session")
def toy_class(tmp_path_factory) -> ToyClass:
    """The fixture course's templates, generated once a session (once a worker under xdist) by the grader's own
    template step; every test that grades the toy class copies them instead of generating its own."""
    cache = tmp_path_factory.mktemp("toy-class") / "cache"
    return ToyClass(cache, released_notebooks(cache))


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.section("wrong-answer bank")
    for module in bank.modules():
        cells = sorted({a.cell for a in module.WRONG})
        terminalreporter.write_line(
            f"{module.ASSIGNMENT}: {len(module.WRONG)} wrong and {len(module.RIGHT)} right answers "
            f"over {len(cells)} graded functions")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure() -> None:
    """The last step of every pytest process (each xdist worker and the controller): every object of the session is
    put out of the collector's reach (``gc.freeze``), so that the interpreter's exit need not walk them all again,
    as `python -m autograder`'s own exit does. A pytest process that had imported torch and run the bank took 1.5 s
    to exit without it and 0.25-0.3 s with it."""
    gc.freeze()
