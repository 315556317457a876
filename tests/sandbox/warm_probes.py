"""Sibling attacks on warm kernels (`autograder.sandbox.warm`), for tests/sandbox/test_warm.py: `run` drives one
zygote as the user who runs it and returns what every probe saw as a `Verdict`; the tests judge it.

Run as root in the test process, and as uid 65534 as a script (``python warm_probes.py HOST PORT`` prints the
verdict's JSON): it imports nothing but the standard library and `autograder`.

The scenario, on one zygote: A writes a secret into its home, /tmp and /dev/shm, listens on loopback and an
abstract Unix socket, makes a System V shared memory segment and waits; B, forked while A waits and told
A's home, secret, port, segment key and host pids (A's kernel, init and monitor, the zygote, its bwrap and this
process), attacks it (`SIBLING`); A is then released. C1 patches numpy, the checks, its environment and /tmp
(`PATCHES`); C2, the next fork, looks for what C1 left (`LOOKS`). A kernel that started a grandchild is
killed (`WarmKernel.kill`), another is left to `Zygote.close`, and this machine's /proc is scanned for them.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.sandbox.limits import Limits
from autograder.sandbox.bwrap import environment, prepare_home, socket_link
from autograder.sandbox.warm import Zygote
from autograder.sandbox.zygote_client import WarmKernel, ZygoteClient

WAIT = 60.0

# A: its secret everywhere it may write, a TCP listener on loopback, an abstract Unix socket and a System V
# shared memory segment, "ready" (with its port) in its home, then wait (at most a minute) for "go".
WAITS = '''import ctypes, json, os, socket, time
from pathlib import Path
home, secret = Path(os.environ["HOME"]), os.environ["WARM_SECRET"]
for folder in ("/tmp", "/dev/shm", str(home)):
    Path(folder, secret).write_text(secret)
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(4)
abstract = socket.socket(socket.AF_UNIX)
abstract.bind("\\0" + secret)
abstract.listen(4)
libc = ctypes.CDLL(None, use_errno=True)
segment = libc.shmget(int(os.environ["WARM_KEY"]), 4096, 0o1666)  # IPC_CREAT
assert segment >= 0, os.strerror(ctypes.get_errno())
(home / "ready.part").write_text(json.dumps({"port": server.getsockname()[1]}))
os.replace(home / "ready.part", home / "ready")
deadline = time.monotonic() + 60
while not (home / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
libc.shmctl(segment, 0, None)  # IPC_RMID
(home / "seen.json").write_text(json.dumps({"released": (home / "go").exists(), "home": sorted(os.listdir(home))}))
'''

# B: every attack on A, the zygote and the worker, each attempt's outcome recorded ("ok" or the error's name).
SIBLING = '''import ctypes, errno, json, os, signal, socket
from pathlib import Path
descriptors = [fd for fd in range(3, 4096) if os.path.exists(f"/proc/self/fd/{fd}")]  # before it opens any
target = json.loads(os.environ["WARM_TARGET"])
home, me = Path(os.environ["HOME"]), os.getpid()
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long

def outcome(call):
    try:
        call()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, type(error).__name__)

def attach(pid):
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

def write(path):
    with open(path, "w") as handle:
        handle.write("pwned")

def files(root):
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(folder, d))]
        found += [os.path.join(folder, n) for n in names] + [os.path.join(folder, d) for d in dirs
                                                              if os.path.islink(os.path.join(folder, d))]
    return sorted(found)

def unmount(path):
    if libc.umount2(path.encode(), 2) != 0:  # MNT_DETACH
        raise OSError(ctypes.get_errno(), "umount2")

def unshare_user():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")

def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return errno.errorcode[error.errno]

def connect(family, address):
    with socket.socket(family) as sock:
        sock.settimeout(2)
        sock.connect(address)
        sock.sendall(b"leaked")

def shmget():
    if libc.shmget(target["key"], 0, 0) < 0:
        raise OSError(ctypes.get_errno(), "shmget")

pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
targets = {**target["pids"], **{str(p): p for p in pids if p not in (1, me)}}  # host pids, and all it sees
status = dict(line.split(":\\t", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":\\t" in line)
secret = target["secret"]
seen = {
    "me": me, "proc": pids, "descriptors": descriptors, "init_cwd": listing("/proc/1/cwd"),
    "kill": {name: outcome(lambda p=pid: os.kill(p, signal.SIGKILL)) for name, pid in targets.items()},
    "ptrace": {name: attach(pid) for name, pid in targets.items()},
    "a_home_exists": os.path.exists(target["home"]),
    "a_home_read": outcome(lambda: open(os.path.join(target["home"], secret)).read()),
    "jobs": sorted(os.listdir(target["jobs"])),
    "writes": {path: outcome(lambda p=path: write(p)) for path in (
        os.path.join(target["jobs"], "pwned"), os.path.join(target["home"], "pwned"), "/pwned", "/etc/pwned",
        "/dev/pwned")},
    "mkdir_a_home": outcome(lambda: os.makedirs(target["home"])),
    "unmounts": {path: outcome(lambda p=path: unmount(p))
                 for path in (target["jobs"], "/tmp", "/dev/shm", "/proc")},
    "tmp": files("/tmp"), "shm": files("/dev/shm"),
    "secret_in_tmp": os.path.exists(os.path.join("/tmp", secret)) or os.path.exists(os.path.join("/dev/shm", secret)),
    "caps": {key: int(status[key], 16) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
    "no_new_privs": int(status["NoNewPrivs"]), "uid": os.getuid(),
    "more_user_namespaces": outcome(lambda: Path("/proc/sys/user/max_user_namespaces").write_text("100")),
    "unshare_user": outcome(unshare_user),
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "connect": {host: outcome(lambda f=family, h=host: connect(f, (h, target["port"]))) for family, host in (
        (socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"), (socket.AF_INET, target["host"]))},
    "a_sockets": {"tcp": outcome(lambda: connect(socket.AF_INET, ("127.0.0.1", target["a_port"]))),
                  "abstract": outcome(lambda: connect(socket.AF_UNIX, "\\0" + secret))},
    "a_shm": outcome(shmget),
}
seen["kill_all"] = outcome(lambda: os.kill(-1, signal.SIGKILL))
(home / "seen.json").write_text(json.dumps(seen))
'''

# C1: leave every trace a forked process could leave in its parent, and check that its own patch took.
PATCHES = '''import json, os, sys
from pathlib import Path
import numpy, autograder.checks as checks, autograder.harness.check_values as check_values
numpy.allclose = lambda *args, **kwargs: True
check_values.GUARDED_NUMPY = {"allclose": numpy.allclose}
checks.LEAKED = True
sys.modules["warm_leak"] = checks
os.environ["WARM_LEAK"] = "1"
Path("/tmp/warm-leak").write_text("leak")
Path("/dev/shm/warm-leak").write_text("leak")
Path(os.environ["HOME"], "seen.json").write_text(json.dumps({"allclose_0_1": bool(numpy.allclose([0.0], [1.0]))}))
'''

# C2: what the next kernel of the same zygote finds.
LOOKS = '''import json, os, sys
from pathlib import Path
import numpy, autograder.checks as checks, autograder.harness.check_values as check_values
Path(os.environ["HOME"], "seen.json").write_text(json.dumps({
    "allclose_0_1": bool(numpy.allclose([0.0], [1.0])),
    "guarded_is_numpy": check_values.GUARDED_NUMPY["allclose"] is numpy.allclose,
    "checks_patched": hasattr(checks, "LEAKED"), "module": "warm_leak" in sys.modules,
    "env": "WARM_LEAK" in os.environ,
    "files": [p for p in ("/tmp/warm-leak", "/dev/shm/warm-leak") if os.path.exists(p)]}))
'''

# A kernel with a grandchild (a `sleep` named by its one-time argument), then waiting to be killed.
SLEEPS = '''import os, subprocess, time
from pathlib import Path
child = subprocess.Popen(["sleep", os.environ["WARM_SLEEP"]])
Path(os.environ["HOME"], "ready").write_text(str(child.pid))
time.sleep(300)
'''


@dataclass
class Verdict:
    """What the scenario saw (module docstring): each probe's ``seen.json``, exit statuses, homes and the processes
    of this machine (``pid comm``) that carried a kernel's name, a grandchild's argument or the zygote's JOBS."""

    jobs: str
    a_home: str
    b_home: str
    b_link: str
    sibling: dict  # B's `SIBLING` record
    a_alive_after_b: bool
    a_status: int
    a_seen: dict  # A's `WAITS` record, after B
    a_home_after_b: list[str]  # A's home as this machine sees it
    b_status: int
    patched: dict  # C1's `PATCHES` record
    looked: dict  # C2's `LOOKS` record
    c_statuses: list[int]
    before_kill: list[str] = field(default_factory=list)
    after_kill: list[str] = field(default_factory=list)
    before_close: list[str] = field(default_factory=list)
    after_close: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls(**json.loads(text))


