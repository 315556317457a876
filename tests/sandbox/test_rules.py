"""Chapters "by hand" cannot be answered by the library (issue 32, item 7).

- A NumPy chapter's kernel sees only numpy (and what ipykernel needs): ``import torch`` fails there
  (`autograder.sandbox.site_view`), so chapter 7 can no longer call torch's fused CPU flash kernel.
- A chapter whose task forbids fused attention (registry ``forbid: [fused_attention]``: 3, 9 and 11) has
  torch's SDPA operators raise in its kernel before the first student cell (`autograder.sandbox.rules.install`),
  and a graded definition that names one (or ``flex_attention``, which no ``torch.library`` kernel reaches)
  loses its tests, with a message that names the rule (`autograder.sandbox.rules.broken`,
  `autograder.harness.execute`).

The slow test grades the attacks (the issue's three, and chapter 11's top-k attention through SDPA) and the
reference answers through the real CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from autograder.sandbox import rules
from autograder.reports.output_folder import OutputFolder
from autograder.sandbox.site_view import shown_entries, site_folders
from course.chapters import chapter, chapters
from course.notebooks import solution_sources
from tests.bank.ch11_sparse import SDPA_TOPK
from tests.grading_helpers import grade_cli, read_grades, released_notebooks, student_notebook, write_submission
from tests.unprivileged import course_copy, give, unprivileged_folder, unprivileged_python

FUSED = rules.parse("fused_attention")

# Chapter 3: SDPA's output moved one ulp, so that a bit-exact comparison with SDPA no longer catches it.
ULP = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model is not divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, is_causal=False):
        q, k, v = (split_heads(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))
        allowed = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool)
        allowed = torch.tril(allowed) if is_causal else allowed
        allowed = allowed & mask if mask is not None else allowed
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed).nan_to_num(0.0)
        return self.out_proj(merge_heads(torch.nextafter(out, torch.full_like(out, float("inf")))))
'''

# Chapter 7 (NumPy): torch's fused CPU flash kernel, which returns the lse too.
FUSED_CPU = '''
def tiled_attention(Q, K, V, block_q=64, block_k=64, causal=False):
    import torch
    dtype = np.result_type(Q, K, V, np.float32)
    n_q, n_k, d, d_v = Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    width = max(d, d_v)
    q, k, v = (torch.nn.functional.pad(torch.from_numpy(np.array(np.broadcast_to(a, batch + a.shape[-2:]),
               dtype=dtype)).reshape(1, -1, a.shape[-2], a.shape[-1]), (0, width - a.shape[-1])) for a in (Q, K, V))
    mask = None
    if causal and n_q != n_k:
        seen = torch.from_numpy(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q))
        mask = torch.zeros(n_q, n_k, dtype=q.dtype).masked_fill(~seen, float("-inf"))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, is_causal=causal and n_q == n_k, attn_mask=mask, scale=1.0 / np.sqrt(d))[:2]
    np.ones((min(block_q, n_q), min(block_k, n_k)))  # the memory a tile would take, for the memory test
    lse = lse.reshape(batch + (n_q,)).numpy()
    if causal:
        lse = np.where(np.arange(n_q) + (n_k - n_q) < 0, -np.inf, lse)
    out = out[..., :d_v].nan_to_num(0.0).reshape(batch + (n_q, d_v)).numpy()
    return out.astype(dtype), lse.astype(dtype)
'''

# Chapter 9: flash_attention through SDPA, its backward from autograd.
SDPA_AUTOGRAD = '''
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=64, block_k=64):
        raise NotImplementedError


def flash_attention(q, k, v, is_causal=False, block_q=64, block_k=64):
    n_q, n_k = q.shape[-2], k.shape[-2]
    seen = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q) if is_causal else None
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=seen)
'''


def test_the_registry_forbids_fused_attention_where_the_task_does() -> None:
    forbidding = {c.slug for c in chapters() if "fused_attention" in c.forbid}
    assert {"03_multi_head", "09_backward", "11_sparse"} <= forbidding
    assert not forbidding & {"04_kv_cache", "05_gqa", "06_rope", "08_gpu_sdpa", "10_serving"}, \
        "these chapters' tasks allow or require F.scaled_dot_product_attention"
    for c in chapters():
        if c.library == "NumPy":
            assert c.packages is not None and "torch" not in c.packages, c.slug


def test_a_numpy_chapter_kernel_sees_no_torch() -> None:
    shown = {entry for site in site_folders() for entry in shown_entries(site, chapter("07_flash_attention").packages)}
    assert {"numpy", "ipykernel"} <= shown
    assert not {entry for entry in shown if entry.split("-")[0] in ("torch", "transformers", "torchgen", "functorch")}


@pytest.mark.parametrize(("source", "names", "graded"), [
    (ULP, ["scaled_dot_product_attention"], ("MultiHeadAttention",)),
    (SDPA_AUTOGRAD, ["scaled_dot_product_attention"], ("FlashAttention", "flash_attention")),
    ("def f(q):\n    return getattr(F, 'scaled_dot_product_attention')(q, q, q)\n", ["scaled_dot_product_attention"],
     ("f",)),
    ("def f(q):\n    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0]\n",
     ["_scaled_dot_product_flash_attention_for_cpu"], ("f",)),
    (SDPA_TOPK, ["scaled_dot_product_attention"], ("topk_sparse_attention",)),
    ("def f(q):\n    from torch.nn.attention.flex_attention import flex_attention as fa\n    return fa(q, q, q)\n",
     ["flex_attention"], ("f",)),
    ("def f(q):\n    import torch.nn.attention.flex_attention as fl\n    return fl.flex_attention(q, q, q)\n",
     ["flex_attention", "flex_attention"], ("f",)),
], ids=["ch3-ulp", "ch9-sdpa", "getattr", "aten-op", "ch11-sdpa", "flex-imported-as", "flex-attribute"])
def test_the_source_check_names_each_use(source: str, names: list[str], graded: tuple[str, ...]) -> None:
    found = rules.broken(source, FUSED, graded)
    assert [line.split(": ")[1].split(" (")[0] for lines in found.values() for line in lines] == names, found


def test_the_source_check_ignores_sentences_and_code_outside_graded_definitions() -> None:
    source = ('def f(q):\n    """Zeros for a masked row, as F.scaled_dot_product_attention does."""\n    return q\n'
              "assert torch.equal(f(x), F.scaled_dot_product_attention(x, x, x))\n")
    assert rules.broken(source, FUSED, ("f",)) == {}


INSTALLED = '''
import torch, torch.nn.functional as F
from autograder.sandbox import kernel
held = kernel.preload(("torch",))
q = torch.randn(1, 2, 8, 4, requires_grad=True)
calls = {"sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
         "sdpa, no grad": lambda: F.scaled_dot_product_attention(q.detach(), q.detach(), q.detach()),
         "flash for cpu": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q),
         "math": lambda: torch.ops.aten._scaled_dot_product_attention_math(q, q, q),
         "efficient": lambda: torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)}
for name, call in calls.items():
    try:
        call()
        print(name, "ran")
    except RuntimeError as error:
        print(name, str(error).split(":")[0])
print("softmax", torch.softmax(q, -1).shape)
'''


def test_the_kernel_preload_takes_fused_attention_out() -> None:
    env = {**os.environ, rules.ENV: "fused_attention"}
    done = subprocess.run([sys.executable, "-c", INSTALLED], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"{name} {rules.RULE_ERROR}" for name in
                                        ("sdpa", "sdpa, no grad", "flash for cpu", "math", "efficient")] + \
        ["softmax torch.Size([1, 2, 8, 4])"], done.stdout


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Chapters 3, 7, 9 and 11 graded once (warm): the attacks and the reference answers."""
    base = tmp_path_factory.mktemp("rules")
    source = base / "source"
    slugs = ("03_multi_head", "07_flash_attention", "09_backward", "11_sparse")
    for slug in slugs:
        shutil.copytree(chapter(slug).solution.parent, source / slug)
    released = released_notebooks(OutputFolder(base / "out").cache, source)
    attacks = {"03_multi_head": ("MultiHeadAttention", ULP), "07_flash_attention": ("tiled_attention", FUSED_CPU),
               "09_backward": ("flash_attention", SDPA_AUTOGRAD), "11_sparse": ("topk_sparse_attention", SDPA_TOPK)}
    for slug, (cell, code) in attacks.items():
        reference = solution_sources(chapter(slug).solution)
        name = f"{chapter(slug).notebook}.ipynb"
        write_submission(base / "subs", "library", slug, student_notebook(released[slug], {**reference, cell: code}), name)
        write_submission(base / "subs", "honest", slug, student_notebook(released[slug], reference), name)
    done = grade_cli(base / "subs", "--out", base / "out", "--source", source, "--quiet", "--jobs", "2", timeout=1500)
    return {"done": done, "rows": read_grades(base / "out"), "out": base / "out", "attacks": attacks}


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_library_answers_lose_points_and_the_references_keep_them(graded) -> None:
    rows, out = graded["rows"], OutputFolder(graded["out"])
    for slug in graded["attacks"]:
        honest, library = rows[("honest", slug)], rows[("library", slug)]
        assert (honest["score"], honest["reason"]) == (honest["max_score"], ""), out.grades.read_text()
        assert float(library["score"]) < float(library["max_score"]), (slug, out.grades.read_text())
    feedback = {slug: (out.feedback("library", slug) / f"{chapter(slug).notebook}.html").read_text()
                for slug in graded["attacks"]}
    assert "No module named" in feedback["07_flash_attention"] and "torch" in feedback["07_flash_attention"]
    for slug in ("03_multi_head", "09_backward", "11_sparse"):
        assert rules.RULE_ERROR in feedback[slug] and "fused_attention" in feedback[slug], slug


# Run as uid 65534: a sandbox that shows only numpy, as a NumPy chapter's kernel.
NO_TORCH = '''
import subprocess, sys, tempfile
from pathlib import Path
from autograder.sandbox.limits import Limits
from autograder.sandbox.bwrap import command, environment, prepare_home

home = Path(sys.argv[1])
prepare_home(home)
code = "import numpy, ipykernel.kernelapp\\ntry:\\n    import torch\\nexcept ImportError as e:\\n    print(e)"
argv = command(home, home, Limits(), environment(home, Limits(), ()), [sys.executable, "-c", code], packages=("numpy",))
done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
print(done.returncode, done.stdout.strip(), done.stderr.strip()[-500:])
'''


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.sandbox
def test_a_numpy_chapter_kernel_of_an_unprivileged_instructor_cannot_import_torch(tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    with unprivileged_folder("autograder-no-torch-") as base:
        copy = course_copy(base / "course")
        (base / "home").mkdir()
        give(base)
        done = subprocess.run([*unprivileged_python(), "-c", NO_TORCH, str(base / "home")], cwd=copy, text=True,
                              capture_output=True, timeout=300, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(copy)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "0 No module named 'torch'", done.stdout
