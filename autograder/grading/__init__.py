"""Plans and runs a class: the options, the templates, the tasks, the secret, the progress line, and
`grade` and `collect` themselves.

Process: the grader.
Imports: autograder.workers, autograder.reports, autograder.submissions, autograder.harness,
autograder.sandbox, autograder.records.
"""
