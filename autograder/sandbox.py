"""The grading kernel: an IPython kernel with resource limits, started as an unprivileged user when it can.

nbgrader starts it through the kernelspec that `write_kernelspec` writes (argv:
``python -m autograder.sandbox -f {connection_file}``). Before any student code runs it

1. copies the released files of the assignment (its working directory, notebooks excluded) into
   a private folder and moves there, so that the kernel never writes where the grader does;
2. sets resource limits: address space (memory), CPU time, file size, number of processes;
3. when started as root with an unprivileged uid to use (``AUTOGRADER_SANDBOX_UID``), gives that
   uid its folder, covers the folders in ``AUTOGRADER_HIDDEN_PATHS`` (solutions, submissions, the
   grader's output) with empty ones in a mount namespace of its own, and becomes that uid, keeping
   only the capability to read and search files (so the interpreter, wherever it is installed, stays
   importable): student code can then neither kill the grader, nor write outside its own folder, nor
   read the reference solutions;
4. imports `autograder.checks` (and torch, with ``AUTOGRADER_PRELOAD_TORCH=1``), so that the checks
   hold genuine references to numpy's and torch's comparison functions before any student code can
   replace them.

Limits come from the environment (``AUTOGRADER_MEMORY_BYTES``, ``AUTOGRADER_CPU_SECONDS``,
``AUTOGRADER_FILE_BYTES``, ``AUTOGRADER_PROCESSES``). `python -m autograder.sandbox --check`
reports whether the unprivileged mode works on this machine.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

KERNEL_NAME = "autograder-sandbox"
_PR_SET_KEEPCAPS = 8
_PR_SET_NO_NEW_PRIVS = 38
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_DAC_READ_SEARCH = 2
_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def set_limits(memory_bytes: int, cpu_seconds: int, file_bytes: int, processes: int) -> None:
    """Apply the resource limits to this process (and so to everything it starts)."""
    for limit, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_seconds),
                         (resource.RLIMIT_FSIZE, file_bytes), (resource.RLIMIT_NPROC, processes)):
        if value > 0:
            hard = value + 5 if limit == resource.RLIMIT_CPU else value
            resource.setrlimit(limit, (value, hard))
    # A write past the file size limit then fails with OSError instead of killing the kernel.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def drop_privileges(uid: int) -> None:
    """Become ``uid`` (group the same number), keeping only CAP_DAC_READ_SEARCH; needs root."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS) failed")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    keep = 1 << _CAP_DAC_READ_SEARCH
    data = (_CapData * 2)(_CapData(keep, keep, 0), _CapData(0, 0, 0))
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def hide_paths(paths: list[str]) -> None:
    """In a mount namespace of this process's own, cover each folder with an empty read-only tmpfs and each
    file with /dev/null; needs root.

    The kernel keeps its capability to read any file (to import the interpreter's modules from
    wherever they are installed); this is what keeps the course's solutions, the submissions and the
    grader's output out of its reach.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making mounts private failed")
    for path in paths:
        if os.path.isdir(path):
            failed = libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_RDONLY, b"size=4k,mode=555")
        elif os.path.isfile(path):
            failed = libc.mount(b"/dev/null", path.encode(), None, _MS_BIND, None)
        else:
            continue
        if failed:
            raise OSError(ctypes.get_errno(), f"hiding {path} failed")


def _chown_tree(folder: Path, uid: int) -> None:
    os.chown(folder, uid, uid)
    for path in folder.rglob("*"):
        os.chown(path, uid, uid, follow_symlinks=False)


def _private_workdir(home: Path) -> Path:
    """Copy the released files from the working directory into ``home/work``; returns that folder."""
    work = home / "work"
    shutil.copytree(Path.cwd(), work, ignore=shutil.ignore_patterns("*.ipynb"), dirs_exist_ok=True)
    return work


def _int_env(name: str) -> int:
    return int(os.environ.get(name, "0"))


def prepare() -> Callable[[], None]:
    """Move into the private folder, set limits, drop privileges and preload the checks.

    Returns a function to call once the kernel is ready: it records when each step ended.
    """
    started = time.time()
    home = Path(os.environ.get("AUTOGRADER_SANDBOX_HOME") or tempfile.mkdtemp(prefix="autograder-kernel-"))
    home.mkdir(parents=True, exist_ok=True)
    work = _private_workdir(home)
    for variable in ("HOME", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ[variable] = str(home)
    os.environ["TMPDIR"] = str(home)
    pid_file = os.environ.get("AUTOGRADER_KERNEL_PID_FILE")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    times_file = os.environ.get("AUTOGRADER_KERNEL_TIMES_FILE")
    # Opened before privileges are dropped: the folder holding it belongs to the grader.
    times = open(times_file, "w") if times_file else None  # noqa: SIM115 - closed below
    uid = _int_env("AUTOGRADER_SANDBOX_UID")
    if uid and os.geteuid() == 0:
        _chown_tree(home, uid)
        os.chmod(home, 0o700)
    os.chdir(work)
    set_limits(_int_env("AUTOGRADER_MEMORY_BYTES"), _int_env("AUTOGRADER_CPU_SECONDS"),
               _int_env("AUTOGRADER_FILE_BYTES"), _int_env("AUTOGRADER_PROCESSES"))
    if uid and os.geteuid() == 0:
        hidden = os.environ.get("AUTOGRADER_HIDDEN_PATHS", "")
        if hidden:
            hide_paths(hidden.split(os.pathsep))
        drop_privileges(uid)
    import autograder.checks  # noqa: F401 - captures numpy's functions before student code runs

    if os.environ.get("AUTOGRADER_PRELOAD_TORCH") == "1":
        import torch

        if "OMP_NUM_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        autograder.checks._capture_torch()
    preloaded = time.time()

    def record_times() -> None:
        if times is not None:
            times.write(json.dumps({"started": started, "preloaded": preloaded, "ready": time.time()}))
            times.close()

    return record_times


def write_kernelspec(folder: Path) -> Path:
    """Write this kernel's kernelspec under ``folder/kernels``; returns ``folder`` (for JUPYTER_PATH)."""
    spec = folder / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "autograder.sandbox", "-f", "{connection_file}"],
        "display_name": "Python 3 (autograder sandbox)",
        "language": "python",
    }))
    return folder


