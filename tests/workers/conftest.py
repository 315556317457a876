"""The local pool the tests of the workers start: two workers forked from one warm process, as `grade --jobs 2`
runs them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.workers.pool import Pool


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    """A pool of two workers (forked from one warm process) that logs to ``tmp_path/logs``, closed after the test."""
    made = Pool(2, tmp_path / "logs")
    yield made
    made.close()
