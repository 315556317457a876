"""Warm kernels (`autograder.sandbox.warm`) are as isolated from each other as cold ones: two kernels forked by one
zygote at the same time cannot see, signal, trace or touch each other, the zygote or the worker; no state of
one reaches the next; none holds a privilege or a network; a kill or the zygote's close leaves nothing.

tests/sandbox/warm_probes.py runs the scenario once per user and returns what each probe saw: as the user who runs
the tests (root here) in this process, and as uid 65534 (tests/unprivileged.py's `unprivileged_python`) from
a copy of the course that user can read. Every test below judges both runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sandbox import sandbox_attacks as attacks
from tests.sandbox import warm_probes
from tests.unprivileged import UID, course_copy, give, unprivileged_folder, unprivileged_python
from tests.sandbox.warm_probes import Verdict

AS_UID = "uid 65534"


@dataclass(frozen=True)
class Run:
    """One scenario's verdict and what the TCP listener its sibling attack aimed at received (nothing, if tight)."""

    verdict: Verdict
    heard: list[bytes]


def _as_unprivileged(host: str, port: int) -> Verdict:
    """The scenario run by uid `UID` from its own copy of the course and of tests/sandbox/warm_probes.py."""
    with unprivileged_folder("autograder-warm-") as base:
        copy = course_copy(base / "course")
        script = shutil.copy(Path(warm_probes.__file__), base / "warm_probes.py")
        give(base)
        done = subprocess.run([*unprivileged_python(), script, host, str(port)], cwd=copy, capture_output=True,
                              text=True, timeout=300, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(copy)})
        assert done.returncode == 0, done.stderr[-3000:]
        return Verdict.from_json(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=[pytest.param("this user", marks=pytest.mark.sandbox),
                                        pytest.param(AS_UID, marks=[pytest.mark.slow, pytest.mark.root,
                                                                    pytest.mark.sandbox])])
def run(request) -> Run:
    if request.param == AS_UID and os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    listener = attacks.Listener()
    try:
        if request.param == AS_UID:
            verdict = _as_unprivileged(attacks.host_address(), listener.port)
        else:
            verdict = warm_probes.run(attacks.host_address(), listener.port)
    finally:
        listener.close()
    return Run(verdict, list(listener.heard))


def _report(verdict: Verdict) -> str:
    return json.dumps(verdict.sibling, indent=1)


def test_a_sibling_sees_only_its_own_pid_namespace(run: Run) -> None:
    """B, forked while A runs, finds in /proc only its own namespace (1, its init, and itself); its kill(-1)
    reaches no process, and afterwards A is still running (and ends as it should, when told) and the zygote
    still forks the next two kernels."""
    verdict = run.verdict
    b = verdict.sibling
    assert verdict.b_status == 0, "B's probe failed: the zygote's stderr has its traceback"
    assert b["proc"] == [1, b["me"]], f"B sees processes besides its init and itself: {b['proc']}"
    assert b["kill_all"] == "ESRCH", f"kill(-1) in B reached a process ({b['kill_all']})"
    assert verdict.a_alive_after_b, "A did not survive its sibling"
    assert verdict.a_status == 0 and verdict.a_seen["released"], (verdict.a_status, verdict.a_seen)
    assert verdict.c_statuses == [0, 0], f"the zygote did not fork two more kernels after B: {verdict.c_statuses}"


def test_a_sibling_cannot_signal_or_trace_the_other_kernel_the_zygote_or_the_worker(run: Run) -> None:
    """B, given the host pids of A's kernel, init and monitor, of the zygote, its bwrap and the worker, can
    neither SIGKILL nor PTRACE_ATTACH any of them (nor any process it sees besides its init)."""
    b = run.verdict.sibling
    targets = {"a_kernel", "a_init", "a_monitor", "zygote", "zygote_bwrap", "worker"}
    assert targets <= set(b["kill"]) and targets <= set(b["ptrace"]), _report(run.verdict)
    assert [name for name, got in b["kill"].items() if got == "ok"] == [], f"B signalled: {b['kill']}"
    assert [name for name, got in b["ptrace"].items() if got == "ok"] == [], f"B traced: {b['ptrace']}"
    assert run.verdict.a_alive_after_b


