"""Describe the machine a figure or a number was measured on, to print beside it.

Every line fits the page's COLUMNS whatever the machine is called: a long CPU or GPU name loses
its trademark marks and filler words first, and is then cut with an ellipsis.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

# Code and printed lines on a book page fit this many columns (book/_static/course.css sizes the
# boxes; tests/course/test_book.py checks every page against it).
COLUMNS = 88

# Marks and words that a CPU or GPU name can lose without losing which part it is.
_FILLER = re.compile(r"\((?:R|TM|tm|r)\)|®|™|\b(?:CPU|Processor|Core Processor|with Radeon Graphics)\b")


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or the platform's processor string."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def fit(label: str, name: str, detail: str = "", width: int = COLUMNS) -> str:
    """`label name detail` in at most width characters: the name is tidied of filler words and, if
    still too long, cut with an ellipsis (the label and detail are kept whole)."""
    tidy = " ".join(_FILLER.sub(" ", name).split()) or name.strip()
    room = width - len(label) - len(detail) - 2
    if len(tidy) > room:
        tidy = tidy[:max(room - 1, 1)].rstrip() + "…"
    return f"{label} {tidy} {detail}".rstrip()


def describe_machine(cpu: str | None = None, gpu: str | None = None) -> str:
    """Two or three lines, each at most COLUMNS characters: the CPU (its name, core count and torch's
    threads), the CUDA device if there is one, then the software (torch, numpy, Python).
    cpu and gpu replace the detected names (the tests pass long ones)."""
    import numpy
    import torch

    lines = [fit("CPU:", cpu or cpu_name(), f"({os.cpu_count()} cores, torch uses {torch.get_num_threads()} threads)")]
    if gpu is None and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
    lines.append(fit("GPU:", gpu) if gpu else "no CUDA device")
    lines.append(f"torch {torch.__version__}, numpy {numpy.__version__}, Python {platform.python_version()}")
    return "\n".join(lines)
