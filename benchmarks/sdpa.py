"""Benchmark torch's scaled_dot_product_attention: each backend, dtype, mask and sequence length.

    python -m benchmarks.sdpa --out DIR [--lengths 256 512 1024] [--batch 1] [--heads 8] [--head-dim 64]
                              [--peak-tflops P]

For every device this machine has (the CPU, and the first CUDA GPU if there is one), every dtype
(CPU: float32 and bfloat16; CUDA: float16 and bfloat16), every SDPA backend (CPU: MATH and
FLASH_ATTENTION; CUDA: also EFFICIENT_ATTENTION and CUDNN_ATTENTION), with and without
`is_causal`, and every sequence length, it forces the backend, reads the kernel that ran from
torch.profiler, times it with torch.utils.benchmark on every thread, and measures the peak memory
torch held during one call. A backend that cannot run a configuration is recorded as
unavailable, never silently replaced by another.

Writes DIR/sdpa.csv (one row per configuration), DIR/sdpa.json (the machine, the settings, each
device's peak and the same rows) and DIR/sdpa.png (achieved TFLOP/s against length). The peak is
the throughput of a large matmul measured here, unless --peak-tflops gives a datasheet figure (for
the GPU, or for the CPU when there is no GPU). The measuring functions are the course's reference
solutions of chapter 8 (course.solutions.load_solution).
"""

from __future__ import annotations

import argparse
import csv
import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from course.machine import describe_machine
from course.solutions import load_solution

ch8 = load_solution("08_gpu_sdpa")

DTYPES = {"cpu": (torch.float32, torch.bfloat16), "cuda": (torch.float16, torch.bfloat16)}
BACKENDS = {"cpu": (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION),
            "cuda": (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                     SDPBackend.CUDNN_ATTENTION)}


@dataclass(frozen=True)
class Row:
    """One measured configuration; the numbers are None when `note` says why it did not run."""

    device: str
    dtype: str
    backend: str
    causal: bool
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    kernel: str
    median_s: float | None
    tflops: float | None
    fraction_of_peak: float | None
    peak_bytes: int | None
    note: str = ""


def peak_bytes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> int:
    """Most memory torch held at once during one SDPA call (CUDA allocator stats, or the CPU profiler's log)."""
    if q.is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    with ch8.quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    log = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    held = most = 0
    for _, change in log:
        held += change
        most = max(most, held)
    return most


def matmul_peak_tflops(device: str, dtype: torch.dtype) -> float:
    """Achieved TFLOP/s of a large square matmul: the best a matmul-built kernel can hope for."""
    size = 8192 if device == "cuda" else 2048
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    timer = benchmark.Timer("a @ b", globals={"a": a, "b": b}, num_threads=torch.get_num_threads())
    return ch8.achieved_tflops(2 * size**3, timer.blocked_autorange(min_run_time=0.5).median)


