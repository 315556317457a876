"""The worker forks import what a fork asks for first: a worker that grades an assignment whose kernels preload
numpy only is forked before torch and transformers are imported, and a worker forked without what a later job
needs is replaced by one forked with it (`autograder.workers.forks`, `autograder.workers.pool.Worker.spawn`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading.options import SOURCE, Options
from autograder.grading.plan import _start
from autograder.grading.templates import keyed_templates, read_course
from autograder.records import GenerateJob, Job, Template
from autograder.sandbox.limits import Limits
from autograder.workers.dispatch import KernelSet
from autograder.workers.forks import FIRST_JOB, SESSION, covers
from autograder.workers.pool import Pool, needs_of


def test_a_fork_waits_for_what_it_needs_only(tmp_path: Path) -> None:
    pool = Pool(2, tmp_path / "logs")
    try:
        # Asked at once, while the forks import nbgrader: "xml" is imported before the fork, "decimal" is not yet.
        pool.prepare(("decimal", "xml.dom.minidom"), (), str(tmp_path), warm=False)
        worker = pool.workers[0]
        worker.start(("xml",))
        first = worker.process
        assert "xml.dom.minidom" not in first.missing, "a fork waits for the modules (and submodules) it needs"
        assert "decimal" in first.missing and set(FIRST_JOB) <= first.missing, (
            f"a fork does not wait for what it does not need: it lacked {sorted(first.missing)}")
        worker.start(("xml",))
        assert worker.process is first, "a worker that has what the next job needs is kept"
        worker.start(("decimal",))
        assert worker.process is not first and "decimal" not in worker.process.missing, (
            "a worker forked without what the next job needs is replaced by a fork that has it")
        assert first.poll() is not None, "the replaced worker is stopped"
    finally:
        pool.close()


def test_needs_and_the_order_of_jobs() -> None:
    assert covers(("torch",), "torch.nn.functional") and covers(("torch",), "torch")
    assert not covers(("torch",), "torchvision"), "a module's name is matched whole, not by its prefix"
    light, torch, both = KernelSet((), ("numpy",), ()), KernelSet(("torch",), None, ()), KernelSet(
        ("torch", "transformers"), None, ())
    assert sorted([both, torch, light], key=lambda k: k.weight) == [light, torch, both], (
        "the jobs of kernels that preload least go first: their zygote is ready before torch's")
    template = Template("a", "k", Path("/nowhere"), (), (), *torch)
    assert needs_of(Job(template, {}, Limits(), True)) == (*FIRST_JOB, *SESSION, "torch")
    assert needs_of(GenerateJob(template, "/", "source")) == FIRST_JOB, (
        "a worker that makes a template is forked ready to grade the lightest jobs next")
    numpy_only = Template("a", "k", Path("/nowhere"), (), (), *light)
    assert needs_of(Job(numpy_only, {}, Limits(), True)) == FIRST_JOB, (
        "no tensor can cross a sandboxed numpy kernel's channel: its jobs need no torch, and the workers that made "
        "the templates grade them")
    assert needs_of(Job(numpy_only, {}, Limits(), False)) == (*FIRST_JOB, *SESSION), (
        "outside the sandbox a kernel sees every package, torch too")
    tested_with_torch = Template("a", "k", Path("/nowhere"), (), (), *light, imports=("math", "torch.nn.functional"))
    assert needs_of(Job(tested_with_torch, {}, Limits(), True)) == (*FIRST_JOB, *SESSION), (
        "a numpy assignment whose tests use torch: its worker is forked with torch, shared, not importing its own")


def test_the_forks_import_torch_only_when_the_run_asks(tmp_path: Path) -> None:
    # A run whose kernels cannot import torch does not name the channel's torch (`autograder.grading.plan`): the
    # forks never import it, and a fork made with everything asked for lacks nothing.
    pool = Pool(2, tmp_path / "logs")
    try:
        pool.prepare(("decimal",), (), str(tmp_path), warm=False)
        worker = pool.workers[0]
        worker.start((*FIRST_JOB, "decimal"))
        assert worker.process.missing == frozenset(), f"left to import: {sorted(worker.process.missing)}"
    finally:
        pool.close()


def test_a_course_worth_of_modules_left_to_import_reaches_the_pool_whole(tmp_path: Path) -> None:
    # The whole course's test cells and preloads name more modules than a short read of the control socket holds
    # (SOCK_SEQPACKET cuts a longer message): the fork's answer lists all those it was forked without.
    many = tuple(f"xml.dom.minidom{'_' * 40}{index}" for index in range(60))  # never imported: all left, 3 KB
    pool = Pool(2, tmp_path / "logs")
    try:
        pool.prepare(many, (), str(tmp_path), warm=False)
        worker = pool.workers[0]
        worker.start(())
        assert set(many) <= worker.process.missing, "the answer names every module the fork was made without"
    finally:
        pool.close()


class _Recorded:
    """A dispatcher that only records what a run's start asks its workers to import."""

    def __init__(self) -> None:
        self.imports: tuple[str, ...] = ()

    def prepare(self, imports, kernels, scratch, warm):  # noqa: ANN001, ANN201 - `Dispatcher.prepare`
        self.imports = imports
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
    _start(options, read_course(SOURCE), assignments, dispatcher, tmp_path)
    assert set(SESSION) <= set(dispatcher.imports) if torch else not set(SESSION) & set(dispatcher.imports), (
        f"{sorted(assignments)}, isolate={isolate}: the workers were asked to import {dispatcher.imports}")


def test_a_numpy_chapter_whose_tests_use_torch_gets_a_worker_with_torch(tmp_path: Path) -> None:
    # Chapter 2's kernels cannot import torch, but its test cells do (an oracle): its workers are forked with torch
    # imported once for them all. Chapter 1's tests use none: the workers that made the templates grade it.
    templates = keyed_templates(read_course(SOURCE), tmp_path, {"01_similarity", "02_scaled_attention"})
    needs = {a: needs_of(Job(template, {}, Limits(), True)) for a, template in templates.items()}
    assert set(SESSION) <= set(needs["02_scaled_attention"]), needs
    assert not set(SESSION) & set(needs["01_similarity"]), needs
