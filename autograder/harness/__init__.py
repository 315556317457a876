"""One notebook graded in the worker: nbgrader configured for trusted execution, the test cells run
where no student code runs, the hidden tests' seeds, how the checks read and compare values, and the feedback page.

Process: the worker (`autograder.workers.worker`); `hidden_seed` and `check_values`, which `autograder.checks`
imports, also in a student's own kernel (the visible tests).
Imports: autograder.channel, autograder.sandbox, autograder.records, autograder.measure, autograder.nbgrader_course.
"""
