# Hidden tests of coding-median (baselines/cases.jsonl): median(xs: list[float]) -> float.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "median"


CHECKS = [
    (([7],), 7),
    (([1, 2],), 1.5),
    (([4, 1, 3, 2],), 2.5),
    (([-5, -1, -3],), -3),
    (([0.5, 0.25],), 0.375),
    (([2, 2, 2, 2],), 2),
    (([10, 1, 9, 2, 8, 3],), 5.5),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
