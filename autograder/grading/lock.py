"""`under_lock`: the one way `grade` and `collect` hold their output folder while they write to it.

Runs in the grader.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from autograder.reports.class_record import OutputUnavailable, open_output
from autograder.reports.output_folder import OutputFolder


def under_lock(out: OutputFolder, work: Callable[[], int]) -> int:
    """``work``'s exit status, run while this process holds ``out`` (`open_output`, which makes it); 2 after one
    ``error:`` line when it cannot be made or another run is writing to it."""
    try:
        held = open_output(out)
    except OutputUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        return work()
    finally:
        held.close()
