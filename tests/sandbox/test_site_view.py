"""`autograder.sandbox.site_view`: the entries of site-packages a kernel sees, read from each distribution's RECORD
the way importlib reads its files."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path, PurePosixPath

import pytest

from autograder.sandbox.bwrap import command, environment, prepare_home
from autograder.sandbox.limits import Limits
from autograder.sandbox.site_view import (KERNEL_HIDES, _first_part, _installed, _name, hidden_entries,
                                         shown_entries, site_folders, top_entries)
from tests.grading_helpers import require_sandbox


def test_each_distribution_installed_here_has_the_entries_importlib_lists() -> None:
    """`top_entries` reads RECORD itself (importlib makes a path object per file); for every distribution of this
    interpreter it must name what ``Distribution.files`` names: the entries a kernel is shown come from it."""
    found = list(distributions(path=site_folders()))
    assert len(found) > 50, f"expected the development environment's distributions, found {len(found)}"
    for distribution in found:
        expected = {file.parts[0] for file in distribution.files or ()}  # PackagePath: a PurePosixPath
        got = top_entries(distribution)
        assert got == expected, (f"top_entries({distribution.metadata['Name']}): RECORD read differently from "
                                 f"importlib's files: only in top_entries {sorted(got - expected)}, only in "
                                 f"Distribution.files {sorted(expected - got)}")


@pytest.mark.parametrize("path, first", [
    ("torch/__init__.py", "torch"), ("six.py", "six.py"), ("./numpy/core.py", "numpy"), ("/usr/bin/x", "/"),
    ("../../bin/jupyter", ".."), ("a//b", "a"), ("numpy-2.4.6.dist-info/RECORD", "numpy-2.4.6.dist-info"),
])
def test_the_first_part_of_a_recorded_path_is_pathlibs(path: str, first: str) -> None:
    assert _first_part(path) == first == PurePosixPath(path).parts[0]


def test_the_distributions_are_named_as_their_metadata_names_them() -> None:
    """`_installed` names each distribution from its metadata folder's name, not its METADATA file: for every
    site-packages folder here, the names (and the versions behind them) must be those importlib reads from the
    metadata itself."""
    for site in site_folders():
        expected = {_name(found.metadata["Name"]): found.metadata["Version"] for found in distributions(path=[site])}
        got = {name: found.metadata["Version"] for name, found in _installed(site).items()}
        assert got == expected, (f"{site}: only from the folders' names "
                                 f"{sorted(set(got.items()) - set(expected.items()))}, "
                                 f"only from METADATA {sorted(set(expected.items()) - set(got.items()))}")


@pytest.mark.parametrize("packages", [("numpy",), ("torch",)])
def test_a_kernel_sees_ipykernel_but_not_its_debugger(packages: tuple[str, ...]) -> None:
    # ipykernel requires debugpy, which nothing attaches to in a grading kernel: hidden, ipykernel starts with no
    # debugger and no zygote imports pydevd. This is the view of a chapter that names its packages; one that names
    # none sees them all but debugpy's (test_no_sandboxed_kernel_finds_ipykernels_debugger, through a sandbox).
    shown = {entry for site in site_folders() for entry in shown_entries(site, packages)}
    hidden = {entry for site in site_folders() for name, distribution in _installed(site).items()
              if name in map(_name, KERNEL_HIDES) for entry in top_entries(distribution)}
    assert hidden, "debugpy is installed with ipykernel here"
    assert {"ipykernel", "IPython", *packages} <= shown, sorted(shown)
    assert not hidden & shown, f"a kernel of {packages} sees ipykernel's debugger: {sorted(hidden & shown)}"


# Run in a sandbox: whether ipykernel finds its debugger, whether debugpy's server imports, and whether the folder
# that held debugpy can be written (a zygote's kernels share its view: a file written there would reach the next).
SEES_DEBUGGER = """
import sys
import ipykernel.debugger
try:
    import debugpy.server
except ImportError:
    imported = False
else:
    imported = True
try:
    open(sys.argv[1] + "/__init__.py", "w").close()
except OSError:
    written = False
else:
    written = True
print(ipykernel.debugger._is_debugpy_available, imported, written)
"""


@pytest.mark.sandbox
@pytest.mark.parametrize("packages", [("numpy",), None], ids=["numpy chapter", "every package (torch chapters)"])
def test_no_sandboxed_kernel_finds_ipykernels_debugger(packages: tuple[str, ...] | None, tmp_path: Path) -> None:
    # A chapter that names no packages (the torch chapters) sees every installed one: debugpy's entries are covered
    # there by empty read-only ones. Before, its zygote imported pydevd and each kernel started a debugger.
    require_sandbox()
    folder = next(f"{site}/{entry}" for site in site_folders() for entry in hidden_entries(site)
                  if entry == "debugpy")
    home = tmp_path / "kernel"
    home.mkdir()
    prepare_home(home)
    done = subprocess.run(command(home, home, Limits(), environment(home, Limits(), ()),
                                  [sys.executable, "-c", SEES_DEBUGGER, folder], packages=packages),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False"], (
        f"a sandboxed kernel of {packages or 'every package'}: ipykernel's debugger available, debugpy.server "
        f"imported, its folder written: {done.stdout.strip()} (all should be False)")
