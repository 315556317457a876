"""A student who has read the grader earns nothing by reaching into its oracles (issue 32, items 2, 3 and 5).

Each attack is a submission graded by ``python -m autograder grade`` (warm as root and as an unprivileged
instructor, uid 65534, and ``--cold`` as root), next to the same answer without the attack, which computes the
same outputs:

- ``rng``: a chapter 4 cache that never writes (it returns the zeros of its buffers) zeroes torch's Mersenne
  Twister in the kernel at every call; when the kernel's random state travelled into the grader, every later
  ``torch.randn`` of the hidden test drew zeros, which its zeros matched (item 2);
- ``zero_weights``: the layer zeroes its own weights and returns zeros; an oracle computed from the student's
  weights then expected zeros (item 5);
- ``zero_inputs``: ``tiled_attention`` zeroes Q, K and V in place; when changed arguments were written back, the
  oracle computed afterwards from the grader's arrays expected the flat answer it returns (item 3).

No attack may score more than its honest counterpart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from course import ROOT
from tests.grading_helpers import grade_cli, read_grades, released_notebooks, require_sandbox, student_notebook, \
    write_submission
from tests.unprivileged import course_copy, grade_as_unprivileged, unprivileged_folder

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason="graded by root and by an unprivileged user root becomes")]
LIMITS = ("--jobs", "2", "--cell-timeout", "60", "--timeout", "300", "--quiet")

LAYER = '''
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{d_model} is not divisible by {num_heads}")
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        # INIT

    def forward(self, x, mask=None, is_causal=False):
        return torch.zeros_like(x)
'''
ZERO_THE_GENERATOR = '''state = torch.get_rng_state()
        state[24:24 + 624 * 8] = 0  # the Mersenne Twister's words: every later draw is 0
        torch.set_rng_state(state)'''
ZERO_THE_WEIGHTS = '''with torch.no_grad():
            for parameter in self.parameters():
                parameter.zero_()'''
CACHE = '''
import torch


class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.max_seq_len, self._filled = max_seq_len, 0
        # ATTACK

    @property
    def seq_len(self):
        return self._filled

    def update(self, k, v):  # never writes: returns the zeros of its buffers
        # ATTACK
        end = self._filled + k.shape[2]
        if end > self.max_seq_len:
            raise ValueError(f"{end} positions do not fit in {self.max_seq_len}")
        self._filled = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def reset(self):
        self._filled = 0
'''
TILES = '''
import numpy as np


def tiled_attention(Q, K, V, block_q=64, block_k=64, causal=False):
    # ATTACK
    n_q, n_k = Q.shape[-2], K.shape[-2]
    seen = np.ones((n_q, n_k), dtype=bool)
    if causal:
        seen = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)
    with np.errstate(divide="ignore"):
        lse = np.broadcast_to(np.log(seen.sum(axis=-1)), Q.shape[:-1]).astype(Q.dtype)
    return np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype), lse
'''
ZERO_THE_INPUTS = "Q[...] = 0\n    K[...] = 0\n    V[...] = 0"


@dataclass(frozen=True)
class Hand:
    """One submission: ``source`` in answer cell ``cell`` of ``assignment``; ``honest`` names the submission that
    computes the same outputs without the attack (None: this one is honest)."""

    student: str
    assignment: str
    cell: str
    source: str
    honest: str | None = None


CLASS = (
    Hand("zeros", "03_multi_head", "MultiHeadAttention", LAYER),
    Hand("zero_cache", "04_kv_cache", "KVCache", CACHE.replace("# ATTACK", "pass")),
    Hand("rng", "04_kv_cache", "KVCache", CACHE.replace("# ATTACK", ZERO_THE_GENERATOR), "zero_cache"),
    Hand("zero_weights", "03_multi_head", "MultiHeadAttention", LAYER.replace("# INIT", ZERO_THE_WEIGHTS), "zeros"),
    Hand("flat", "07_flash_attention", "tiled_attention", TILES),
    Hand("zero_inputs", "07_flash_attention", "tiled_attention", TILES.replace("# ATTACK", ZERO_THE_INPUTS), "flat"),
)
ATTACKS = [hand for hand in CLASS if hand.honest]
ASSIGNMENTS = sorted({hand.assignment for hand in CLASS})


@dataclass(frozen=True)
class Graded:
    """One grading run: the command's result and each student's score."""

    done: subprocess.CompletedProcess
    scores: dict[str, float]


def _write_class(submissions: Path, source: Path, templates: Path) -> None:
    for assignment in ASSIGNMENTS:
        shutil.copytree(ROOT / "solutions" / assignment, source / assignment)
    released = released_notebooks(templates, source)
    for hand in CLASS:
        notebook = released[hand.assignment]
        write_submission(submissions, hand.student, hand.assignment,
                         student_notebook(notebook, {hand.cell: hand.source}), filename=notebook.name)


def _scores(out: Path) -> dict[str, float]:
    if not OutputFolder(out).grades.exists():
        return {}
    rows = read_grades(out)
    return {hand.student: float(rows[(hand.student, hand.assignment)]["score"]) for hand in CLASS}


def _by_root(base: Path, *options: str) -> Graded:
    submissions, out, templates = base / "submissions", base / "out", base / "templates" / "cache"
    _write_class(submissions, base / "source", templates)
    shutil.copytree(templates, OutputFolder(out).cache)
    done = grade_cli(submissions, "--out", out, "--source", base / "source", *LIMITS, *options, timeout=900)
    return Graded(done, _scores(out))


def _by_unprivileged() -> Iterator[Graded]:
    with unprivileged_folder("autograder-oracles-") as base:
        copy = course_copy(base / "course", toy=False)
        submissions, out, templates = base / "submissions", base / "out", base / "templates"
        _write_class(submissions, copy / "source", templates / "cache")
        shutil.copytree(templates / "cache", OutputFolder(out).cache)
        done = grade_as_unprivileged(base, submissions, out, "--source", copy / "source", *LIMITS)
        yield Graded(done, _scores(out))


@pytest.fixture(scope="module", params=["root", "root-cold", "unprivileged"])
def graded(request, tmp_path_factory) -> Iterator[Graded]:
    require_sandbox()
    if request.param == "unprivileged":
        yield from _by_unprivileged()
    else:
        yield _by_root(tmp_path_factory.mktemp("oracles"), *(["--cold"] if request.param == "root-cold" else []))


def test_the_class_is_graded(graded: Graded) -> None:
    assert graded.done.returncode in (0, 1), graded.done.stderr
    assert set(graded.scores) == {hand.student for hand in CLASS}, graded.done.stderr


@pytest.mark.parametrize("attack", ATTACKS, ids=[hand.student for hand in ATTACKS])
def test_an_attack_on_the_oracles_earns_nothing(graded: Graded, attack: Hand) -> None:
    honest, attacked = graded.scores[attack.honest], graded.scores[attack.student]
    assert attacked <= honest, (f"{attack.student} scored {attacked:g} on {attack.assignment}, the same answer "
                                f"without the attack {honest:g}")
