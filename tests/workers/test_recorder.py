"""The class gradebook is written by a worker of its own (`autograder.workers.recorder`): what the grader sends is
recorded and committed by `Recorder.close`, a result's pages never travel, and a gradebook that cannot be written
ends the run with its reason, as does a recording worker that cannot start. The recording worker is forked from the pool's warm process (`grade --jobs 2`; with
``--jobs 1`` it starts alone, as `tests/grading/test_autograder.py`'s reruns do)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.records import Result, Task
from autograder.workers.pool import Pool
from autograder.workers.recorder import GradebookUnwritable, Recorder
from tests.reports.test_gradebook_batches import _committed, _result, _template


def test_a_worker_of_its_own_records_every_result_by_close(tmp_path: Path, pool: Pool) -> None:
    db_url = f"sqlite:///{tmp_path / 'class.db'}"
    recorder = Recorder(pool, db_url, {"toy": _template(tmp_path)})
    recorder.record(Task("ada", "toy"), _result(1.0))
    graded = _result(5.0)
    recorder.record(Task("ada", "toy"), Result(graded.status, "", graded.cells, feedback={"toy.html": "<p>"}))
    recorder.record(Task("bo", "toy"), Result("failed", "the kernel died"))
    recorder.close()
    assert _committed(db_url) == {"ada": 5.0, "bo": 0.0}, "the last result of each student, all of them committed"
    assert recorder.worker.process is None, "its worker is stopped once the gradebook is closed"


def test_a_gradebook_that_cannot_be_written_ends_the_run_with_why(tmp_path: Path, pool: Pool) -> None:
    recorder = Recorder(pool, f"sqlite:///{tmp_path / 'no-such-folder' / 'class.db'}", {"toy": _template(tmp_path)})
    recorder.record(Task("ada", "toy"), _result(5.0))
    with pytest.raises(GradebookUnwritable, match="no-such-folder.*could not be written: OperationalError"):
        recorder.close()


def test_a_recording_worker_that_cannot_start_ends_the_run_with_why(tmp_path: Path) -> None:
    pool = Pool(1, tmp_path / "logs", python=str(tmp_path / "no-python"))  # started alone, as with --jobs 1
    try:
        recorder = Recorder(pool, f"sqlite:///{tmp_path / 'class.db'}", {"toy": _template(tmp_path)})
        recorder.record(Task("ada", "toy"), _result(5.0))
        with pytest.raises(GradebookUnwritable, match="could not be written: could not start a grading worker"):
            recorder.close()
    finally:
        pool.close()
