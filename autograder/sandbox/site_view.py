"""Which installed packages a grading kernel sees: those its chapter's registry entry names (`course.chapters`,
``packages``), what they need, and what ipykernel needs, or where the entry names none, all of them; never
ipykernel's debugger. `autograder.sandbox.bwrap` mounts each site-packages folder as an empty read-only tmpfs with
only `shown_entries` bound in it, so that ``import torch`` fails with ImportError in the kernel of a NumPy chapter;
for a kernel that sees every package, it binds the folder whole and covers `hidden_entries`.
"""

from __future__ import annotations

import csv
import functools
import os
import re
import sys
import sysconfig
from importlib.metadata import Distribution
from pathlib import Path, PurePosixPath

KERNEL_NEEDS = ("ipykernel", "numpy")  # what every kernel imports: ipykernel, and numpy for the channel
# What no kernel sees although ipykernel requires it: its debugger (debugpy, with pydevd), which nothing attaches to
# in a grading kernel. Without it ipykernel starts with no debugger (a few ms less each), and a zygote's sandbox does
# not import pydevd (0.04 s of a core less each).
KERNEL_HIDES = ("debugpy",)
METADATA_FOLDERS = (".dist-info", ".egg-info")  # an installed distribution's metadata, one per distribution


def site_folders() -> list[str]:
    """Every site-packages folder of this interpreter and its base (on sys.path or not), as found and resolved."""
    found = {p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")}
    for prefix in (sys.prefix, sys.base_prefix):
        found |= {sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})[key] for key in ("purelib", "platlib")}
    found |= {os.path.realpath(p) for p in found}
    return sorted(p for p in found if Path(p).is_dir())


def _name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


@functools.cache
def _installed(site: str) -> dict[str, Distribution]:
    """The distributions installed in the site-packages folder ``site``, by normalised name (read once: every set
    of kernels' view starts from them). The name is read from each metadata folder's own name, which installers
    write as the distribution's name with its version (``torch-2.13.0.dist-info``, ``six.egg-info``), not from its
    METADATA file: parsing some 300 of those took a tenth of a second of every process that makes a sandbox."""
    found = {}
    for entry in sorted(os.listdir(site)):
        if entry.endswith(METADATA_FOLDERS):
            found[_name(entry.split("-", 1)[0].removesuffix(".dist-info").removesuffix(".egg-info"))] = \
                Distribution.at(os.path.join(site, entry))
    return found


@functools.cache
def shown_entries(site: str, packages: tuple[str, ...]) -> tuple[str, ...]:
    """The entries of the site-packages folder ``site`` a kernel that may import ``packages`` sees: the files and
    folders of those distributions and of every one they need, with ipykernel's (`KERNEL_NEEDS`) but its debugger
    (`KERNEL_HIDES`), and the folder's ``.pth`` files (which add other folders of the environment, bound or not)."""
    from packaging.requirements import Requirement

    installed = _installed(site)
    wanted: set[str] = set()
    hidden = {_name(name) for name in KERNEL_HIDES}
    pending = [*KERNEL_NEEDS, *packages]
    while pending:
        name = _name(pending.pop())
        if name in wanted or name not in installed or name in hidden:
            continue
        wanted.add(name)
        for line in installed[name].requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    entries = set().union(*(top_entries(installed[name]) for name in wanted))
    entries = {e for e in entries if e not in ("..", "__pycache__") and (Path(site) / e).exists()}
    return tuple(sorted(entries | {path.name for path in Path(site).glob("*.pth") if _imports_shown(path, entries)}))


@functools.cache
def hidden_entries(site: str) -> tuple[str, ...]:
    """The entries of the site-packages folder ``site`` that hold what no kernel sees (`KERNEL_HIDES`)."""
    installed = _installed(site)
    hidden = (installed[_name(name)] for name in KERNEL_HIDES if _name(name) in installed)
    return tuple(sorted(e for e in set().union(*map(top_entries, hidden)) if e not in ("..", "__pycache__")
                        and os.path.lexists(os.path.join(site, e))))


def top_entries(distribution: Distribution) -> set[str]:
    """The first part of every path ``distribution`` installed, relative to its site-packages folder: what
    ``{PurePosixPath(f).parts[0] for f in distribution.files}`` gives, read from its RECORD without a path object
    per file (torch's RECORD lists some 20 000 files)."""
    record = distribution.read_text("RECORD")
    if not record:  # no RECORD (an egg-info's installed-files.txt or SOURCES.txt): importlib's own reading
        return {PurePosixPath(str(file)).parts[0] for file in distribution.files or ()}
    return {_first_part(row[0]) for row in csv.reader(record.splitlines()) if row and row[0]}


def _first_part(path: str) -> str:
    """``PurePosixPath(path).parts[0]``, without making the path where its first part is a plain name."""
    head = path.split("/", 1)[0]
    return head if head not in ("", ".") else PurePosixPath(path).parts[0]


def _imports_shown(pth: Path, entries: set[str]) -> bool:
    """Whether every module the ``.pth`` file ``pth`` imports is in the standard library or among ``entries``
    (a ``.pth`` that imports a hidden module would print an error at each start)."""
    for line in pth.read_text(errors="replace").splitlines():
        if not line.startswith(("import ", "import\t")):
            continue  # a folder to add, not code
        for module in (a or b for a, b in re.findall(r"(?:^|;)\s*import\s+(\w+)|__import__\(['\"](\w+)", line)):
            if module not in sys.stdlib_module_names and not {module, f"{module}.py"} & entries:
                return False
    return True
