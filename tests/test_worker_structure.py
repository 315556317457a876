"""The worker's side is configured, not patched, and keeps no module-level state (issue 38, part "worker").

- nbgrader's Execute step is our `TrustedExecute`, whose nbclient ``kernel_manager_class`` is
  `SandboxKernelManager`: nothing in nbgrader, nbclient or jupyter_client is replaced;
- no module of the worker's side (harness/, the zygote and warm start, the worker forks, the worker's main, the Dask
  worker) holds a module-level container it changes, reassigns a global, or sets an attribute of another module;
- the zygote's messages and the kernel's start times are typed records, each written and read in one place;
- no class of those modules shares its name with another class of autograder/.
Read from the source where it can be (no grading run): the grading tests (test_warm, test_warm_cold, test_races,
test_bad_input) run these paths for real.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from pathlib import Path

import pytest

from autograder.harness.execute import Spent, TrustedExecute
from autograder.harness.kernel_manager import SandboxKernelManager
from autograder.harness.timings import JobClock, job_timings, read_kernel_times
from autograder.sandbox.kernel import KernelTimes
from autograder.sandbox.zygote_protocol import Exited, Kill, KernelRequest, Lines, Ready, Spawned, decode, encode
from course import ROOT

PACKAGE = ROOT / "autograder"
WORKER_SIDE = sorted([*(PACKAGE / "harness").glob("*.py"),
                      *(PACKAGE / "sandbox" / name for name in ("warm.py", "zygote.py", "zygote_client.py",
                                                                "zygote_protocol.py", "kernel.py")),
                      *(PACKAGE / "workers" / name for name in ("forks.py", "dask_worker.py", "worker.py"))])
EVERY_MODULE = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "nbgrader_config.py")
# Set inside `warnings.catch_warnings()`, which puts it back when the cell ends (`TrustedCells._run`).
SCOPED = {("graded_cells.py", "warnings.showwarning")}
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard", "setdefault",
            "popitem", "sort", "reverse"}
CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "local", "Lock", "RLock"}


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def module_state(source: str, file: str = "") -> list[str]:
    """What in ``source`` is module-level state: a mutable container bound at module level under a name that is
    not a constant's, a change to a module-level value, a ``global``, or an attribute set on an imported module
    (a patch); each as 'line N: ...'."""
    tree = ast.parse(source)
    bound = set()
    imported = {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            names = [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Name)]
            bound |= set(names)
            value = node.value
            called = value.func if isinstance(value, ast.Call) else None
            kind = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
            mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
            found += [f"line {node.lineno}: {name} is a mutable container at module level" for name in names
                      if (mutable or kind in CONTAINERS) and not name.isupper()]
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
              and _root(node.func.value) in bound):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}() changes a module-level value")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                root, text = _root(target), ast.unparse(target)
                if (file, text) in SCOPED or not isinstance(target, (ast.Attribute, ast.Subscript)):
                    continue
                if root in bound:
                    found.append(f"line {node.lineno}: {text} changes a module-level value")
                elif root in imported and isinstance(target, ast.Attribute):
                    found.append(f"line {node.lineno}: {text} sets an attribute of an imported module (a patch)")
    return found


@pytest.mark.parametrize("module", EVERY_MODULE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_changes_module_level_state_or_patches_another(module: Path) -> None:
    assert module_state(module.read_text(), module.name) == [], (
        f"{module.relative_to(ROOT)} keeps state at module level or patches another module: keep it on the object "
        "that owns it (the kernel manager, the TrustedExecute, the worker's main loop, the Dask worker's plugin)")


@pytest.mark.parametrize("source, expected", [
    ("_launches: list[float] = []\ndef f():\n    _launches.append(1.0)\n",
     ["line 1: _launches is a mutable container at module level",
      "line 3: _launches.append() changes a module-level value"]),
    ("SPENT = Spent()\ndef f():\n    SPENT.tests += 1\n", ["line 3: SPENT.tests changes a module-level value"]),
    ("def f():\n    import nbgrader.preprocessors.execute as execute\n    execute.AsyncKernelManager = object\n",
     ["line 3: execute.AsyncKernelManager sets an attribute of an imported module (a patch)"]),
    ("import threading\n_slots = threading.local()\n", ["line 2: _slots is a mutable container at module level"]),
    ("X = 1\ndef f():\n    global X\n    X = 2\n", ["line 3: global X"]),
    ("KINDS = {'a': 1}\ndef f(kinds):\n    kinds['b'] = 2\n    return KINDS['a']\n", []),
])
def test_the_state_finder_finds_what_the_worker_used_to_keep(source: str, expected: list[str]) -> None:
    """The module-state check is not one that cannot fail: each pattern the worker's side held before this
    change (the launch list, the spent counter, the kernel manager's patch, the Dask slots) is found."""
    assert module_state(source) == expected


def test_no_class_of_the_worker_side_shares_its_name() -> None:
    classes = Counter(node.name for path in PACKAGE.rglob("*.py") for node in ast.parse(path.read_text()).body
                      if isinstance(node, ast.ClassDef))
    ours = {node.name for path in WORKER_SIDE for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.ClassDef)}
    assert {name: classes[name] for name in ours if classes[name] > 1} == {}