def measure(device: str, dtype: torch.dtype, backend: SDPBackend, causal: bool, shape: tuple[int, int, int, int],
            peak: float) -> Row:
    """Kernel, median time, TFLOP/s and peak memory of SDPA on q, k, v of `shape` (B, H, n, d) with `backend` forced."""
    batch, heads, n, head_dim = shape
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    common = dict(device=device, dtype=str(dtype).removeprefix("torch."), backend=backend.name, causal=causal,
                  batch=batch, heads=heads, seq_len=n, head_dim=head_dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SDPA warns why a backend refuses; the refusal itself is recorded
        try:
            kernel = ch8.kernel_name(q, k, v, backend, is_causal=causal)
            seconds = ch8.time_sdpa(q, k, v, backend, is_causal=causal)
            with sdpa_kernel(backend):
                memory = peak_bytes(q, k, v, causal)
        except torch.OutOfMemoryError:
            return Row(**common, kernel="", median_s=None, tflops=None, fraction_of_peak=None, peak_bytes=None,
                       note="out of memory")
        except RuntimeError:
            return Row(**common, kernel="", median_s=None, tflops=None, fraction_of_peak=None, peak_bytes=None,
                       note="backend unavailable for these inputs")
    # q and k have the same length, so PyTorch's upper-left is_causal mask keeps the same n(n+1)/2 pairs
    # as the course's lower-right one, which attention_flops counts.
    tflops = ch8.achieved_tflops(ch8.attention_flops(batch, heads, n, n, head_dim, causal=causal), seconds)
    return Row(**common, kernel=kernel, median_s=seconds, tflops=tflops, fraction_of_peak=tflops / peak,
               peak_bytes=memory)


def plot_tflops(result: dict, title: str):
    """Achieved TFLOP/s against sequence length, one line per device, dtype and backend (non-causal)."""
    import matplotlib.pyplot as plt

    from course.plotting import use_course_style

    use_course_style()  # each series gets its own colour, line style and marker
    rows = [r for r in result["rows"] if r["median_s"] and not r["causal"]]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for series in sorted({(r["device"], r["dtype"], r["backend"]) for r in rows}):
        points = sorted((r["seq_len"], r["tflops"]) for r in rows if (r["device"], r["dtype"], r["backend"]) == series)
        ax.loglog(*zip(*points), label=" ".join(series))
    ax.set(xlabel="sequence length", ylabel="achieved TFLOP/s (non-causal)", title=title)
    ax.legend(fontsize=7)
    fig.text(0.01, 0.01, f"measured by benchmarks/sdpa.py on {result['machine']}", fontsize=6)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for sdpa.csv, sdpa.json and sdpa.png")
    parser.add_argument("--lengths", type=int, nargs="+", help="sequence lengths (default: 256..2048 on CPU, 512..8192 on CUDA)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--peak-tflops", type=float,
                        help="the datasheet peak of the device measured last (the GPU if there is one, else the CPU), "
                             "instead of measuring a matmul there")
    args = parser.parse_args()

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    machine = describe_machine()
    print(machine)
    rows: list[Row] = []
    peaks: dict[str, float] = {}
    peak_sources: dict[str, str] = {}
    for device in devices:
        given = args.peak_tflops if device == devices[-1] else None  # a datasheet figure names one device
        lengths = args.lengths or ([256, 512, 1024, 2048] if device == "cpu" else [512, 1024, 2048, 4096, 8192])
        for dtype in DTYPES[device]:
            peak = given or matmul_peak_tflops(device, dtype)
            key = f"{device} {str(dtype).removeprefix('torch.')}"
            peaks[key], peak_sources[key] = peak, "given" if given else "measured matmul"
            print(f"\n{device}, {dtype}: peak {peak:.3f} TFLOP/s ({peak_sources[key]})")
            for backend in BACKENDS[device]:
                for causal in (False, True):
                    for n in lengths:
                        row = measure(device, dtype, backend, causal, (args.batch, args.heads, n, args.head_dim), peak)
                        rows.append(row)
                        result = (row.note if row.median_s is None else
                                  f"{row.kernel:<52} {row.median_s * 1e3:10.3f} ms {row.tflops:8.3f} TFLOP/s "
                                  f"{100 * row.fraction_of_peak:5.1f}% {row.peak_bytes / 2**20:9.1f} MiB")
                        print(f"  {backend.name:<20} causal={causal!s:<5} n={n:<6} {result}")

    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "sdpa.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Row.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)
    result = {"machine": machine, "torch": torch.__version__, "threads": torch.get_num_threads(),
              "peak_tflops": peaks, "peak_source": peak_sources,
              "rows": [asdict(row) for row in rows]}
    (args.out / "sdpa.json").write_text(json.dumps(result, indent=1))
    plot_tflops(result, "torch SDPA: achieved TFLOP/s by backend").savefig(args.out / "sdpa.png", dpi=120)
    print(f"\nwrote {args.out / 'sdpa.csv'}, {args.out / 'sdpa.json'} and {args.out / 'sdpa.png'}")


if __name__ == "__main__":
    main()
