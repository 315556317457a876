"""One notebook graded in the worker: nbgrader configured for trusted execution, the test cells run
where no student code runs, the hidden tests' seeds, and the feedback page.

Process: the worker (`autograder.workers.worker`).
Imports: autograder.channel, autograder.sandbox, autograder.records, autograder.measure.
"""
