"""How similar independent right answers look, how similar copies look, and what a class of 300 costs.

    python -m benchmarks.similarity

1. Independent right answers: for every solution cell of every assignment, the reference solution and
   each differently written right answer of the bank (``tests/bank``) are handed in as one student each
   (that cell filled in, the others left as released), and every pair is compared as ``grade`` compares
   students. The distribution of their similarity is what the default threshold
   (`autograder.reports.similarity.DEFAULT_THRESHOLD`) is chosen from: a pair below MIN_SHARED shared fingerprints
   is never listed and counts as 0.
2. Copies: each assignment's reference solution against a copy of it with every identifier renamed, the
   solution cells in reverse order, the comments reworded and the indentation changed.
3. Cost: 300 synthetic students on one assignment (each solution cell a random reference, right or wrong
   answer of the bank, or left blank; identifiers renamed per student), written as notebooks and compared
   as ``grade`` compares them (`autograder.reports.similarity.assignment_pairs`), timed.
"""

from __future__ import annotations

import builtins
import io
import json
import keyword
import random
import statistics
import tempfile
import time
import tokenize
from pathlib import Path

from autograder.reports.similarity import DEFAULT_THRESHOLD, MIN_SHARED, assignment_pairs, similar_pairs
from course.chapters import chapter
from course.notebooks import solution_sources, student_notebook
from tests import bank

CLASS_SIZE = 300
CLASS_ASSIGNMENT = "03_multi_head"


def rename(code: str, tag: str) -> str:
    """``code`` with every identifier that is not a keyword, a builtin, ``self`` or an attribute renamed (``x`` ->
    ``x_<tag>``), every comment reworded and every indentation doubled: what copydetect must see through."""
    out, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        text = token.string
        if (token.type == tokenize.NAME and not keyword.iskeyword(text) and not hasattr(builtins, text)
                and text not in ("self", "cls") and previous != "."):
            text = f"{text}_{tag}"
        elif token.type == tokenize.COMMENT:
            text = f"# note {tag}"
        out.append((token.type, text))
        previous = token.string
    return tokenize.untokenize(out).replace("\n    ", "\n        ")


def independent_right_answers() -> list[tuple[float, str]]:
    """(similarity, 'assignment cell: answer vs answer') for every pair of independent right answers."""
    scores = []
    for module in bank.modules():
        ch = chapter(module.ASSIGNMENT)
        starter = solution_sources(ch.exercise)
        reference = solution_sources(ch.solution)
        for cell in reference:
            answers = {"reference": reference[cell],  # and the right answers not made by editing it
                       **{a.mistake: a.source for a in module.RIGHT if a.cell == cell and not a.derived}}
            codes = {name: "\n\n".join(source if c == cell else starter[c] for c in starter)
                     for name, source in answers.items()}
            found = {(p.student_a, p.student_b): p.similarity
                     for p in similar_pairs(module.ASSIGNMENT, codes, "\n\n".join(starter.values()), 0.0)}
            names = sorted(codes)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    scores.append((found.get((a, b), 0.0), f"{module.ASSIGNMENT} {cell}: {a!r} vs {b!r}"))
    return sorted(scores, reverse=True)


def copies() -> dict[str, float]:
    """assignment -> similarity of the reference solution and its renamed, reordered, re-commented copy."""
    scores = {}
    for module in bank.modules():
        ch = chapter(module.ASSIGNMENT)
        starter, reference = solution_sources(ch.exercise), solution_sources(ch.solution)
        codes = {"original": "\n\n".join(reference.values()),
                 "copy": "\n\n".join(rename(source, "x") for source in reversed(list(reference.values())))}
        pairs = similar_pairs(module.ASSIGNMENT, codes, "\n\n".join(starter.values()), 0.0)
        scores[module.ASSIGNMENT] = pairs[0].similarity if pairs else 0.0
    return scores


def synthetic_class(folder: Path, size: int, assignment: str, seed: int = 0) -> dict[str, dict[str, str]]:
    """Write ``size`` students' notebooks of ``assignment`` under ``folder``; student -> {notebook: path}."""
    module = next(m for m in bank.modules() if m.ASSIGNMENT == assignment)
    ch = chapter(assignment)
    reference = solution_sources(ch.solution)
    choices = {cell: [reference[cell], None] + [a.source for a in module.RIGHT + module.WRONG if a.cell == cell]
               for cell in reference}
    rng = random.Random(seed)
    students = {}
    for number in range(size):
        student = f"student{number:03d}"
        answers = {cell: rename(source, str(number)) for cell, options in choices.items()
                   if (source := rng.choice(options)) is not None}
        path = folder / student / f"{ch.notebook}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(student_notebook(ch.exercise, answers)))
        students[student] = {ch.notebook: str(path)}
    return students


def main() -> None:
    scores = independent_right_answers()
    values = sorted(s for s, _ in scores)
    above = [(s, name) for s, name in scores if s >= DEFAULT_THRESHOLD]
    print(f"independent right answers (bank RIGHT vs reference, one cell each): {len(values)} pairs")
    print(f"  similarity median {statistics.median(values):.2f}, 90th percentile "
          f"{values[int(0.9 * len(values))]:.2f}, 95th {values[int(0.95 * len(values))]:.2f}, "
          f"max {values[-1]:.2f}; {sum(s == 0 for s in values)} pairs below {MIN_SHARED} shared fingerprints")
    print(f"  at or above the default threshold {DEFAULT_THRESHOLD}: {len(above)} of {len(values)}")
    for score, name in scores[:5]:
        print(f"    {score:.2f}  {name}")
    copied = copies()
    print("renamed, reordered, re-commented copies of the reference: "
          + ", ".join(f"{a} {s:.2f}" for a, s in copied.items()) + f"; lowest {min(copied.values()):.2f}")
    for size in (CLASS_SIZE // 3, CLASS_SIZE):
        with tempfile.TemporaryDirectory() as folder:
            students = synthetic_class(Path(folder), size, CLASS_ASSIGNMENT)
            start = time.perf_counter()
            listed = assignment_pairs(CLASS_ASSIGNMENT, students, chapter(CLASS_ASSIGNMENT).exercise.parent,
                                      DEFAULT_THRESHOLD, chapter(CLASS_ASSIGNMENT).solution.parent).pairs
            seconds = time.perf_counter() - start
        pairs = size * (size - 1) // 2
        print(f"{size} students on {CLASS_ASSIGNMENT} ({pairs} pairs): {seconds:.1f} s, "
              f"{1e6 * seconds / pairs:.0f} us per pair, {len(listed)} pairs listed (students drawn from a small "
              "bank share whole answers by construction)")

if __name__ == "__main__":
    main()
