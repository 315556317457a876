"""Fast unit tests of `autograder.reports.fingerprints`: its fingerprints are copydetect's (`CodeFingerprint`) and its
comparison of two gives what copydetect's `compare_files` gives, on the bank's answers of two assignments compared as
`grade` compares students."""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from copydetect import CodeFingerprint, compare_files

from autograder.reports.fingerprints import NOISE, Fingerprint, overlap
from benchmarks.similarity import rename
from course.chapters import chapter
from course.notebooks import solution_sources
from tests import bank


def _codes(assignment: str) -> tuple[dict[str, str], str]:
    """A class of ``assignment`` as the similarity report sees it (name -> code), and its starter: the released
    notebook blank, the reference, the reference twice (each run of it twice over), each answer of the bank in place
    of its cell, a renamed and reordered copy of the reference, an empty hand-in and one of comments only."""
    module = next(m for m in bank.modules() if m.ASSIGNMENT == assignment)
    ch = chapter(assignment)
    starter, reference = solution_sources(ch.exercise), solution_sources(ch.solution)
    codes = {"blank": "\n\n".join(starter.values()), "reference": "\n\n".join(reference.values()),
             "twice": "\n\n".join([*reference.values(), *reference.values()]),
             "copy": "\n\n".join(rename(source, "x") for source in reversed(list(reference.values()))),
             "empty": "", "comments": "# nothing here\n# at all\n"}
    for number, answer in enumerate(module.RIGHT + module.WRONG):
        codes[f"answer{number}"] = "\n\n".join(answer.source if cell == answer.cell else reference[cell]
                                               for cell in reference)
    return codes, "\n\n".join(starter.values())


def _copydetects(code: str, boilerplate: np.ndarray) -> CodeFingerprint:
    return CodeFingerprint("solution.py", NOISE, 1, boilerplate, language="python", fp=io.StringIO(code))


@pytest.mark.parametrize("assignment", ["01_similarity", "03_multi_head"])
@pytest.mark.parametrize("left_out", ["starter", "nothing"])
def test_fingerprints_are_copydetects(assignment: str, left_out: str) -> None:
    """With the starter's fingerprints left out, as `grade` compares, and with none (copydetect's removal of them
    also drops a hash that one code has twice: only without it do runs repeat within a code, and the overlap test
    compares one assignment each way)."""
    codes, starter = _codes(assignment)
    boilerplate = np.array(sorted(Fingerprint.of(starter if left_out == "starter" else "", None).kept))
    for name, code in codes.items():
        ours, theirs = Fingerprint.of(code, boilerplate), _copydetects(code, boilerplate)
        assert (ours.code, ours.normalised) == (theirs.raw_code, theirs.filtered_code), name
        assert np.array_equal(ours.offsets, theirs.offsets), name
        at = sorted((int(i), int(h)) for h, where in theirs.hash_idx.items() for i in where)
        assert (ours.positions.tolist(), ours.hashes.tolist()) == ([i for i, _ in at], [h for _, h in at]), name
        assert ours.kept == {int(h) for h in theirs.hashes} == set(ours.distinct.tolist()), name
        assert ours.coverage == theirs.token_coverage, f"{name}: coverage {ours.coverage}, {theirs.token_coverage}"


@pytest.mark.parametrize(("assignment", "left_out"), [("01_similarity", "nothing"), ("03_multi_head", "starter")])
def test_overlap_gives_what_copydetects_compare_files_gives_on_every_pair(assignment: str, left_out: str) -> None:
    codes, starter = _codes(assignment)
    boilerplate = np.array(sorted(Fingerprint.of(starter if left_out == "starter" else "", None).kept))
    prints = {name: (Fingerprint.of(code, boilerplate), _copydetects(code, boilerplate))
              for name, code in codes.items()}
    overlapping = 0
    for (a, (print_a, theirs_a)), (b, (print_b, theirs_b)) in itertools.combinations(prints.items(), 2):
        _, shares, slices = compare_files(theirs_a, theirs_b)
        found = overlap(print_a, print_b)
        assert found.shares == shares, f"{a} vs {b}: shares {found.shares}, copydetect's {shares}"
        for fingerprint, ours, theirs in zip((print_a, print_b), found.copied, slices):
            ours = fingerprint.in_raw(ours)
            assert np.array_equal(ours, theirs), f"{a} vs {b}: slices {ours.tolist()}, copydetect's {theirs.tolist()}"
        assert print_a.shared(print_b) == len(theirs_a.hashes & theirs_b.hashes), f"{a} vs {b}"
        overlapping += bool(shares[0])
    assert overlapping >= len(codes), f"only {overlapping} pairs of {assignment} overlap: the test compares too little"


def test_the_similarity_report_imports_neither_copydetect_nor_matplotlib() -> None:
    """copydetect's package imports matplotlib.pyplot, which the grader needs no more than copydetect itself."""
    code = ("import sys\nfrom autograder.reports.similarity import similar_pairs\n"
            "from course.chapters import chapter\nfrom course.notebooks import solution_sources\n"
            "answer = '\\n\\n'.join(solution_sources(chapter('01_similarity').solution).values())\n"
            "assert similar_pairs('a', {'ada': answer, 'bob': answer}, '', 0.0)\n"
            "print(sorted(m for m in ('copydetect', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]", f"the similarity report imported {done.stdout.strip()}"
