"""Grading workers forked from one warm process, so that a run of several workers imports nbgrader, torch and
the rest once instead of once per worker.

`WorkerForks` (the grader's pool starts it when it has two workers or more) runs ``python -m
autograder.workers.forks FD MODULES``. That process imports what every worker needs at once (nbgrader's
converters), says so, and then, between requests, imports the rest one module at a time: what a
grading job imports on its first run (nbclient, the trusted harness) and MODULES, what the run's kernels
preload and its test cells import (torch, transformers' Llama: `autograder.grading.templates.test_imports`), the
channel's torch where tensors can cross it (`SESSION`) and what torch's checks import (`TORCH_CHECKS`):
`grading_imports`.
Each request on FD (a SOCK_SEQPACKET socket) carries the new worker's stdin, stdout and log as SCM_RIGHTS, and
the modules it needs (``needs``); the fork becomes a session leader with
them as its 0, 1 and 2 and runs `autograder.workers.worker.run`, the loop of a worker started alone. Those of
the needed modules (and their submodules) not imported yet are imported first, then the process forks; the
answer names the modules the fork still lacks. So the pool's first workers, which make the templates, start as soon
as nbgrader and a first job's modules are imported and the feedback page is compiled, and go on to grade an
assignment whose kernels and tests need no torch; a worker with torch is forked once torch is imported, and one
whose tests import transformers' oracles once they are (`autograder.workers.pool.needs_of`,
`autograder.workers.pool.Pool.run`). Each step is written to the process's log (`autograder.milestones`).

The process runs no job, starts no thread and holds nothing a fork could share but imported modules and, once what a
first job imports is imported, a worker's `Kept` with its feedback page compiled (`_warmed`), made before the first
fork: every worker starts with it, the first ones too, which make the templates and then grade without compiling it
each.
It dies with the grader (its parent-death signal, and a check of its parent every 0.2 s); each fork
dies with it in turn (`autograder.workers.worker.run`), and it never waits for its forks (the kernel reaps
them; the pool watches each through a pidfd).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.sandbox.guards import PARENT_POLL, die_with_parent, uncollected
from autograder.milestones import milestone
from autograder.sandbox.limits import START_SECONDS

if TYPE_CHECKING:
    from autograder.harness.notebook import Kept
    from autograder.records import Template

WHO = "worker forks"  # its milestones' name
FOLLOW_UP = 0.1  # seconds a fork waits for the next worker's request before it imports on (torch takes 2 s)

# The most bytes of one request or answer on the control socket (SOCK_SEQPACKET cuts a longer message): the
# modules a fork needs or was forked without, a whole course's worth.
MESSAGE_BYTES = 1 << 16
# What the first grading job of a worker imports besides nbgrader (a second of a core, once per worker).
FIRST_JOB = ("nbclient", "jupyter_client.asynchronous", "nbconvert.exporters.html", "autograder.harness.execute",
             "autograder.harness.kernel_manager", "autograder.sandbox.zygote_client", "autograder.checks")
# What a grading job's channel imports besides, where tensors can cross it (`autograder.records.Job.tensors`), whatever
# its kernels preload: one of MODULES when some kernel of the run can import torch (`autograder.grading.plan`).
SESSION = ("torch", "autograder.channel.tensors")
# What torch imports on its first check (`torch._check`, which nn.MultiheadAttention's key_padding_mask check calls,
# for one): torch.fx's symbolic shapes and sympy, a third of a second of a core, once here instead of in every worker
# whose tests call it (transformers imports it anyway). One of MODULES where some test cell of the run imports torch.
TORCH_CHECKS = ("torch.fx.experimental.symbolic_shapes",)


def grading_imports(template: Template, tensors: bool) -> tuple[str, ...]:
    """What a worker imports to grade ``template``'s submissions, in order: what its kernels preload; the channel's
    torch where tensors can cross it (``tensors``: `autograder.records.Job.tensors`) or its test cells import torch
    (`SESSION`); what its test cells import (`Template.imports`), and with torch what torch's checks import
    (`TORCH_CHECKS`)."""
    tested_with_torch = any(covers(("torch",), module) for module in template.imports)
    return tuple(dict.fromkeys((*template.preload, *(SESSION if tensors or tested_with_torch else ()),
                                *template.imports, *(TORCH_CHECKS if tested_with_torch else ()))))


def log_tail(log: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a worker's (or the warm process's) log, to say why it could not start."""
    try:
        return "\n".join(log.read_text(errors="replace").strip().splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no log)"


