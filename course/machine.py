"""Describe the machine a figure or a number was measured on, to print beside it."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or the platform's processor string."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def describe_machine() -> str:
    """Two lines, each short enough for a printed page: the hardware (CPU, core count, torch
    threads, the CUDA device if there is one), then the software (torch, numpy, Python)."""
    import numpy
    import torch

    parts = [f"CPU: {cpu_name()} ({os.cpu_count()} cores, torch uses {torch.get_num_threads()} threads)"]
    if torch.cuda.is_available():
        parts.append(f"GPU: {torch.cuda.get_device_name(0)}")
    else:
        parts.append("no CUDA device")
    software = f"torch {torch.__version__}, numpy {numpy.__version__}, Python {platform.python_version()}"
    return " · ".join(parts) + "\n" + software
