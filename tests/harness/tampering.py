"""The tampering bank: tricks a student can put in an answer cell to change their grade or read the hidden
tests from inside the kernel that runs their notebook (issue 18, trusted scoring).

Each `Trick` is Python source appended to one answer cell of an `Honest` notebook (the blank exercise, or
one with some functions right and the rest wrong or blank). Every trick would work in a grader that runs
the tests in the student's kernel: the kernel-hook tricks leave the grader's canary cell (the last cell,
"autograder canary") alone, so that only the tests are fooled. An answer a trick brings along (a stand-in,
a liar) is worth nothing on its own, so a blank notebook with a trick must score 0 and a trick must never
raise an honest notebook's score. `students` makes the class (on a partly right notebook the tricks of one
group go together, to keep the class small); tests/harness/test_tampering.py grades it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.harness import tampering_code as code
from tests.bank import ch01_similarity, ch03_multi_head, reference
from tests.harness.tampering_code import SCRIPT_MARKER  # noqa: F401 - re-exported for the tests

SIMILARITY = "01_similarity"
MULTI_HEAD = "03_multi_head"
# Text that only the hidden tests hold (their random seeds): none of it may reach anything a student or
# the output folder shows, in any of the encodings the leaking tricks use (`encodings`).
HIDDEN_MARKERS = (*(f"np.random.default_rng(hidden_seed({seed}))" for seed in (101, 102, 103, 104)),
                  *(f"torch.manual_seed(hidden_seed({seed}))" for seed in (303, 304)))


@dataclass(frozen=True)
class Honest:
    """A notebook written without tricks: the released one with ``answers`` ((grade_id, source) pairs) in place;
    it earns ``points``."""

    name: str
    assignment: str
    points: float
    answers: tuple[tuple[str, str], ...] = ()

    @property
    def student(self) -> str:
        """The id of the student who hands it in as it is."""
        return f"honest.{self.name}"


@dataclass(frozen=True)
class Trick:
    """One attempt to fool the grader: ``code`` appended to answer cell ``cell`` of each notebook in ``bases``.

    On a blank notebook each trick is handed in alone; on a partly right one, the tricks of one ``group``
    (default: the trick's own name) are handed in together by one student.
    """

    name: str
    assignment: str
    cell: str
    code: str
    bases: tuple[Honest, ...]
    group: str = ""


@dataclass(frozen=True)
class Student:
    """Who hands in ``base`` with ``tricks`` appended (none: the honest notebook itself)."""

    id: str
    base: Honest
    tricks: tuple[Trick, ...] = ()


def _wrong(module, cell: str, mistake: str) -> tuple[str, str]:
    """(cell, source) of the bank's wrong answer for ``cell`` named ``mistake``."""
    (answer,) = [a for a in module.WRONG if a.cell == cell and a.mistake == mistake]
    return cell, answer.source


BLANK_SIMILARITY = Honest("blank_similarity", SIMILARITY, 0)
# dot right (2 points); cosine_similarity and similarity_matrix wrong; softmax blank.
DOT_RIGHT = Honest("dot_right", SIMILARITY, 2, (
    ("dot", reference(SIMILARITY, "dot")), _wrong(ch01_similarity, "cosine_similarity", "divides by |a|^2"),
    _wrong(ch01_similarity, "similarity_matrix", "K @ Q.T: the result is transposed")))
# cosine_similarity right (2 points); dot wrong; the rest blank.
COSINE_RIGHT = Honest("cosine_right", SIMILARITY, 2, (
    _wrong(ch01_similarity, "dot", "sum(a) * sum(b)"), ("cosine_similarity", reference(SIMILARITY, "cosine_similarity"))))
BLANK_MULTI_HEAD = Honest("blank_multi_head", MULTI_HEAD, 0)
# split_heads and merge_heads right (4 points); MultiHeadAttention blank.
HEADS_RIGHT = Honest("heads_right", MULTI_HEAD, 4, (("split_heads", reference(MULTI_HEAD, "split_heads")),
                                                    ("merge_heads", reference(MULTI_HEAD, "merge_heads"))))
HONEST = (BLANK_SIMILARITY, DOT_RIGHT, COSINE_RIGHT, BLANK_MULTI_HEAD, HEADS_RIGHT)
assert ch03_multi_head.ASSIGNMENT == MULTI_HEAD and ch01_similarity.ASSIGNMENT == SIMILARITY

CH1 = (BLANK_SIMILARITY, DOT_RIGHT)
CH3 = (BLANK_MULTI_HEAD, HEADS_RIGHT)

TRICKS = (
    # The example: an input transformer turns every cell but the canary into `pass`.
    Trick("input_transformer", SIMILARITY, "dot", code.INPUT_TRANSFORMER, CH1, "kernel"),
    # An AST transformer empties every cell that asserts or imports the checks, except the canary.
    Trick("ast_transformer", SIMILARITY, "dot", code.AST_TRANSFORMER, CH1, "kernel"),
    # A custom exception handler swallows every error but the canary's, and a hook reports the cell a success.
    Trick("custom_exception_handler", SIMILARITY, "dot", code.CUSTOM_EXCEPTION_HANDLER, CH1, "kernel"),
    # A class-level patch of IPython's InteractiveShell shows no traceback but the canary's; a hook reports success.
    Trick("class_patch_showtraceback", SIMILARITY, "dot", code.CLASS_PATCH_SHOWTRACEBACK, CH1, "kernel"),
    # A class-level patch of IPython's InteractiveShell: test cells are compiled as `pass`, the canary as it is.
    Trick("class_patch_transform_cell", SIMILARITY, "dot", code.CLASS_PATCH_TRANSFORM_CELL, CH1, "kernel"),
    # A post_run_cell hook clears a failed cell's outputs (its error) and reports it a success, except the canary.
    Trick("clears_outputs", SIMILARITY, "dot", code.CLEARS_OUTPUTS, CH1, "kernel"),
    # Every test cell first shows a number: nbgrader reads a test cell's first result as its partial credit.
    Trick("test_cells_print_numbers", SIMILARITY, "dot", code.TEST_CELLS_PRINT_NUMBERS, CH1, "kernel"),
    # A pre_run_cell hook makes builtins.abs return 0 in hidden test cells: every difference is within tolerance.
    Trick("hook_patches_abs", SIMILARITY, "dot", code.HOOK_PATCHES_ABS, CH1, "checks"),
    # A pre_run_cell hook makes math.isnan say True in hidden test cells: the checks call any two values equal.
    Trick("hook_patches_isnan", SIMILARITY, "dot", code.HOOK_PATCHES_ISNAN, CH1, "checks"),
    # A pre_run_cell hook swaps autograder.checks' functions for lenient ones in hidden test cells only.
    Trick("hook_patches_checks", SIMILARITY, "dot", code.HOOK_PATCHES_CHECKS, CH1, "checks"),
    # A fake autograder.checks in sys.modules: the hidden tests import lenient checks, the canary's stay real.
    Trick("fake_module_in_sys_modules", SIMILARITY, "dot", code.FAKE_MODULE_IN_SYS_MODULES, CH1, "checks"),
    # A thread waits for the first hidden test cell, then rewrites the checks' code in place (__code__).
    Trick("thread_patches_later", SIMILARITY, "dot", code.THREAD_PATCHES_LATER, CH1, "checks"),
    # numpy's comparisons patched: the visible tests' np.allclose and np.array_equal accept anything.
    Trick("patches_numpy_allclose", SIMILARITY, "dot", code.PATCHES_NUMPY_ALLCLOSE, CH1, "checks"),
    # The same, and the checks' saved references to numpy, found with gc.get_objects, now name the fakes too.
    Trick("gc_edits_the_guards", SIMILARITY, "dot", code.GC_EDITS_THE_GUARDS, CH1, "checks"),
    # A numpy.float64 subclass that claims numpy's module, equals anything and, read by the checks (item()),
    # finds their expected value in the caller's frame (sys._getframe) and returns it.
    Trick("liar_scalar", SIMILARITY, "cosine_similarity", code.LIAR_SCALAR, CH1, "liars"),
    # An ndarray subclass that np.allclose, np.array_equal, == and bool() all call equal to anything.
    Trick("liar_array", SIMILARITY, "similarity_matrix", code.LIAR_ARRAY, CH1, "liars"),
    # dot zeroes its inputs (an oracle computed from them afterwards is 0), rewrites the calling test's float
    # constants to 0.0 in memory with ctypes, and edits the statements still to run (found up the frames).
    Trick("ctypes_rewrites_constants", SIMILARITY, "dot", code.CTYPES_REWRITES_CONSTANTS, (BLANK_SIMILARITY, COSINE_RIGHT)),
    # Hooks keep each hidden test cell's source and show it, reversed and hex-encoded, in the next cell's output.
    Trick("leaks_hidden_tests_in_outputs", SIMILARITY, "dot", code.LEAKS_HIDDEN_TESTS_IN_OUTPUTS, CH1, "leaks"),
    # In hidden test cells every function raises an error whose message carries the cell's source, encoded.
    Trick("leaks_hidden_tests_in_errors", SIMILARITY, "dot", code.LEAKS_HIDDEN_TESTS_IN_ERRORS, CH1, "leaks"),
    # A solution cell displays scripts: <script>, an onerror handler, Javascript, Markdown, an iframe, a link.
    Trick("displays_a_script", SIMILARITY, "dot", code.DISPLAYS_A_SCRIPT, CH1, "leaks"),
    # The hidden test's oracle, F.scaled_dot_product_attention, patched to scale by sqrt(d_model) as the
    # layer below wrongly does (nn.MultiheadAttention calls it too).
    Trick("patches_the_oracle", MULTI_HEAD, "MultiHeadAttention", code.PATCHES_THE_ORACLE, CH3),
    # A Tensor subclass that torch.allclose calls equal to anything and that, read by the checks (detach()),
    # becomes their expected value, found in the caller's frame.
    Trick("liar_tensor", MULTI_HEAD, "MultiHeadAttention", code.LIAR_TENSOR, CH3),
)


def encodings(text: str) -> tuple[str, ...]:
    """``text`` as the leaking tricks write it: as it is, reversed and hex-encoded."""
    return text, text[::-1], text.encode().hex()


def students() -> tuple[Student, ...]:
    """The class: each honest notebook; each trick alone on each blank notebook it is combined with; each group
    of tricks together on each partly right notebook."""
    honest = tuple(Student(base.student, base) for base in HONEST)
    alone = tuple(Student(f"{trick.name}.{base.name}", base, (trick,))
                  for trick in TRICKS for base in trick.bases if not base.answers)
    groups: dict[tuple[str, Honest], tuple[Trick, ...]] = {}
    for trick in TRICKS:
        for base in trick.bases:
            if base.answers:
                key = (trick.group or trick.name, base)
                groups[key] = (*groups.get(key, ()), trick)
    together = tuple(Student(f"{group}.{base.name}", base, tricks) for (group, base), tricks in groups.items())
    return honest + alone + together
