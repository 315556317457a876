"""The worker forks import what a fork asks for first: a worker that grades an assignment whose kernels preload
numpy only is forked before torch and transformers are imported, and a worker forked without what a later job
needs is replaced by one forked with it (`autograder.workers.forks`, `autograder.workers.pool.Worker.spawn`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.options import SOURCE, Options
from autograder.grading.plan import _start
from autograder.grading.templates import keyed_templates, read_course
from autograder.milestones import read_milestones
from autograder.records import GenerateJob, Job, Template
from autograder.sandbox.limits import Limits
from autograder.workers.dispatch import KernelSet, grading_weight
from autograder.workers.forks import FIRST_JOB, SESSION, TORCH_CHECKS, covers
from autograder.workers.pool import Pool, needs_of


def test_a_fork_waits_for_what_it_needs_only(tmp_path: Path, pool: Pool) -> None:
    # Asked at once, while the forks import nbgrader: "xml" is imported before the fork, "mailbox" is not yet.
    pool.prepare(("mailbox", "xml.dom.minidom"), (), str(tmp_path), warm=False)
    worker = pool.workers[0]
    worker.start(("xml",))
    first = worker.process
    assert "xml.dom.minidom" not in first.missing, "a fork waits for the modules (and submodules) it needs"
    assert "mailbox" in first.missing and "autograder.checks" in first.missing, (
        f"a fork does not wait for what it does not need: it lacked {sorted(first.missing)}")
    worker.start(("xml",))
    assert worker.process is first, "a worker that has what the next job needs is kept"
    worker.start(("mailbox",))
    assert worker.process is not first and "mailbox" not in worker.process.missing, (
        "a worker forked without what the next job needs is replaced by a fork that has it")
    assert first.poll() is not None, "the replaced worker is stopped"


def test_needs_and_the_order_of_jobs() -> None:
    assert covers(("torch",), "torch.nn.functional") and covers(("torch",), "torch")
    assert not covers(("torch",), "torchvision"), "a module's name is matched whole, not by its prefix"
    light, torch = KernelSet((), ("numpy",), ()), KernelSet(("torch",), None, ())
    oracle = ("math", "transformers", "transformers.models.llama.modeling_llama")
    weights = {"light": grading_weight(light, ("math", "autograder.checks.call")), "torch": grading_weight(torch, ()),
               "oracle": grading_weight(torch, oracle)}
    assert sorted(weights, key=weights.get) == ["light", "torch", "oracle"], (
        f"the lightest assignments go first, the standard library and the autograder aside: {weights}")
    template = Template("a", "k", Path("/nowhere"), (), (), *torch)
    assert needs_of(Job(template, {}, Limits(), True)) == (*FIRST_JOB, *SESSION)
    assert needs_of(GenerateJob(template, "/", "source")) == FIRST_JOB, (
        "a worker that makes a template is forked ready to grade the lightest jobs next")
    numpy_only = Template("a", "k", Path("/nowhere"), (), (), *light)
    assert needs_of(Job(numpy_only, {}, Limits(), True)) == FIRST_JOB, (
        "no tensor can cross a sandboxed numpy kernel's channel: its jobs need no torch, and the workers that made "
        "the templates grade them")
    assert needs_of(Job(numpy_only, {}, Limits(), False)) == (*FIRST_JOB, *SESSION), (
        "outside the sandbox a kernel sees every package, torch too")
    tested_with_torch = Template("a", "k", Path("/nowhere"), (), (), *light, imports=("math", "torch.nn.functional"))
    assert set(needs_of(Job(tested_with_torch, {}, Limits(), True))) == {*FIRST_JOB, *SESSION, "math",
                                                                          "torch.nn.functional", *TORCH_CHECKS}, (
        "a numpy assignment whose tests use torch: its worker is forked with torch and what torch's checks import, "
        "shared, not importing its own")
    assert not set(TORCH_CHECKS) & set(needs_of(Job(numpy_only, {}, Limits(), False))), (
        "a job whose tests use no torch does not wait for what torch's checks import")
    tested_with_oracle = Template("a", "k", Path("/nowhere"), (), (), *torch, imports=oracle)
    assert set(oracle) <= set(needs_of(Job(tested_with_oracle, {}, Limits(), True))), (
        "a worker waits for what its job's test cells import (transformers' oracle), which its kernels need not "
        "preload: imported once in the forks, not once per worker")
    assert not any(covers(("transformers",), module) for module in needs_of(Job(template, {}, Limits(), True))), (
        "a torch job whose tests use no transformers waits for none of it")


def test_a_torch_job_is_graded_while_the_runs_later_modules_import(tmp_path: Path, pool: Pool) -> None:
    # The run's last module ("mailbox", standing for transformers' Llama, which chapter 6's tests import) is asked
    # for by the run, not by chapter 3's job: that job's worker is forked once torch is imported, without waiting for
    # it; a job whose tests import it then gets a fork that has it (`Pool.run`, `needs_of`).
    pool.prepare(("torch", *SESSION, "mailbox"), (), str(tmp_path), warm=False)
    torch = Template("ch3", "k", tmp_path / "no-template", (), (), ("torch",), None, ())
    oracle = Template("ch6", "k", tmp_path / "no-template", (), (), ("torch",), None, (), imports=("mailbox",))
    results = []
    pool.run([Job(torch, {}, Limits(), True, scratch=str(tmp_path), warm=False)], 120, lambda _, r: results.append(r))
    first = pool.workers[0].process
    assert "torch" not in first.missing and "mailbox" in first.missing, (
        f"chapter 3's worker should not wait for chapter 6's oracle; it was forked lacking {sorted(first.missing)}")
    pool.run([Job(oracle, {}, Limits(), True, scratch=str(tmp_path), warm=False)], 120, lambda _, r: results.append(r))
    assert pool.workers[0].process is not first and "mailbox" not in pool.workers[0].process.missing
    assert [r.status for r in results] == ["failed", "failed"], results  # no template there: nothing to grade


def test_a_fork_lacks_only_what_is_not_imported(tmp_path: Path, pool: Pool) -> None:
    # "math" and "json.dumps" (``from json import dumps``) are imported with nbgrader before the first fork: a
    # worker forked then does not lack them, and is kept for a job whose tests import them (chapter 1's).
    pool.prepare(("math", "json.dumps", "mailbox"), (), str(tmp_path), warm=False)
    worker = pool.workers[0]
    worker.start(FIRST_JOB)
    first = worker.process
    assert {"math", "json.dumps"}.isdisjoint(first.missing) and "mailbox" in first.missing, (
        f"the fork says it lacks {sorted(first.missing)}")
    worker.start((*FIRST_JOB, "math", "json.dumps"))
    assert worker.process is first, "a worker that lacks nothing the next job needs is kept"


def test_every_fork_has_the_feedback_page_compiled(tmp_path: Path, pool: Pool) -> None:
    # Asked at once, while the forks import nbgrader: the first workers (they make the templates, then grade) are
    # forked with the page compiled, so that neither compiles its own (`autograder.workers.forks._warmed`).
    pool.prepare(("mailbox",), (), str(tmp_path), warm=False)
    pool.workers[0].start(FIRST_JOB)
    steps = [step for _, step in read_milestones(tmp_path / "logs" / "workers.log", 0)
             if step.startswith(("worker forks: compiled", "worker forks: forked worker"))]
    first_fork = next(i for i, step in enumerate(steps) if step.startswith("worker forks: forked worker"))
    assert "worker forks: compiled the feedback page" in steps[:first_fork], (
        f"the forks' log says {steps}: the page is compiled before the first fork")


def test_the_forks_import_torch_only_when_the_run_asks(tmp_path: Path, pool: Pool) -> None:
    # A run whose kernels cannot import torch does not name the channel's torch (`autograder.grading.plan`): the
    # forks never import it, and a fork made with everything asked for lacks nothing.
    pool.prepare(("mailbox",), (), str(tmp_path), warm=False)
    worker = pool.workers[0]
    worker.start((*FIRST_JOB, "mailbox"))
    assert worker.process.missing == frozenset(), f"left to import: {sorted(worker.process.missing)}"


def test_a_course_worth_of_modules_left_to_import_reaches_the_pool_whole(tmp_path: Path, pool: Pool) -> None:
    # The whole course's test cells and preloads name more modules than a short read of the control socket holds
    # (SOCK_SEQPACKET cuts a longer message): the fork's answer lists all those it was forked without.
    many = tuple(f"xml.dom.minidom{'_' * 40}{index}" for index in range(60))  # never imported: all left, 3 KB
    pool.prepare(many, (), str(tmp_path), warm=False)
    worker = pool.workers[0]
    worker.start(())
    assert set(many) <= worker.process.missing, "the answer names every module the fork was made without"


class _Recorded:
    """A dispatcher that only records what a run's start asks its workers to import."""

    def __init__(self) -> None:
        self.imports: tuple[str, ...] = ()
        self.kernels: tuple[KernelSet, ...] = ()

    def prepare(self, imports, kernels, scratch, warm):  # noqa: ANN001, ANN201 - `Dispatcher.prepare`
        self.imports, self.kernels = imports, tuple(kernels)
        return {}


