"""`RunPlan`: what a run of `grade` works from, computed once (`make_plan`) from its `Options` and the
submissions found, and then only read: the output folder and what it stored, the course, the templates of the
assignments handed in, the tasks, how kernels run (warm or cold, and why), and the settings every job and class
file is made with. `make_plan` is where the options are read after the submissions are found; later steps
read the plan.

Runs in the grader.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.options import Options
from autograder.grading.secret import hand_in_key, load_secret
from autograder.grading.tasks import make_tasks
from autograder.grading.timeline import Timeline
from autograder.grading.templates import Course, generate_templates, generated, keyed_templates, read_template
from autograder.records import Job, Task, Template, tensors_cross
from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import Stored, load_state
from autograder.sandbox.limits import Limits
from autograder.submissions.find import Found
from autograder.workers.dispatch import Dispatcher, Isolation, KernelSet, grading_weight
from autograder.workers.forks import grading_imports
from autograder.workers.pool import Pool

NOTHING_TO_GRADE = "every result is stored: no kernel is started"


@dataclass(frozen=True)
class RunPlan:
    """One run of `grade`, decided before anything is graded."""

    out: OutputFolder
    course: Course
    stored: Mapping[tuple[str, str], Stored]  # DIR's rows when the run began: (student, assignment) -> its row
    db_url: str  # the class gradebook (`--db`, else DIR's SQLite file)
    limits: Limits
    isolate: bool
    force: bool  # grade again what is stored
    progress: bool
    similarity_threshold: float | None  # None: no similarity.csv
    templates: Mapping[str, Template]  # of the assignments handed in, asked for or stored in DIR
    tasks: tuple[Task, ...]
    isolation: Isolation  # how kernels run: warm or cold, and why
    zygotes: Mapping[KernelSet, str]  # the warm processes started for this run's kernels: their addresses
    secret: bytes = field(repr=False)  # what hidden inputs derive from (`autograder.grading.secret`)

    @classmethod
    def of(cls, options: Options, out: OutputFolder, course: Course, stored: Mapping[tuple[str, str], Stored],
           templates: Mapping[str, Template], tasks: list[Task], isolation: Isolation,
           zygotes: Mapping[KernelSet, str], secret: bytes) -> RunPlan:
        """The plan of ``options``, graded into ``out``, once the rest is known: the one place options are read
        after the submissions are found."""
        return cls(out, course, stored, options.db_url or out.gradebook_url, options.limits, options.isolate,
                   options.force, options.progress, options.similarity_threshold, templates, tuple(tasks), isolation,
                   zygotes, secret)

    def job(self, task: Task, scratch: Path) -> Job:
        """The job that grades ``task``, forked warm from its kernels' zygote when this run's kernels are."""
        template = self.templates[task.assignment]
        zygote = self.zygotes.get(KernelSet.of(template), "") if self.isolation.warm else ""
        return Job(template, task.notebooks, self.limits, self.isolate, scratch=str(scratch), warm=self.isolation.warm,
                   zygote=zygote, hidden_key=hand_in_key(self.secret, task.student, task.assignment, task.notebooks))


def handed_in(found: Mapping[str, Found], course: Course, asked: tuple[str, ...]) -> set[str] | None:
    """The assignments whose template is needed: those handed in, else those ``asked`` for (None: every one)."""
    given = {a for entry in found.values() for part in (entry.files, entry.others, entry.problems) for a in part if a}
    return (given & course.assignments) or set(asked) or None


def make_plan(options: Options, out: OutputFolder, course: Course, found: Mapping[str, Found],
              stored: Mapping[tuple[str, str], Stored], pool: Pool, dispatcher: Dispatcher, scratch: Path,
              timeline: Timeline) -> RunPlan:
    """Plan the run: the secret made or refused first (`autograder.grading.secret.SecretUnusable`), then the
    templates keyed. When ``out`` caches every one, the tasks are made at once, and only the assignments with a
    task to grade get workers and warm processes (none when every result is stored: nothing is started, nothing
    heavy imported). Else those of every assignment handed in are started first (`Dispatcher.prepare`), and
    import while ``pool`` makes the missing templates and the sandbox is checked (`Dispatcher.isolation`:
    `autograder.sandbox.probe.SandboxUnavailable`); then the tasks. Each step is marked on ``timeline``."""
    given = handed_in(found, course, options.assignments)
    needed = None if given is None else given | ({a for _, a in stored} & course.assignments)
    secret = load_secret(options.secret_file or out.secret)
    templates = keyed_templates(course, out.cache, needed)
    if all(map(generated, templates.values())):
        templates = {a: read_template(template) for a, template in templates.items()}
        tasks = make_tasks(found, templates, options.grading_key, scratch / "restored")
        graded = {t.assignment for t in tasks if not t.problem and (options.force or load_state(out, t) is None)}
        timeline.mark(f"templates cached, {len(tasks)} tasks keyed: {', '.join(sorted(graded)) or 'none'} to grade")
        if not graded:
            return RunPlan.of(options, out, course, stored, templates, tasks, Isolation(NOTHING_TO_GRADE, False), {},
                              secret)
        zygotes = _start(options, {a: templates[a] for a in graded}, dispatcher, scratch)
        timeline.mark("workers and warm processes started")
        isolation = dispatcher.isolation(options.isolate, options.warm)
        timeline.mark("sandbox checked")
        return RunPlan.of(options, out, course, stored, templates, tasks, isolation, zygotes, secret)
    zygotes = _start(options, {a: t for a, t in templates.items() if given is None or a in given}, dispatcher,
                     scratch)
    timeline.mark("workers and warm processes started")
    with ThreadPoolExecutor(1) as background:
        checked = background.submit(dispatcher.isolation, options.isolate, options.warm)
        templates = generate_templates(course.source, templates, pool)
        timeline.mark(f"templates made: {', '.join(sorted(templates))}")
        isolation = checked.result()
        timeline.mark("sandbox checked")
    tasks = make_tasks(found, templates, options.grading_key, scratch / "restored")
    timeline.mark(f"{len(tasks)} tasks keyed")
    return RunPlan.of(options, out, course, stored, templates, tasks, isolation, zygotes, secret)


def _start(options: Options, templates: Mapping[str, Template], dispatcher: Dispatcher,
           scratch: Path) -> Mapping[KernelSet, str]:
    """Start what grading the assignments of ``templates`` needs and let it import (`Dispatcher.prepare`): the
    workers, with what grading each template needs (`autograder.workers.forks.grading_imports`: what its kernels
    preload and its test cells import, the channel's torch, torch's checks), and (warm and isolated) a warm process
    per set of kernels; their addresses. Both in the order the jobs come (`grading_weight`), so that what the first
    jobs need is imported first."""
    order = sorted(templates.values(), key=lambda t: (grading_weight(KernelSet.of(t), t.imports), t.assignment))
    imports = [module for template in order  # tensors_cross: the channel's torch (`Job.tensors`)
               for module in grading_imports(template, tensors_cross(template.packages, options.isolate))]
    return dispatcher.prepare(tuple(dict.fromkeys(imports)), tuple(dict.fromkeys(map(KernelSet.of, order))),
                              str(scratch), options.warm and options.isolate)