class ForkedWorker:
    """A worker forked by `WorkerForks`, as the pool uses a ``Popen``: ``pid``, ``stdin``, ``stdout``, ``poll``,
    ``wait`` (through a pidfd: it is not this process's child). ``missing``: the modules it was forked without."""

    def __init__(self, pid: int, stdin: int, stdout: int, missing: frozenset[str]):
        self.pid, self.missing = pid, missing
        self.stdin, self.stdout = os.fdopen(stdin, "wb"), os.fdopen(stdout, "rb")
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -signal.SIGKILL  # its status went to nobody: only that it ended is known
            for handle in (self.stdin, self.stdout):
                handle.close()
            os.close(self._pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return self.poll()


class WorkerForks:
    """The warm process the pool forks its workers from (module docstring); started in the pool's thread, so
    that it dies with that thread."""

    def __init__(self, env: dict[str, str], log: Path, modules: tuple[str, ...], python: str, cwd: Path):
        self.log = log
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control.settimeout(START_SECONDS)
        self.asking = threading.Lock()  # a worker is replaced from its own thread
        with open(log, "ab") as handle:
            self.process = subprocess.Popen(
                [python, "-m", "autograder.workers.forks", str(theirs.fileno()), ",".join(modules)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=handle, stderr=handle, env=env, cwd=cwd,
                start_new_session=True)
        theirs.close()

    def fork(self, log: Path, needs: tuple[str, ...]) -> ForkedWorker:
        """A new worker logging to ``log``, with ``needs`` (and their submodules) imported; OSError (or a timeout)
        when the warm process is gone."""
        stdin, ours_in = os.pipe()
        ours_out, stdout = os.pipe()
        try:
            with open(log, "ab") as handle, self.asking:
                socket.send_fds(self.control, [json.dumps({"needs": needs}).encode()],
                                [stdin, stdout, handle.fileno()])
                answer = self.control.recv(MESSAGE_BYTES)
        except OSError:
            answer = b""
        finally:
            os.close(stdin)
            os.close(stdout)
        if not answer:
            os.close(ours_in)
            os.close(ours_out)
            raise OSError(f"the process the workers are forked from ended; the end of its log ({self.log}):\n"
                          f"{log_tail(self.log)}")
        given = json.loads(answer)
        return ForkedWorker(given["forked"], ours_in, ours_out, frozenset(given["missing"]))

    def close(self) -> None:
        self.control.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()


def _become_worker(control: socket.socket, descriptors: list[int], kept: Kept | None) -> None:
    """In the fork: the worker's own session and descriptors, then the worker's loop (with ``kept``, when the feedback
    page was compiled before this fork); never returns."""
    from autograder.workers import worker

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    control.close()
    os.setsid()
    for target, descriptor in enumerate(descriptors):
        os.dup2(descriptor, target)
        os.close(descriptor)
    try:
        worker.run(kept)
    finally:
        os._exit(0)


def _to_warm(kept: Kept | None, pending: list[str]) -> bool:
    """Whether the feedback page is still to compile (`_warmed`) and what a first job imports is imported."""
    return kept is None and not set(FIRST_JOB) & set(pending)


def _warmed() -> Kept:
    """What a worker keeps from job to job (`autograder.harness.notebook.Kept`), its feedback page compiled
    (`autograder.harness.feedback_page.CompiledTemplates.warm`): every fork starts with it."""
    from autograder.harness.notebook import Kept

    kept = Kept()
    kept.templates.warm()
    milestone(WHO, "compiled the feedback page")
    return kept


def covers(needs: Iterable[str], module: str) -> bool:
    """Whether ``module`` is one of ``needs`` or a submodule of one."""
    return any(module == name or module.startswith(f"{name}.") for name in needs)


def _import(name: str) -> None:
    """Import ``name``, which may name no module (``from x import y`` read as x.y), with no collection meanwhile,
    then move what it left out of the collector's reach (`autograder.sandbox.guards.uncollected`), so that no later
    collection walks it again; a forked worker that needs what failed imports it again, and fails as a worker
    started alone would."""
    try:
        with uncollected():
            importlib.import_module(name)
    except ImportError:
        return
    if "." not in name:
        milestone(WHO, f"imported {name}")


def _imported(name: str) -> bool:
    """Whether ``name`` is imported already: a module, or a name an imported module holds (``from x import y``
    read as x.y). Read from what is loaded, never by importing: a lazy module's attribute would import it."""
    if name in sys.modules:
        return True
    module, _, attribute = name.rpartition(".")
    return module in sys.modules and attribute in vars(sys.modules[module])


def main(argv: list[str]) -> None:
    """``python -m autograder.workers.forks FD MODULES``: import, fork on request (module docstring)."""
    control = socket.socket(fileno=int(argv[0]))
    die_with_parent()
    parent = os.getppid()
    with uncollected():  # as every import (`_import`)
        from autograder.workers import worker

        worker.prepare()
    milestone(WHO, "imported nbgrader")
    pending = list(dict.fromkeys([*FIRST_JOB, *filter(None, argv[1].split(","))]))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    forked = False  # just now: the pool asks for its workers one after another, and an import is not interrupted
    kept: Kept | None = None  # made once what a first job imports is (`_warmed`), before a fork or between requests
    while True:
        to_warm = _to_warm(kept, pending)
        wait = FOLLOW_UP if forked else 0 if pending or to_warm else PARENT_POLL
        forked = False
        if not select.select([control], [], [], wait)[0]:
            if to_warm:
                kept = _warmed()
            elif pending:
                _import(pending.pop(0))
            elif os.getppid() != parent:
                return
            continue
        message, descriptors, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 3)
        if not message:
            return
        needs = json.loads(message)["needs"]
        for name in [name for name in pending if covers(needs, name)]:
            pending.remove(name)
            _import(name)
        pending = [name for name in pending if not _imported(name)]  # what the fork lacks: the pool reads it
        if _to_warm(kept, pending):  # no fork compiles the feedback page itself
            kept = _warmed()
        sys.stdout.flush()
        sys.stderr.flush()
        gc.collect()  # then out of the collector's reach: a worker's collections never copy the pages it shares
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            _become_worker(control, descriptors, kept)
        forked = True
        for descriptor in descriptors:
            os.close(descriptor)
        milestone(WHO, f"forked worker {pid} ({len(pending)} modules left to import)")
        control.send(json.dumps({"forked": pid, "missing": pending}).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