def check_unprivileged(uid: int, hide: bool) -> str:
    """Empty if a kernel can run as ``uid`` here (imports work, the grader's files are read-only and,
    with ``hide``, hidden folders are empty), else why not."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="autograder-check-") as scratch:
        probe, secret = Path(scratch) / "root-owned", Path(scratch) / "hidden" / "secret"
        probe.write_text("grader")
        secret.parent.mkdir()
        secret.write_text("solution")
        code = ("import sys, os\nfrom autograder.sandbox import drop_privileges, hide_paths\n"
                "if sys.argv[4] == '1':\n    hide_paths([sys.argv[3]])\n"
                "drop_privileges(int(sys.argv[1]))\nimport numpy, autograder.checks\n"
                "if sys.argv[4] == '1' and os.listdir(sys.argv[3]):\n    sys.exit('a hidden folder is visible')\n"
                "try:\n    open(sys.argv[2], 'w')\nexcept PermissionError:\n    sys.exit(0)\n"
                "sys.exit('could write a file of the grader')")
        done = subprocess.run([sys.executable, "-c", code, str(uid), str(probe), str(secret.parent), str(int(hide))],
                              capture_output=True, text=True, timeout=120, cwd=scratch)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return ""


def main(argv: list[str]) -> None:
    """Kernel entry point: ``python -m autograder.sandbox -f CONNECTION_FILE [ipykernel options]``."""
    if argv[:1] == ["--check"]:
        problem = check_unprivileged(int(argv[1]) if len(argv) > 1 else 65534, hide=True)
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    record_times = prepare()
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(argv)
    record_times()
    app.start()


if __name__ == "__main__":
    main(sys.argv[1:])
