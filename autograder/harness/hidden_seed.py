"""The seed a hidden test draws its inputs from, derived from the hand-in's key.

The grader (`autograder.grading.secret.hand_in_key`) gives each job the key of its hand-in; the trusted
runner (`autograder.harness.execute.TrustedExecute`) binds it under `HIDDEN_KEY` in the test cells'
namespace, and `autograder.checks.hidden_seed` derives each hidden test's seed from it with `derived_seed`.
Runs in the worker, and in a student's own kernel where no key is bound (the seed is then the test's fixed one).
"""

from __future__ import annotations

import hashlib
import hmac

HIDDEN_KEY = "__hidden_key__"  # the name under which the trusted runner binds a job's key in the test cells' namespace
SEED_BITS = 62  # a derived seed fits numpy's, torch's and random's seeding, with room for `seed + i`


def derived_seed(key: str, base: int) -> int:
    """The seed a hidden test with fixed seed ``base`` draws from under the hand-in ``key``: in [0, 2**62)."""
    mac = hmac.new(bytes.fromhex(key), str(int(base)).encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:8], "big") >> (64 - SEED_BITS)
