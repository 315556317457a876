"""What a run leaves in its output folder: the folder's layout, the stored results, the gradebook,
`grades.csv`, `similarity.csv` and `report.html`.

Process: the grader.
Imports: autograder.records, autograder.nbgrader_course.
"""
