"""One zygote sandbox serves every preload set whose kernels see the same packages (`autograder.sandbox.zygote`):
torch is imported once, by the sandbox's first process, and its pages are shared by the zygote of each set and
by every kernel forked from them; each zygote freezes what it imported (``gc.freeze``), so a kernel's collector
copies none of those pages. Each set's kernels still have their own modules and rules: chapter 3's kernel has no
transformers and its fused attention raises, chapter 6's has transformers and may call it.

tests/sandbox/zygote_sets.py runs the scenario as the user who runs the tests and, as a script, as uid 65534
(tests/unprivileged.py); every test of the scenario judges both runs. The pool starts one such sandbox for the
sets that see the same packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sandbox import zygote_sets
from tests.sandbox.zygote_sets import Seen
from tests.unprivileged import course_copy, give, unprivileged_folder, unprivileged_python

AS_UID = "uid 65534"


def _as_unprivileged() -> Seen:
    with unprivileged_folder("autograder-zygote-sets-") as base:
        copy = course_copy(base / "course")
        script = shutil.copy(Path(zygote_sets.__file__), base / "zygote_sets.py")
        give(base)
        done = subprocess.run([*unprivileged_python(), script], cwd=copy, capture_output=True, text=True, timeout=300,
                              env={"PATH": os.environ["PATH"], "PYTHONPATH": str(copy)})
        assert done.returncode == 0, done.stderr[-3000:]
        return Seen.from_json(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=[pytest.param("this user", marks=pytest.mark.sandbox),
                                        pytest.param(AS_UID, marks=[pytest.mark.slow, pytest.mark.root,
                                                                    pytest.mark.sandbox])])
def seen(request) -> Seen:
    if request.param == AS_UID and os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    return _as_unprivileged() if request.param == AS_UID else zygote_sets.run()


def test_each_set_keeps_its_own_modules_and_rules(seen: Seen) -> None:
    assert seen.exits == {"torch": 0, "torch+transformers": 0}
    ruled, free = seen.kernels["torch"], seen.kernels["torch+transformers"]
    assert (ruled["transformers"], ruled["sdpa"]) == (False, "RuleBroken")
    assert (free["transformers"], free["sdpa"]) == (True, "ran")


def test_one_process_imports_torch_and_forks_a_zygote_per_set(seen: Seen) -> None:
    """The sandbox's Python processes: one whose parent is bubblewrap, and two forked from it; each of the two
    shares most of its pages (torch's) with the first: its own pages (USS) are under a third of its RSS."""
    roots = [i for i, (parent, _, _) in enumerate(seen.processes) if parent == -1]
    assert len(roots) == 1, seen.processes
    zygotes = [(rss, uss) for parent, rss, uss in seen.processes if parent == roots[0]]
    assert len(zygotes) == 2, seen.processes
    assert all(uss * 3 < rss for rss, uss in zygotes), zygotes


def test_a_kernel_finds_its_imports_frozen_and_shares_their_pages(seen: Seen) -> None:
    """After a full collection in the kernel, its own pages are under a tenth of its RSS: the collector wrote to
    none of the pages it shares with its zygote (where the zygote does not freeze, about a third are copied)."""
    for kernel in seen.kernels.values():
        assert kernel["frozen"] > 100_000
        assert kernel["uss"] * 10 < kernel["rss"], kernel


@pytest.mark.sandbox
def test_the_pool_starts_one_sandbox_per_view_of_the_packages(tmp_path: Path) -> None:
    """Chapters 3 and 6 (every package, torch) get one sandbox, each set its own socket in it; chapter 1 (numpy
    only) its own sandbox, which also forks the run's warm probe."""
    from autograder.workers.dispatch import KernelSet
    from autograder.workers.pool import Pool

    ruled, free = KernelSet(("torch",), None, ("fused_attention",)), KernelSet(("torch", "transformers"), None, ())
    numpy = KernelSet((), ("numpy",), ())
    pool = Pool(2, tmp_path / "logs")
    try:
        addresses = pool.prepare((), (numpy, ruled, free), str(tmp_path), True)  # in the order their jobs come
        folders = {kernels: Path(address).parent for kernels, address in addresses.items()}
        assert len(set(addresses.values())) == 3
        assert folders[ruled] == folders[free] != folders[numpy]
        assert len(set(pool.zygotes.values())) == 2
        # The warm probe is forked from the zygote of the first jobs (the numpy set's), not from one of its own.
        assert pool.isolation(True, True).warm
        assert len(list(pool.zygotes[numpy].jobs.glob("kernel-*"))) == 1, "the probe's home, in the run's zygote"
        assert not list(pool.zygotes[ruled].jobs.glob("kernel-*")), "no probe in a later jobs' zygote"
    finally:
        pool.close()
