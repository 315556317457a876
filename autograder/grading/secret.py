"""The instructor's secret, from which hidden tests draw their inputs, and the key of each hand-in.

The hidden tests are public (this repository), so their inputs cannot be: each hidden test draws them
from `autograder.checks.hidden_seed`, which returns its fixed ``base`` in a plain kernel and, under
``python -m autograder grade``, a seed derived from the hand-in's key. That key is an HMAC, under the
instructor's secret, of the student's id, the assignment and the digest of what was handed in:

- a rerun of the same hand-in draws the same inputs (the same grade);
- a resubmission (other content), another student or another secret (another output folder) draws
  others, and nothing a student sees of one hand-in's inputs tells anything of another's.

The secret is 32 random bytes (hex, one line) in ``DIR/.hidden-inputs.secret``
(`autograder.reports.output_folder.OutputFolder.secret`), created by the first `grade` into DIR with mode 0600
(``O_CREAT | O_EXCL``), or the file ``--secret-file`` names (created the same way when missing), which
shares one secret between output folders. A file that its group or others may read or write, a link, or
not a regular file is refused. Only the grading process reads it: workers get each
job's key (`autograder.records.Job.hidden_key`), kernels get nothing (the sandbox shows them neither DIR
nor the instructor's files, and no key is in their environment).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

SECRET_BYTES = 32


class SecretUnusable(Exception):
    """The secret file cannot be made or read, or others may read it; the message says which and why."""


def load_secret(path: Path) -> bytes:
    """The secret in ``path``, made there first (mode 0600, never following a link) when no file is there."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return _read_secret(path)
    except OSError as error:
        raise SecretUnusable(f"cannot create the secret of the hidden inputs {path}: {error.strerror}") from error
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(SECRET_BYTES) + "\n")
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise SecretUnusable(f"cannot read the secret of the hidden inputs {path}: {error.strerror} (a link is "
                             "never followed)") from error
    with os.fdopen(descriptor, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise SecretUnusable(f"the secret of the hidden inputs {path} is not a regular file")
        if mode & 0o077:
            raise SecretUnusable(f"the secret of the hidden inputs {path} has mode {stat.S_IMODE(mode):04o}: others "
                                 f"could read it and predict every hidden input; run chmod 600 {path}")
        text = handle.read(4 * SECRET_BYTES).strip()
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) < SECRET_BYTES // 2:
        raise SecretUnusable(f"the secret of the hidden inputs {path} is not at least {SECRET_BYTES // 2} bytes in "
                             "hex on one line (it was not written by `grade`, or was cut)")
    return secret


def hand_in_digest(notebooks: dict[str, str | None]) -> str:
    """sha256 of what was handed in: each notebook's name and bytes (missing ones marked as such)."""
    digest = hashlib.sha256()
    for name in sorted(notebooks):
        path = notebooks[name]
        digest.update(f"\0{name}\0".encode() + (Path(path).read_bytes() if path else b"<missing>"))
    return digest.hexdigest()


def hand_in_key(secret: bytes, student: str, assignment: str, notebooks: dict[str, str | None]) -> str:
    """The key of one hand-in (hex): HMAC-SHA256 under ``secret`` of the student, the assignment and the digest
    of the submitted notebooks (`hand_in_digest`)."""
    message = "\0".join(("hidden-inputs", student, assignment, hand_in_digest(notebooks))).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()

