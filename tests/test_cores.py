"""Under xdist, each worker computes on its share of the cores (tests/conftest.py): its torch and the processes it
starts use cores // workers threads, not every core each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import SHARING, THREAD_POOLS, WORKERS


def test_each_worker_computes_on_its_share_of_the_cores() -> None:
    if not SHARING:
        pytest.skip("no xdist workers, or thread variables set by whoever runs the tests: nothing is shared out")
    cores = len(os.sched_getaffinity(0))
    share = max(1, cores // WORKERS)
    found = {name: os.environ.get(name) for name in THREAD_POOLS}
    assert found == dict.fromkeys(THREAD_POOLS, str(share)), \
        f"{WORKERS} workers on {cores} cores: the thread variables are {found}, not this worker's share {share}"
    import torch

    assert torch.get_num_threads() == share, \
        f"{WORKERS} workers on {cores} cores: this worker's torch runs {torch.get_num_threads()} threads, not its " \
        f"share {share} (the variables must be set before anything imports torch)"
    started = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, check=True)
    assert int(started.stdout) == share, \
        f"a process this worker starts (a kernel, a grader) runs torch on {started.stdout.strip()} threads, not {share}"
