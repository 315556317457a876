"""Fingerprints of code and the overlap of two of them: copydetect's winnowing (Pygments tokens normalised, every
NOISE-character run hashed, the copied runs merged into slices), computed as copydetect 0.5.0 computes it.

copydetect's package imports matplotlib.pyplot whatever is used of it (the grader needs neither), and its
`compare_files` gathers the positions of the hashes two codes share one NumPy array per hash, most of what a pair
costs (`python -m benchmarks.similarity` prints it); a class of 300 students is 44,850 pairs of each assignment.
Here a `Fingerprint` is copydetect's `CodeFingerprint` (its normalised code, offsets, hashes and token coverage),
its hashes kept as a set of Python integers (how many two codes share is one intersection) and as arrays, and
`overlap` finds the copied positions with one sorted search a side. A test holds every figure equal to copydetect's
(`CodeFingerprint`, `compare_files`) on the bank's answers.

Runs in the grader (`autograder.reports.similarity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

NOISE = 25  # copydetect's default: runs shorter than 25 normalised characters are not fingerprinted


@dataclass(frozen=True)
class Fingerprint:
    """copydetect's fingerprint of one code, with a winnowing window of 1 (copydetect's default: every
    NOISE-character run of the normalised code), less the boilerplate's runs."""

    code: str  # as handed in
    normalised: str  # copydetect's filtered code
    offsets: np.ndarray  # N x 2: copydetect's offsets, which move a position in ``normalised`` into ``code``
    positions: np.ndarray  # int64, ascending: where each fingerprinted run starts in ``normalised``
    hashes: np.ndarray  # int64: the hash of the run at each of ``positions``
    distinct: np.ndarray  # int64, sorted, unique: ``hashes``
    kept: frozenset[int]  # ``distinct``
    coverage: float  # copydetect's token coverage: the characters of ``normalised`` in some fingerprinted run

    @classmethod
    def of(cls, code: str, boilerplate: np.ndarray | None) -> Fingerprint:
        """The fingerprint of Python ``code``, less the runs whose hash is in ``boilerplate`` (sorted hashes), as
        copydetect's ``CodeFingerprint(..., NOISE, 1, boilerplate, language="python")`` makes it."""
        import numpy as np

        normalised, offsets = _normalised(code)
        hashes = np.array([hash(normalised[start:start + NOISE]) for start in range(len(normalised) - NOISE + 1)])
        positions = np.arange(len(hashes))
        if boilerplate is not None and len(boilerplate) > 0:  # copydetect's call: a hash found twice goes too
            _, common, _ = np.intersect1d(hashes, boilerplate, return_indices=True, assume_unique=True)
            positions, hashes = np.delete(positions, common), np.delete(hashes, common)
        positions, hashes = positions.astype(np.int64), hashes.astype(np.int64)
        covered = np.zeros(len(normalised))
        for step in range(NOISE):
            covered[positions + step] = 1
        return cls(code, normalised, offsets, positions, hashes, np.unique(hashes), frozenset(hashes.tolist()),
                   float(np.sum(covered)))

    def shared(self, other: Fingerprint) -> int:
        """How many distinct hashes the two fingerprints have in common."""
        return len(self.kept & other.kept)

    def in_raw(self, slices: np.ndarray) -> np.ndarray:
        """``slices`` (2 x N) of the normalised code moved to where they are in the code handed in (the characters
        that normalising took out before each), as `compare_files` moves them."""
        import numpy as np

        if len(self.offsets) == 0:
            return slices
        at = np.minimum(np.searchsorted(self.offsets[:, 0], slices), self.offsets.shape[0] - 1)
        return slices + self.offsets[:, 1][at]


@dataclass(frozen=True)
class Overlap:
    """What copydetect's `compare_files` gives of two fingerprints: each one's share of its fingerprinted characters
    that the other has too (0 for an empty normalised code), and the copied slices of each normalised code (2 x N:
    starts, then ends; `Fingerprint.in_raw` moves them into the code handed in)."""

    shares: tuple[float, float]
    copied: tuple[np.ndarray, np.ndarray]


def overlap(a: Fingerprint, b: Fingerprint) -> Overlap:
    """The `Overlap` of ``a`` and ``b``, as copydetect's `compare_files` computes it."""
    import numpy as np

    copied_a = _slices(a.positions[_found(a.hashes, b.distinct)])
    copied_b = _slices(b.positions[_found(b.hashes, a.distinct)])
    if len(copied_a[0]) == 0:
        return Overlap((0, 0), (np.array([]), np.array([])))
    return Overlap((_share(a, copied_a), _share(b, copied_b)), (copied_a, copied_b))


def _normalised(code: str) -> tuple[str, np.ndarray]:
    """copydetect's ``filter_code`` of Python ``code``: every name, attribute and variable becomes V, a function's name
    F, a class's name O, a string's contents S; whitespace and comments go. With the offsets that lead back to the
    code (copydetect's, a class name's included: its offset is the name's length less one)."""
    import numpy as np
    from pygments import lexers, token

    variables = {token.Name, token.Name.Variable, token.Name.Attribute}
    out, offset, offsets = [], 0, [[0, 0]]
    length = 0
    for kind, text in lexers.get_lexer_by_name("python").get_tokens(code):
        letter = ("V" if kind in variables else "F" if kind in token.Name.Function else "O" if kind in token.Name.Class
                  else "P" if kind in (token.Comment.Preproc, token.Comment.Hashbang) else "")
        if letter:
            out.append(letter)
            length += 1
            offsets.append([length - 1, len(text) - 1 if letter == "O" else offset])
            offset += len(text) - 1
        elif kind in token.Text or kind in token.Comment:
            offsets.append([length - 1, offset])
            offset += len(text)
        elif kind in token.Literal.String and text in ("'", '"'):
            out.append('"')
            length += 1
        elif kind in token.Literal.String:
            out.append("S")
            length += 1
            offsets.append([length - 1, offset])
            offset += len(text) - 1
        else:
            out.append(text)
            length += len(text)
    return "".join(out), np.array(offsets)


def _found(values: np.ndarray, sorted_distinct: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``sorted_distinct`` (a sorted array of distinct values): a boolean mask."""
    import numpy as np

    if len(sorted_distinct) == 0:
        return np.zeros(len(values), dtype=bool)
    return sorted_distinct[np.minimum(np.searchsorted(sorted_distinct, values), len(sorted_distinct) - 1)] == values


def _slices(starts: np.ndarray) -> np.ndarray:
    """copydetect's ``get_copied_slices``: the runs starting at ``starts`` (ascending), NOISE characters each, merged
    where they touch or overlap; 2 x N (starts, then ends)."""
    import numpy as np

    if len(starts) == 0:
        return np.array([[], []])
    gaps = np.where(np.diff(starts) > NOISE - 1)[0]  # a run ends before the next begins
    firsts = np.concatenate([starts[:1], starts[gaps + 1]])
    lasts = np.concatenate([starts[gaps], starts[-1:]])
    return np.array([firsts, lasts + NOISE])


def _share(fingerprint: Fingerprint, copied: np.ndarray) -> float:
    """The copied characters of ``copied`` over the fingerprint's coverage; 0 for an empty normalised code."""
    import numpy as np

    return np.sum(copied[1] - copied[0]) / fingerprint.coverage if fingerprint.normalised else 0
