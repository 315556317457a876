"""Shared pytest set-up: OpenMP threads that sleep when idle, the fixtures that several test files use (the stand-in
kernel, the fixture course's templates), and the wrong-answer bank's size reported at the end of every run."""

from __future__ import annotations

import os
from collections.abc import Iterator

# Test cells run here and the student's code in another process, each waiting on the other: OpenMP threads
# that spin while they wait would take the cores from the process that works (as autograder.workers.pool does).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402

from tests import bank  # noqa: E402
from tests.grading_helpers import ToyClass, released_notebooks  # noqa: E402
from tests.stand_in import StandIn  # noqa: E402


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
