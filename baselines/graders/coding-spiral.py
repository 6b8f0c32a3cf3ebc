# Hidden tests of coding-spiral (baselines/cases.jsonl): spiral(matrix: list[list[int]]) -> list[int].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "spiral"


CHECKS = [
    (([],), []),
    (([[]],), []),
    (([[1]],), [1]),
    (([[1, 2, 3]],), [1, 2, 3]),
    (([[1], [2], [3]],), [1, 2, 3]),
    (([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],), [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7]),
    (([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]],), [1, 2, 3, 6, 9, 12, 11, 10, 7, 4, 5, 8]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
