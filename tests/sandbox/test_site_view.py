"""`autograder.sandbox.site_view`: the entries of site-packages a kernel sees, read from each distribution's RECORD
the way importlib reads its files."""

from __future__ import annotations

from importlib.metadata import distributions
from pathlib import PurePosixPath

import pytest

from autograder.sandbox.site_view import (KERNEL_HIDES, _first_part, _installed, _name, shown_entries,
                                         site_folders, top_entries)


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
    # debugger and no zygote imports pydevd. Every sandboxed kernel of the suite (warm and cold) starts with this view.
    shown = {entry for site in site_folders() for entry in shown_entries(site, packages)}
    hidden = {entry for site in site_folders() for name, distribution in _installed(site).items()
              if name in map(_name, KERNEL_HIDES) for entry in top_entries(distribution)}
    assert hidden, "debugpy is installed with ipykernel here"
    assert {"ipykernel", "IPython", *packages} <= shown, sorted(shown)
    assert not hidden & shown, f"a kernel of {packages} sees ipykernel's debugger: {sorted(hidden & shown)}"
