"""The disk quota counts everything a kernel leaves in its home (issue 32, item 6): links, folders and empty
files cost at least a block each, the walk never follows a link, and a notebook that hoards them is not
graded (`autograder.guards.folder_bytes`, `DiskQuota`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autograder.guards import INODE_BYTES, MAX_DEPTH, folder_bytes
from tests import sandbox_attacks as attacks
from autograder.layout import OutputFolder
from tests.grading_helpers import (FIXTURE_SOURCE, grade_cli, read_grades, released_notebooks, student_notebook,
                                   write_submission)

# 47 MiB of entries that hold no regular file's bytes: links with 4 KB targets, folders and empty files.
HOARDS_INODES = '''import os, time
os.makedirs("hoard", exist_ok=True)
for i in range(4000):
    os.symlink("x" * 4000, f"hoard/link-{i}")
    os.mkdir(f"hoard/dir-{i}")
    open(f"hoard/empty-{i}", "w").close()
time.sleep(3)
'''


def test_links_folders_and_empty_files_count(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big").write_bytes(b"x" * 2**20)
    home = tmp_path / "home"
    home.mkdir()
    for i in range(10):
        os.symlink("x" * 4000, home / f"link-{i}")
        (home / f"dir-{i}").mkdir()
        (home / f"empty-{i}").touch()
    os.symlink(tmp_path / "outside", home / "to-outside")  # never followed: the 1 MiB outside is not counted
    assert folder_bytes(home) == 31 * INODE_BYTES


def test_a_folder_nested_past_the_depth_counts_as_over_any_quota(tmp_path: Path) -> None:
    folder = tmp_path
    for _ in range(MAX_DEPTH + 1):
        folder = folder / "d"
        folder.mkdir()
    assert folder_bytes(tmp_path) == sys.maxsize


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_notebook_hoarding_inodes_is_not_graded(tmp_path: Path) -> None:
    released = released_notebooks(OutputFolder(tmp_path / "out").cache)["toy"]
    for student, add in (("hoarder", attacks.attack(HOARDS_INODES)), ("honest", attacks.ADD)):
        write_submission(tmp_path / "subs", student, "toy", student_notebook(released, {**attacks.REFERENCE, "add": add}))
    done = grade_cli(tmp_path / "subs", "--out", tmp_path / "out", "--source", FIXTURE_SOURCE, "--quiet",
                     "--disk", "32", "--jobs", "2")
    rows = read_grades(tmp_path / "out")
    assert rows[("honest", "toy")]["score"] == "5", done.stderr[-2000:]
    assert rows[("hoarder", "toy")]["reason"].startswith("not graded: too large"), rows[("hoarder", "toy")]