@pytest.mark.parametrize(("assignments", "isolate", "torch"), [
    ({"01_similarity"}, True, False),  # a numpy chapter whose tests need no torch, sandboxed: no tensor can cross
    ({"01_similarity"}, False, True),  # outside the sandbox a numpy chapter's kernel can import torch
    ({"01_similarity", "03_multi_head"}, True, True),
])
def test_a_run_asks_its_workers_for_the_channels_torch_only_where_tensors_can_cross(
        tmp_path: Path, assignments: set[str], isolate: bool, torch: bool) -> None:
    dispatcher = _Recorded()
    options = Options(tmp_path / "in", tmp_path / "out", 2, isolate=isolate)
    _start(options, keyed_templates(read_course(SOURCE), tmp_path / "cache", assignments), dispatcher, tmp_path)
    assert set(SESSION) <= set(dispatcher.imports) if torch else not set(SESSION) & set(dispatcher.imports), (
        f"{sorted(assignments)}, isolate={isolate}: the workers were asked to import {dispatcher.imports}")


def test_a_numpy_chapter_whose_tests_use_torch_gets_a_worker_with_torch(tmp_path: Path) -> None:
    # Chapter 2's kernels cannot import torch, but its test cells do (an oracle): its workers are forked with torch
    # imported once for them all. Chapter 1's tests use none: the workers that made the templates grade it.
    templates = keyed_templates(read_course(SOURCE), tmp_path, {"01_similarity", "02_scaled_attention"})
    needs = {a: needs_of(Job(template, {}, Limits(), True)) for a, template in templates.items()}
    assert set(SESSION) <= set(needs["02_scaled_attention"]), needs
    assert not set(SESSION) & set(needs["01_similarity"]), needs


