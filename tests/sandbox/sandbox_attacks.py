"""Submissions that attack the grading machine, for the sandbox tests (as root and as an unprivileged user).

Each attack runs, prints whatever it got (so that anything it read would reach its feedback), then
defines the correct `add`: a submission keeps the marks its correct code earns. The tests plant
secrets (a file in the grading user's home, a root-only file), run a loopback listener, and check
that no secret reaches any file the grader writes, that the listener heard nothing and that nothing
was written outside the job's folder.
"""

from __future__ import annotations

import secrets
import socket
import threading
from pathlib import Path

from autograder.reports.output_folder import OutputFolder
from tests.grading_helpers import FIXTURE_SOURCE, solution_sources

REFERENCE = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
ADD = REFERENCE["add"]

READS = '''import os
got = []
for path in {paths!r}:
    try:
        with open(path, errors="replace") as handle:
            got.append(handle.read(300))
    except OSError as error:
        got.append(type(error).__name__)
    try:
        got.append(repr(os.listdir(path)))
    except OSError:
        pass
print(got)
'''

CONNECTS = '''import socket
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"), (socket.AF_INET, {host!r})):
    try:
        with socket.socket(family) as sock:
            sock.settimeout(2)
            sock.connect((host, {port}))
            sock.sendall(b"leaked")
            print("connected to", host)
    except OSError as error:
        print("no connection:", type(error).__name__)
'''

WRITES = '''written = []
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("vandal")
        written.append(path)
    except OSError as error:
        written.append(type(error).__name__)
print(written)
'''

# Starts sleeping processes until the process limit stops it (spawned rather than forked: forking a kernel
# 256 times takes seconds), then kills its parent and every process it can signal, and reaps its
# children: were they left as zombies, they would keep the kernel at its limit.
FORKS_AND_KILLS = '''import os, signal
children = 0
try:
    while children < 100_000:
        os.posix_spawn("/usr/bin/sleep", ["sleep", "600"], {})
        children += 1
except OSError as error:
    print("fork stopped:", type(error).__name__)
for target in (os.getppid(), -1):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as error:
        print("kill:", type(error).__name__)
try:
    while True:
        os.wait()
except ChildProcessError:
    print("reaped", children, "children")
'''

FILLS_TMP = '''filled = 0
try:
    for i in range(100_000):
        with open(f"/tmp/fill-{i}", "wb") as handle:
            handle.write(b"x" * 2**20)
        filled += 1
except OSError as error:
    print("tmp full after", filled, "MiB:", type(error).__name__)
'''


def secret() -> str:
    return f"SANDBOX-SECRET-{secrets.token_hex(8)}"


def attack(code: str) -> str:
    """A solution cell for `add` that runs ``code`` first."""
    return code + "\n" + ADD


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it accepts (there must be none)."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.heard: list[bytes] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    self.heard.append(connection.recv(100) or b"<connected>")
                except OSError:
                    self.heard.append(b"<connected>")

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.server.close()


def host_address() -> str:
    """This machine's address on its first non-loopback interface (else loopback)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def files_containing(folder: Path, needles: list[str]) -> list[str]:
    """Every file under ``folder`` that contains one of ``needles`` (as text), but for the grader's template
    cache (`autograder.reports.output_folder.OutputFolder.cache`: the hidden tests are in its gradebooks)."""
    found = []
    cache = OutputFolder(folder).cache
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and not path.is_relative_to(cache):
            text = path.read_bytes().decode("utf-8", errors="replace")
            found += [f"{path}: {needle}" for needle in needles if needle in text]
    return found