def test_nbgrader_runs_our_kernel_manager_through_its_trait() -> None:
    """TrustedExecute's ``kernel_manager_class`` is `SandboxKernelManager` (nbgrader's Execute passes its own as a
    keyword), each manager it makes gets the job's warm start and home, and nbgrader's module is untouched."""
    import jupyter_client.manager
    import nbgrader.preprocessors.execute as nbgrader_execute
    from traitlets.config import Config

    executor = TrustedExecute(config=Config(), kernel_name="python3")
    assert executor.kernel_manager_class is SandboxKernelManager
    manager = executor.create_kernel_manager()
    assert isinstance(manager, SandboxKernelManager) and manager.warm is None and manager.home is None
    assert manager.launched is None and manager.kernel_pid() is None
    assert nbgrader_execute.AsyncKernelManager is jupyter_client.manager.AsyncKernelManager
    assert executor.spent == Spent() and executor.spent is not TrustedExecute(config=Config()).spent


def test_the_job_kernelspec_is_found_in_its_own_folder_not_through_the_environment(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """The kernel manager looks up the job's kernelspec in the folder it is configured with; the worker's
    environment (JUPYTER_PATH) is neither read for it nor changed."""
    from traitlets.config import Config

    from autograder.sandbox.bwrap import KERNEL_NAME, write_kernelspec

    ours = write_kernelspec(tmp_path / "job", ["ours", "{connection_file}"]) / "kernels"
    monkeypatch.setenv("JUPYTER_PATH", str(write_kernelspec(tmp_path / "elsewhere", ["theirs"])))
    config = Config()
    config.SandboxKernelManager.kernelspecs = str(ours)
    manager = TrustedExecute(config=config, kernel_name=KERNEL_NAME).create_kernel_manager()
    assert manager.kernel_spec.argv == ["ours", "{connection_file}"]
    assert os.environ["JUPYTER_PATH"] == str(tmp_path / "elsewhere")


REQUEST = KernelRequest(3, "ag0123456789ab", "/h", "/h/work", "/tmp/l", "/h/c.json", "{}", {"A": "b"}, "/c", "/tmp/c")


@pytest.mark.parametrize("message", [Ready(7, "/jobs", "/channels", 1.5, 1), REQUEST, Kill(3), Spawned(3),
                                     Exited(3, 137)], ids=lambda message: type(message).__name__)
def test_every_zygote_message_reads_back_as_it_was_written(message) -> None:
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line.rstrip(b"\n")) == message


def test_messages_arrive_whole_however_the_bytes_are_cut() -> None:
    data = b"".join(encode(m) for m in (Spawned(1), Exited(1, 0), Kill(2)))
    received = Lines()
    got = [message for i in range(0, len(data), 5) for message in received.feed(data[i:i + 5])]
    assert got == [Spawned(1), Exited(1, 0), Kill(2)] and received.pending == b""


@pytest.mark.parametrize("line", [b'{"spawned": {"id": 1}, "kill": {"id": 1}}', b'{"fork": {"id": 1}}',
                                  b'{"kill": {"id": 1, "signal": 9}}', b"[1]", b'{"kill": 3}'])
def test_a_line_that_is_no_message_is_refused(line: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        decode(line)


def test_kernel_times_read_back_and_make_each_starts_phases(tmp_path: Path) -> None:
    warm = KernelTimes(forked=10.0, sandboxed=10.5, ready=11.0)
    cold = KernelTimes(started=10.0, preloaded=12.0, ready=13.0)
    assert KernelTimes.from_json(warm.to_json()) == warm and KernelTimes.from_json(cold.to_json()) == cold
    spent, clock = Spent(tests=2.0, cells=1.0, launched=9.0), JobClock(started=8.0, autograded=20.0)
    assert set(job_timings(warm, spent, clock)) == {"nbgrader_setup", "fork", "sandbox", "ipykernel_start", "cells",
                                                    "tests", "nbgrader_rest", "feedback"}
    assert job_timings(cold, spent, clock)["kernel_preload"] == 2.0
    assert job_timings(cold, Spent(), clock) == {}  # no kernel was launched
    (tmp_path / "kernel.times").write_text(warm.to_json())
    assert read_kernel_times(tmp_path, None) == warm


@pytest.mark.parametrize("left", ["link", "fifo", "not json", "wrong field", "not a number"])
def test_kernel_times_the_kernel_tampered_with_are_no_timings(tmp_path: Path, left: str) -> None:
    """The kernel writes its times in its own home: whatever it leaves there gives no timings, never an error,
    and a link or a FIFO is not followed nor waited on."""
    times = tmp_path / "kernel.times"
    secret = tmp_path / "secret"
    secret.write_text(KernelTimes(started=1.0, preloaded=2.0, ready=3.0).to_json())
    if left == "link":
        times.symlink_to(secret)
    elif left == "fifo":
        os.mkfifo(times)
    else:
        times.write_text({"not json": "{", "wrong field": '{"pid": 1}', "not a number": '{"ready": "soon"}'}[left])
    assert read_kernel_times(tmp_path, None) is None
