"""Under xdist, each worker computes on its share of the cores (tests/conftest.py): its torch and the processes it
starts use cores // workers threads, not every core each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import CORE_SHARE, SHARING, THREAD_POOLS, WORKERS


def test_each_worker_computes_on_its_share_of_the_cores() -> None:
    if not SHARING:
        pytest.skip("no xdist workers, or thread variables set by whoever runs the tests: nothing is shared out")
    cores = len(os.sched_getaffinity(0))
    assert CORE_SHARE == max(1, cores // WORKERS)
    assert {name: os.environ[name] for name in THREAD_POOLS} == dict.fromkeys(THREAD_POOLS, str(CORE_SHARE))
    import torch

    assert torch.get_num_threads() == CORE_SHARE, \
        f"{WORKERS} workers on {cores} cores: this worker's torch runs {torch.get_num_threads()} threads, not its " \
        f"share {CORE_SHARE} (the variables must be set before anything imports torch)"
    started = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, check=True)
    assert int(started.stdout) == CORE_SHARE, "a process the worker starts (a kernel, a grader) would take every core"
