"""What was handed in: a folder, a zip, a Canvas or a Moodle zip, found, staged and matched to the released
notebooks; and the student-only copy of the course.

Process: the grader.
Imports: nothing of autograder outside this package.
"""