def test_a_run_imports_in_the_order_its_jobs_come(tmp_path: Path) -> None:
    # Chapter 1's tests import nothing heavy, chapter 3's torch, chapter 6's transformers' Llama too (an oracle its
    # kernels never import): the workers import torch before transformers, and the zygotes start in that order.
    dispatcher = _Recorded()
    course = read_course(SOURCE)
    templates = keyed_templates(course, tmp_path / "cache", {"06_rope", "01_similarity", "03_multi_head"})
    _start(Options(tmp_path / "in", tmp_path / "out", 2), templates, dispatcher, tmp_path)
    position = {name: index for index, name in enumerate(dispatcher.imports)}
    assert position["torch"] < position["transformers.models.llama.modeling_llama"], dispatcher.imports
    assert position["torch"] < position[TORCH_CHECKS[0]] < position["transformers.models.llama.modeling_llama"], (
        f"chapter 3's tests use torch: what its checks import comes before chapter 6's oracle: {dispatcher.imports}")
    assert dispatcher.kernels == tuple(course.kernels(a) for a in ("01_similarity", "03_multi_head", "06_rope")), (
        f"the zygotes start in the order their jobs come: {dispatcher.kernels}")
    assert "transformers" not in course.kernels("06_rope").preload, "chapter 6's kernels import no transformers"


def test_a_worker_with_torchs_checks_imported_imports_nothing_on_a_first_check() -> None:
    # Chapter 3's hidden tests run nn.MultiheadAttention with a key_padding_mask, whose check (torch._check) imports
    # torch.fx's symbolic shapes and sympy on its first call: a third of a second of a core in each worker. A worker
    # forked with TORCH_CHECKS imported (what a job whose tests import torch waits for) imports none of it again.
    script = (
        "import importlib, sys, torch\n"
        f"for name in {TORCH_CHECKS!r}: importlib.import_module(name)\n"
        "before = set(sys.modules)\n"
        "torch._check(True)\n"
        "q = torch.randn(2, 3, 8)\n"
        "torch.nn.MultiheadAttention(8, 2, batch_first=True)(q, q, q, key_padding_mask=torch.zeros(2, 3, dtype=bool))\n"
        "print(sorted(set(sys.modules) - before))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", f"torch's first check imported {done.stdout.strip()}"
