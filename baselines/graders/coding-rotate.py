# Hidden tests of coding-rotate (baselines/cases.jsonl): rotate(matrix: list[list[int]]) -> list[list[int]].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "rotate"


CHECKS = [
    (([],), []),
    (([[1]],), [[1]]),
    (([[1, 2], [3, 4]],), [[3, 1], [4, 2]]),
    (([[1, 2, 3], [4, 5, 6], [7, 8, 9]],), [[7, 4, 1], [8, 5, 2], [9, 6, 3]]),
    (([[1], [2], [3]],), [[3, 2, 1]]),
    (([[1, 2, 3]],), [[1], [2], [3]]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
