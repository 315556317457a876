"""Time and peak memory of dense against sparse attention as the sequence grows, measured on this machine.

    python -m benchmarks.sparse         # prints the table of book/11_sparse.md's measured section

Three ways to compute one head of attention over n tokens, each query limited to a budget of keys:

- dense: the whole (n, n) score matrix, masked to a causal sliding window, softmaxed and multiplied by V
  (chapter 2's attention; the memory grows with n squared);
- block-sparse: the course's `block_sparse_attention` with the same window as a `mask_mod`, tile by tile;
- top-k: the course's `topk_sparse_attention` given indexer scores (made before the measurement: DeepSeek's kernel
  streams them in blocks), each query gathering its `top_k` keys.

Each measurement runs in one child process whose glibc mmap threshold is fixed (``MALLOC_MMAP_THRESHOLD_``), so
every large tensor is a mapping of its own, returned to the system when freed: the rise of the child's high-water
mark (``VmHWM``, reset through ``/proc/self/clear_refs``) over one call is that call's peak memory. The code under
test is the course's reference solution, loaded with `load_solution("11_sparse")`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dense", "block-sparse", "top-k")
SIZES = (1024, 2048, 4096, 8192)
WINDOW = 128  # keys per query for the sliding window, and top_k for the top-k selection
HEAD_DIM = 16
BLOCK = 128
REPEATS = 2


@dataclass(frozen=True)
class Point:
    """One method at one sequence length: the best of REPEATS wall times and the peak memory of one call."""

    method: str
    n: int
    seconds: float
    peak_bytes: int


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _peak(call) -> int:
    """Bytes this process's resident memory rose at most during ``call()``."""
    Path("/proc/self/clear_refs").write_text("5")
    start = _status_kib("VmRSS")
    call()
    return max(0, _status_kib("VmHWM") - start) * 1024


def _window(q_idx: torch.Tensor, k_idx: torch.Tensor) -> torch.Tensor:
    return (q_idx >= k_idx) & (q_idx - k_idx < WINDOW)


def _dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n = q.shape[-2]
    positions = torch.arange(n)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (1, 1, n, n)
    scores = scores.masked_fill(~_window(positions[:, None], positions[None, :]), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _measure_here(sizes: tuple[int, ...]) -> list[Point]:
    """Runs in the child process: every method at every size."""
    from course.solutions import load_solution

    ch11 = load_solution("11_sparse")
    torch.set_num_threads(1)
    points = []
    for n in sizes:
        torch.manual_seed(n)
        q, k, v = (torch.randn(1, 1, n, HEAD_DIM) for _ in range(3))
        scores = torch.randn(1, n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        calls = {
            "dense": lambda: _dense(q, k, v),
            "block-sparse": lambda: ch11.block_sparse_attention(q, k, v, _window, BLOCK),
            "top-k": lambda: ch11.topk_sparse_attention(q, k, v, scores, WINDOW),
        }
        for method in METHODS:
            peak = _peak(calls[method])
            best = math.inf
            for _ in range(REPEATS):
                start = time.perf_counter()
                calls[method]()
                best = min(best, time.perf_counter() - start)
            points.append(Point(method, n, best, peak))
    return points


def measure(sizes: tuple[int, ...] = SIZES) -> list[Point]:
    """Every method at every size, measured in a child process (see the module's docstring)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONWARNINGS="ignore")
    command = [sys.executable, "-m", "benchmarks.sparse", "--json", *map(str, sizes)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return [Point(**row) for row in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES), help="sequence lengths")
    parser.add_argument("--json", action="store_true", help="measure in this process and print JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps([asdict(p) for p in _measure_here(tuple(args.sizes))]))
        return
    for p in measure(tuple(args.sizes)):
        print(f"{p.method:>13} n = {p.n:>6}: {p.seconds * 1e3:9.2f} ms, peak {p.peak_bytes / 2**20:8.1f} MiB")


if __name__ == "__main__":
    main()
