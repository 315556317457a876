"""Plans and runs a class: the options, the run's plan, the templates, the tasks, the secret, the progress
line, the output folder's lock, and `grade` and `collect` themselves.

Process: the grader.
Imports: autograder.workers, autograder.reports, autograder.submissions, autograder.sandbox, autograder.records,
autograder.milestones, autograder.nbgrader_course.
"""
