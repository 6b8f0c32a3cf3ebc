# Hidden tests of coding-max-subarray (baselines/cases.jsonl): max_subarray(xs: list[int]) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "max_subarray"


CHECKS = [
    (([5],), 5),
    (([-3, -1, -2],), -1),
    (([1, 2, 3],), 6),
    (([-1],), -1),
    (([2, -1, 2],), 3),
    (([0, 0],), 0),
    (([-2, 3, -4, 5, -1],), 5),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
