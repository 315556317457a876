"""The processes that grade: the local pool, the worker forks, the worker's main, the class gradebook's recorder
and the Dask pool, and the `dispatch.Dispatcher` protocol the two pools share.

Processes: `dispatch`, `pool`, `forks` (its parent) and `dask_pool` run in the grader; `worker` and `forks` (its
children) in a worker; the class gradebook's `recorder` in the grader and `recording` in the worker that writes it;
`dask_worker` in a Dask worker.
Imports: autograder.harness, autograder.sandbox, autograder.records, autograder.milestones, autograder.reports,
autograder.nbgrader_course.
"""
