"""The scenario of tests/sandbox/test_zygote_sets.py, run by the user who runs the tests or, as a script, by uid 65534
(it prints its `Seen` as JSON): one zygote sandbox serving two preload sets (chapter 3's torch with its rule,
chapter 6's torch and transformers), a kernel forked from each, and what each kernel and the sandbox's processes
show about their pages.

Imports nothing of tests/: uid 65534 runs a copy of this file beside its own copy of the course.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass

import psutil

from autograder.sandbox.bwrap import environment, prepare_home
from autograder.sandbox.limits import Limits
from autograder.sandbox.warm import Zygote
from autograder.sandbox.zygote_client import ZygoteClient
from autograder.sandbox.zygote_protocol import PreloadSet

RULED = PreloadSet(("torch",), ("fused_attention",))
WITH_TRANSFORMERS = PreloadSet(("torch", "transformers"))
# The kernel, after a full collection: what it has, whether its rule holds, how many objects are frozen, and its
# pages (from its own /proc: kB).
PROBE = """import gc, json, os, sys
import torch
gc.collect()
try:
    torch.nn.functional.scaled_dot_product_attention(*[torch.ones(1, 1, 2, 2)] * 3)
    sdpa = 'ran'
except RuntimeError as error:
    sdpa = str(error).split(':')[0]
pages = dict(line.split(':', 1) for line in open('/proc/self/smaps_rollup') if ':' in line and 'kB' in line)
kb = {key: int(value.split()[0]) for key, value in pages.items()}
seen = {'transformers': 'transformers' in sys.modules, 'sdpa': sdpa, 'frozen': gc.get_freeze_count(),
        'rss': kb['Rss'], 'uss': kb['Private_Clean'] + kb['Private_Dirty']}
open(os.path.join(os.environ['HOME'], 'seen.json'), 'w').write(json.dumps(seen))
"""


@dataclass(frozen=True)
class Seen:
    """What the kernel of each set saw (`PROBE`, by the set's preload joined with '+'), and the sandbox's Python
    processes once both kernels ended: each one's parent's position in the list (-1: bwrap), RSS and USS in kB."""

    kernels: dict[str, dict]
    exits: dict[str, int]
    processes: list[tuple[int, int, int]]

    @classmethod
    def from_json(cls, text: str) -> Seen:
        given = json.loads(text)
        return cls(given["kernels"], given["exits"], [tuple(p) for p in given["processes"]])


def _processes(zygote: Zygote) -> list[tuple[int, int, int]]:
    found = [p for p in psutil.Process(zygote.process.pid).children(recursive=True) if p.name() != "bwrap"]
    pids = [p.pid for p in found]
    seen = []
    for process in found:
        memory = process.memory_full_info()
        parent = process.ppid()
        seen.append((pids.index(parent) if parent in pids else -1, memory.rss >> 10, memory.uss >> 10))
    return seen


def run() -> Seen:
    kernels, exits = {}, {}
    with tempfile.TemporaryDirectory(prefix="zygote-sets-") as scratch:
        zygote = Zygote(RULED.preload, scratch, forbid=RULED.forbid, also=(WITH_TRANSFORMERS,))
        try:
            for kernels_set in (RULED, WITH_TRANSFORMERS):
                client = ZygoteClient(zygote.addresses[kernels_set])
                home = client.new_home()
                prepare_home(home)
                limits = Limits()
                kernel = client.spawn(home, home, home / "link", home / "connection.json", limits,
                                      environment(home, limits, kernels_set.preload), PROBE)
                name = "+".join(kernels_set.preload)
                exits[name] = kernel.wait(120)
                kernels[name] = json.loads((home / "seen.json").read_text()) if exits[name] == 0 else {}
            processes = _processes(zygote)
        finally:
            zygote.close()
    return Seen(kernels, exits, processes)


if __name__ == "__main__":
    print(json.dumps(asdict(run())))
    sys.stdout.flush()
