"""The wire between the worker and the kernel, and both of its ends.

Processes: `wire`, `codec`, `tensors`, `served` and `kernel_errors` run in the student's kernel (and `wire`, `codec`,
`tensors` in the worker too); `session`, `handles`, `classes`, `lent` and `gradients` run in the worker, on the
trusted side. Nothing test-only is here: the test suite's stand-in kernel is `tests.stand_in_kernel`.
Imports: nothing of autograder; the modules the kernel imports (`wire`, `codec`, `tensors`, `served`, `kernel_errors`)
never import the worker's side (`session`, `handles`, `classes`, `lent`, `gradients`).
"""