def test_a_sibling_cannot_read_or_write_the_other_kernels_files(run: Run) -> None:
    """A's home is not there for B (neither to read nor to make); JOBS shows B only its own home (nor does its
    init's working folder, /proc/1/cwd) and is read-only, as are /, /etc and /dev; B cannot unmount the covers of
    JOBS, /tmp, /dev/shm or /proc (the zygote's lie under them); B's /tmp holds only its own socket link and its
    /dev/shm nothing: not the secret A wrote into its own."""
    verdict, b = run.verdict, run.verdict.sibling
    assert not b["a_home_exists"] and b["a_home_read"] != "ok", _report(verdict)
    assert b["mkdir_a_home"] != "ok", "B could make A's home's path"
    assert len(b["unmounts"]) == 4 and "ok" not in b["unmounts"].values(), f"B lifted a cover: {b['unmounts']}"
    assert b["jobs"] == [Path(verdict.b_home).name], f"B lists other kernels' homes in JOBS: {b['jobs']}"
    assert Path(verdict.a_home).name not in b["init_cwd"], f"B lists JOBS through its init's cwd: {b['init_cwd']}"
    assert [path for path, got in b["writes"].items() if got == "ok"] == [], f"B wrote: {b['writes']}"
    assert set(b["writes"]) >= {"/pwned", "/etc/pwned", "/dev/pwned", str(Path(verdict.jobs) / "pwned")}
    assert "pwned" not in verdict.a_home_after_b and "pwned" not in verdict.a_seen["home"]
    assert b["tmp"] == [verdict.b_link], f"B's /tmp is not its own: {b['tmp']}"
    assert b["shm"] == [] and not b["secret_in_tmp"], f"B's /dev/shm is not its own: {b['shm']}"


def test_a_sibling_cannot_reach_the_other_kernels_sockets_or_shared_memory(run: Run) -> None:
    """A listens on 127.0.0.1 and on an abstract Unix socket and holds a System V shared memory segment: B,
    given the port, the socket's name and the segment's key, connects to neither and finds no segment (each
    kernel has network and IPC namespaces of its own, not only the zygote's)."""
    b = run.verdict.sibling
    assert b["a_sockets"] == {"tcp": "ECONNREFUSED", "abstract": "ECONNREFUSED"}, f"B reached A: {b['a_sockets']}"
    assert b["a_shm"] == "ENOENT", f"B found A's shared memory segment: {b['a_shm']}"


def test_no_state_leaks_into_the_next_kernel(run: Run) -> None:
    """C1 patches numpy.allclose and autograder.checks, adds a module, an environment variable and files in /tmp
    and /dev/shm (and its patch works in C1); C2, the zygote's next kernel, has the original numpy.allclose
    and checks and none of the rest."""
    assert run.verdict.patched == {"allclose_0_1": True}, "C1's patch did not take: the check below proves nothing"
    assert run.verdict.looked == {"allclose_0_1": False, "guarded_is_numpy": True, "checks_patched": False,
                                  "module": False, "env": False, "files": []}


def test_a_warm_kernel_has_no_privileges_and_no_network(run: Run) -> None:
    """B runs as uid 65534 with every capability set empty and no_new_privs, holds no descriptor but 0, 1 and 2,
    can neither raise max_user_namespaces nor make a user namespace, has only loopback, and reaches no listener
    of this machine (on 127.0.0.1, ::1 or the host's address)."""
    b = run.verdict.sibling
    assert b["uid"] == UID
    assert b["caps"] == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0), b["caps"]
    assert b["no_new_privs"] == 1
    assert b["more_user_namespaces"] != "ok" and b["unshare_user"] != "ok", "B made a new user namespace"
    assert b["descriptors"] == [], f"B holds descriptors besides 0, 1 and 2 (the zygote's?): {b['descriptors']}"
    assert b["interfaces"] == ["lo"], f"B has network interfaces besides loopback: {b['interfaces']}"
    assert len(b["connect"]) == 3 and "ok" not in b["connect"].values(), f"B connected: {b['connect']}"
    assert run.heard == []


def test_kill_and_close_leave_nothing_running(run: Run) -> None:
    """`WarmKernel.kill` on a kernel that started a `sleep` ends both (no process with the kernel's one-time name
    or the sleep's argument remains); `Zygote.close` ends the zygote, its bwrap and a running kernel with its
    grandchild (nothing holds its JOBS, the kernel's name or the sleep's argument)."""
    verdict = run.verdict
    assert len(verdict.before_kill) == 2 and any(p.endswith(" sleep") for p in verdict.before_kill), \
        verdict.before_kill
    assert verdict.after_kill == [], f"left running after WarmKernel.kill: {verdict.after_kill}"
    assert any(p.endswith(" sleep") for p in verdict.before_close) and len(verdict.before_close) >= 4, \
        verdict.before_close
    assert verdict.after_close == [], f"left running after Zygote.close: {verdict.after_close}"


@pytest.mark.sandbox
def test_the_start_up_check_passes_here_and_says_why_a_leaky_kernel_fails(monkeypatch) -> None:
    """`autograder.sandbox.warm.check_warm_start` forks a real probe: it passes on this machine, and a probe that
    finds a leak makes it raise with what the probe found (the run then grades cold and says why:
    `isolation_line`)."""
    from autograder.sandbox import warm
    from autograder.workers import pool

    warm.check_warm_start()
    leaky = "import os, sys\nopen(os.path.join(os.environ['HOME'], 'probe.txt'), 'w').write('it sees /secret')\n"
    monkeypatch.setattr(warm, "PROBE", leaky + "sys.exit(3)\n")
    with pytest.raises(warm.WarmStartUnavailable, match="less isolated than a cold one here: it sees /secret"):
        warm.check_warm_start()
    line, started_warm = pool.isolation_line(True, True)
    assert not started_warm and "warm start unavailable" in line and "it sees /secret" in line, line
    assert pool.isolation_line(True, False) == (line.split("\n")[0] + "\ncold start (--cold): a fresh kernel "
                                                "process per submission", False)