def processes_with(needles: list[str]) -> list[str]:
    """``"pid comm"`` of every process here (but this one) whose name or command line holds one of ``needles``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            comm = Path(entry.path, "comm").read_text().strip()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(needle in comm or needle in cmdline for needle in needles):
            found.append(f"{entry.name} {comm}")
    return found


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("\nPPid:", 1)[1].split()[0])


def _wait_for(path: Path, kernel: WarmKernel, what: str) -> None:
    """Wait until ``kernel`` (``what``) has written ``path``; raise if it ends or takes `WAIT` seconds first."""
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if kernel.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} never wrote {path} (exit status {kernel.poll()}; its traceback, if any, is "
                               "on the zygote's stderr)")
        time.sleep(0.02)


def _seen(home: Path) -> dict:
    """What the probe whose home is ``home`` recorded (empty if it wrote nothing)."""
    path = home / "seen.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _gone(needles: list[str], seconds: float = 10.0) -> list[str]:
    """The processes that still hold ``needles`` after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(needles)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class _Kernels:
    """Kernels of one zygote, asked for through one connection (as a worker asks), each with a new home and a
    short link (removed by `close`)."""

    def __init__(self, zygote: Zygote):
        self.zygote, self.links = ZygoteClient(zygote.address), []

    def spawn(self, probe: str, **extra: str) -> tuple[WarmKernel, Path, Path]:
        """Fork a kernel that runs ``probe`` with ``extra`` added to its environment: (kernel, home, link)."""
        home, limits = self.zygote.new_home(), Limits()
        prepare_home(home)
        link = socket_link(home)
        self.links.append(link)
        env = {**environment(home, limits, ()), **extra}
        return self.zygote.spawn(home, home, link, home / "kernel.json", limits, env, probe), home, link

    def close(self) -> None:
        self.zygote.close()
        for link in self.links:
            link.unlink(missing_ok=True)


