"""Grades and feedback back into Canvas and Moodle: `python -m autograder export` and the Canvas feedback
zip.

Process: the grader (the instructor's command line).
Imports: autograder.records, autograder.reports, autograder.submissions.
"""