@pytest.mark.sandbox
def test_the_checks_are_imported_once_at_the_start_in_the_sandbox_kernels_start_in(monkeypatch) -> None:
    """Every test cell imports the checks: the start-up probes import them once, in the view the run's kernels
    get. Warm, the probe kernel forked from the zygote does (numpy already imported there) and the cold sandbox's
    probe does not (0.2 s of a core); cold, or when no warm kernel can be made, the cold probe does."""
    from autograder.sandbox import warm
    from autograder.workers import pool

    assert "import autograder.checks" in warm.PROBE
    asked: list[bool] = []
    check = pool.check_isolation
    monkeypatch.setattr(pool, "check_isolation", lambda imports_checks=True: (asked.append(imports_checks),
                                                                                check(imports_checks)))
    assert pool.isolation_line(True, True).warm
    assert asked == [False], f"a warm run's cold probe should leave the checks to the warm one: {asked}"
    asked.clear()
    assert not pool.isolation_line(True, False).warm
    assert asked == [True]
    asked.clear()
    monkeypatch.setattr(warm, "PROBE", "import sys\nsys.exit(3)\n")
    assert not pool.isolation_line(True, True).warm
    assert asked == [False, True], f"kernels that start cold after all need the checks imported there: {asked}"


def test_the_workers_import_what_the_test_cells_import_and_not_the_solutions() -> None:
    """`test_imports` reads the test cells (visible and hidden) of the source notebooks only: chapter 6's hidden
    tests compare with Hugging Face's Llama, chapter 1's need no torch, and the other cells' imports are left
    out (the kernel runs those)."""
    from autograder.grading.templates import test_imports
    from autograder.grading.options import SOURCE

    assert "transformers.models.llama.modeling_llama" in test_imports(SOURCE, ["06_rope"])
    first = test_imports(SOURCE, ["01_similarity"])
    assert "autograder.checks" in first and "torch" not in first
    assert "numpy" not in first  # chapter 1's given set-up cell imports numpy; its test cells do not


def _warm_probe(preload: tuple[str, ...], probe: str, threads: int = 1) -> str:
    """What ``probe``, run in a kernel forked from a zygote that preloads ``preload``, wrote to $HOME/result."""
    from autograder.sandbox.limits import Limits
    from autograder.sandbox.bwrap import environment, prepare_home
    from autograder.sandbox.warm import Zygote, ZygoteClient

    zygote = Zygote(preload)
    client = ZygoteClient(zygote.address)
    try:
        home = client.new_home()
        prepare_home(home)
        limits = Limits()
        env = {**environment(home, limits, preload), "OMP_NUM_THREADS": str(threads)}
        kernel = client.spawn(home, home, home / "link", home / "connection.json", limits, env, probe)
        assert kernel.wait(120) == 0
        return (home / "result").read_text()
    finally:
        client.close()
        zygote.close()


@pytest.mark.sandbox
def test_a_kernel_forked_after_torch_was_imported_runs_torch_on_two_threads() -> None:
    """Fork safety: the zygote imports torch and runs no torch operation, so a kernel forked from it starts its
    own thread pools. A parallel matmul on two threads (OpenMP) and numpy's BLAS finish, and agree."""
    probe = """import os, sys, numpy, torch
torch.set_num_threads(2)
a = torch.arange(512 * 512, dtype=torch.float64).reshape(512, 512) / 512**2
ours = float((a @ a).sum())
theirs = float((a.numpy() @ a.numpy()).sum())
open(os.path.join(os.environ['HOME'], 'result'), 'w').write(f'{torch.get_num_threads()} {ours} {theirs}')
"""
    threads, ours, theirs = _warm_probe(("torch",), probe, threads=2).split()
    assert threads == "2" and float(ours) == pytest.approx(float(theirs), rel=1e-12)


@pytest.mark.sandbox
def test_a_warm_kernel_collects_the_students_garbage() -> None:
    """The zygote moves what it imports out of the collector's reach (`autograder.sandbox.kernel.preload`,
    `autograder.sandbox.zygote`): its kernels' collector is on, with Python's thresholds, and collects a cycle of
    the student's."""
    probe = """import gc, os
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
del a, b
found = gc.collect()
open(os.path.join(os.environ['HOME'], 'result'), 'w').write(f'{gc.isenabled()} {gc.get_threshold()[0]} {found}')
"""
    enabled, threshold, found = _warm_probe((), probe).split()
    assert enabled == "True" and threshold == "700", f"the kernel's collector: enabled {enabled}, threshold {threshold}"
    assert int(found) >= 2, f"gc.collect() found {found} unreachable objects: the student's cycle was not collected"