def _sleeper(kernels: _Kernels) -> tuple[WarmKernel, list[str]]:
    """A kernel with a `sleep` grandchild, started; returns it and what names its processes here."""
    token = f"299.{secrets.randbelow(10**6):06d}"
    kernel, home, _ = kernels.spawn(SLEEPS, WARM_SLEEP=token)
    _wait_for(home / "ready", kernel, "the sleeping kernel")
    return kernel, [kernel.request.token, token]


def run(host: str, port: int) -> Verdict:
    """The whole scenario (module docstring), on a new zygote, as this process's user; ``host``:``port`` is a
    TCP listener that B must not reach."""
    zygote = Zygote((), "")
    kernels = _Kernels(zygote)
    try:
        secret = f"warm-secret-{secrets.token_hex(6)}"
        key = secrets.randbelow(2**30) + 1
        a, a_home, _ = kernels.spawn(WAITS, WARM_SECRET=secret, WARM_KEY=str(key))
        _wait_for(a_home / "ready", a, "A")
        kernel = a.kernel_pid()
        init = _parent(kernel)
        monitor = _parent(init)
        pids = {"a_kernel": kernel, "a_init": init, "a_monitor": monitor, "zygote": _parent(monitor),
                "zygote_bwrap": zygote.process.pid, "worker": os.getpid()}
        target = {"home": str(a_home), "secret": secret, "jobs": str(zygote.jobs), "pids": pids, "host": host,
                  "port": port, "key": key, "a_port": json.loads((a_home / "ready").read_text())["port"]}
        b, b_home, b_link = kernels.spawn(SIBLING, WARM_TARGET=json.dumps(target))
        b_status = b.wait(WAIT)
        alive = a.poll() is None and Path(f"/proc/{kernel}").exists()
        a_home_after_b = sorted(os.listdir(a_home))
        (a_home / "go").touch()
        a_status = a.wait(WAIT)
        if zygote.process.poll() is not None or not kernels.zygote.alive:
            raise RuntimeError(f"the zygote died while B attacked (B's kills: {_seen(b_home).get('kill')})")
        c1, c1_home, _ = kernels.spawn(PATCHES)
        c1_status = c1.wait(WAIT)
        c2, c2_home, _ = kernels.spawn(LOOKS)
        c2_status = c2.wait(WAIT)
        verdict = Verdict(jobs=str(zygote.jobs), a_home=str(a_home), b_home=str(b_home), b_link=str(b_link),
                          sibling=_seen(b_home), a_alive_after_b=alive, a_status=a_status, a_seen=_seen(a_home),
                          a_home_after_b=a_home_after_b, b_status=b_status, patched=_seen(c1_home),
                          looked=_seen(c2_home), c_statuses=[c1_status, c2_status])
        killed, needles = _sleeper(kernels)
        verdict.before_kill = processes_with(needles)
        killed.kill()
        killed.wait(WAIT)
        verdict.after_kill = _gone(needles)
        _, needles = _sleeper(kernels)
        needles.append(str(zygote.jobs))
        verdict.before_close = processes_with(needles)
    finally:
        zygote.close()
        kernels.close()
    verdict.after_close = _gone(needles)
    return verdict


if __name__ == "__main__":
    print(run(sys.argv[1], int(sys.argv[2])).to_json())
