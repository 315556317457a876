"""The local pool's start: its workers start when the run is planned (`Pool.prepare`), before the templates are
made, so that what they import overlaps the grader's own work."""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.workers.pool import Pool


def test_prepare_starts_the_workers_before_any_job(tmp_path: Path) -> None:
    pool = Pool(2, tmp_path / "logs")
    try:
        assert pool.prepare(("json",), (), str(tmp_path), warm=False) == {}, "no zygote without warm"
        assert pool.forks is not None, "with two jobs, the process the workers are forked from starts in prepare"
        assert pool.forks.process.poll() is None
        assert all(worker.forks is pool.forks for worker in pool.workers)
    finally:
        pool.close()
    # One job: its only worker is started in prepare, and not waited for (it says ready when the first job asks).
    ready = tmp_path / "ready"
    ready.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps({{'ready': 1}}), flush=True)\n"
                     "sys.stdin.read()\n")
    ready.chmod(0o755)
    single = Pool(1, tmp_path / "logs-single", python=str(ready))
    try:
        single.prepare((), (), str(tmp_path), warm=False)
        started = single.workers[0].process
        assert started is not None and started.poll() is None, "the only worker starts in prepare"
        single.workers[0].start()
        assert single.workers[0].process is started, "the job's start reuses the worker prepare started"
    finally:
        single.close()
