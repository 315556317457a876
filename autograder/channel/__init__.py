"""The wire between the worker and the kernel, and both of its ends.

Processes: `wire`, `tensors` and `served` run in the student's kernel (and `wire`, `tensors` in the worker
too); `session`, `handles` and `gradients` run in the worker, on the trusted side.
Imports: nothing of autograder; the modules the kernel imports (`wire`, `tensors`, `served`) never
import the worker's side (`session`, `handles`, `gradients`).
"""
