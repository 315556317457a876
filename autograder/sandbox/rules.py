"""A chapter's rules: library calls its task forbids, made unavailable in the kernel and named in the source.

A chapter's registry entry lists its rules (`course.chapters.Chapter.forbid`; today one, `fused_attention`).
Each rule works twice:

- in the kernel, before any student code runs (`autograder.sandbox.kernel.preload`, from ``AUTOGRADER_FORBID``):
  `install` registers a kernel that raises `RULE_ERROR` for every operator the rule names (torch's fused
  scaled dot-product attention: flash, efficient, math, cuDNN and the dispatcher
  ``aten::scaled_dot_product_attention`` itself) on each dispatch key that computes it on a CPU, through
  ``torch.library``: ``F.scaled_dot_product_attention`` and ``torch.ops.aten._scaled_dot_product_*``
  raise, with or without autograd. FlexAttention's ``flex_attention`` is a higher-order operator (no
  ``torch.library`` operator to register on), and eager on a CPU it computes with ordinary operators: only
  the source check below finds it;
- in the grader, on the student's source (`broken`): a call or a name of a forbidden function in a
  solution cell costs the graded names that cell defines their tests (`autograder.harness.execute`),
  with a message that names the rule and the line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from types import MappingProxyType

ENV = "AUTOGRADER_FORBID"
RULE_ERROR = "RuleBroken"


@dataclass(frozen=True)
class Rule:
    """One rule: the operators it takes out of the kernel (a regular expression on ``aten::`` names), the
    names its static check finds in the source, and the sentence that says what the task asks."""

    name: str
    operators: str
    names: tuple[str, ...]
    asks: str


RULES = MappingProxyType({rule.name: rule for rule in (
    Rule("fused_attention",
         r"^aten::(_?scaled_dot_product|_flash_attention|_efficient_attention|_cudnn_attention|_fused_sdp_choice"
         r"|_native_multi_head_attention|_triton_multi_head_attention)",
         ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
          "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math", "_fused_sdp_choice",
          "_flash_attention_forward", "_efficient_attention_forward", "multi_head_attention_forward",
          "MultiheadAttention", "_native_multi_head_attention", "flex_attention"),
         "this chapter asks for attention written by hand (matrix products, masking, softmax): PyTorch's fused "
         "attention (F.scaled_dot_product_attention, torch.ops.aten._scaled_dot_product_*, "
         "F.multi_head_attention_forward, nn.MultiheadAttention, flex_attention) is not available"),
)})
# The dispatch keys whose kernels compute an operator on a CPU; an autograd kernel runs one of them in turn.
KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd")


def parse(text: str) -> tuple[Rule, ...]:
    """The rules named in ``text`` (comma-separated, as ``AUTOGRADER_FORBID`` carries them); KeyError names
    an unknown one."""
    return tuple(RULES[name] for name in filter(None, text.split(",")))


def install(rules: tuple[Rule, ...]) -> object | None:
    """Make every operator of ``rules`` raise in this process (the kernel, before student code); returns the
    registration, which the caller keeps alive (the operators come back when it is collected)."""
    if not rules:
        return None
    import torch

    import warnings

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": what this is for
        warnings.simplefilter("ignore")
        _register(library, rules)
    return library


def _register(library: object, rules: tuple[Rule, ...]) -> None:
    import torch

    for rule in rules:
        for qualified in sorted(torch._C._dispatch_get_all_op_names()):
            if not re.match(rule.operators, qualified):
                continue
            name = qualified.split("::", 1)[1]
            table = torch._C._dispatch_dump(qualified)
            for key in KEYS:
                if re.search(rf"^{key}(\[alias\])?:", table, re.MULTILINE):
                    library.impl(name, _refuse(rule, qualified), key)
            if not re.search(r"^(CPU|Composite\w+)(\[alias\])?:", table, re.MULTILINE):
                library.impl(name, _refuse(rule, qualified), "CPU")


def _refuse(rule: Rule, operator: str):  # noqa: ANN202 - a torch kernel takes whatever the operator takes
    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202, ARG001
        raise RuntimeError(f"{RULE_ERROR}: {operator} was called, but {rule.asks} in this chapter's grading kernel")

    return refuse


def defined(source: str, graded: tuple[str, ...]) -> tuple[str, ...]:
    """The names of ``graded`` that ``source`` (one cell) defines at its top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(node.name for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in graded)


def broken(source: str, rules: tuple[Rule, ...], graded: tuple[str, ...]) -> dict[str, list[str]]:
    """The graded definitions of ``source`` (one cell; top-level functions and classes named in ``graded``) whose
    body breaks ``rules``, each with one line per use ({} when none, or when the cell does not parse). A name
    counts where it is used as a name, an attribute, an imported name (``from ... import flex_attention as f``) or
    a string of its own (``getattr(F, "...")``), never inside a sentence (a docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: dict[str, list[str]] = {}
    for definition in tree.body:
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                or definition.name not in graded:
            continue
        for node in ast.walk(definition):
            named = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name)
                     else node.name.rsplit(".", 1)[-1] if isinstance(node, ast.alias)
                     else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            for rule in rules:
                if isinstance(named, str) and (named in rule.names or named.startswith("_scaled_dot_product")):
                    found.setdefault(definition.name, []).append(f"line {node.lineno}: {named} ({rule.name})")
    return found
