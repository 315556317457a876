"""sha256 digests of folders: what keys an assignment's template (`autograder.grading.templates`) and the course
version every Dask worker must share with the client (`autograder.workers.dask_worker`)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def hash_folder(folder: Path) -> str:
    """sha256 of every file below ``folder`` (by relative path and content), caches and checkpoints left out."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and ".ipynb_checkpoints" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
