# Hidden tests of coding-find-first (baselines/cases.jsonl): find_first(xs: list[int], target: int) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "find_first"


BIG = list(range(0, 2_000_000, 2))
CHECKS = [
    (([], 1), -1),
    (([1, 3], 2), -1),
    (([5], 5), 0),
    (([1, 1, 1], 1), 0),
    (([1, 2, 3], 3), 2),
    (([2, 4], 0), -1),
    (([2, 4], 9), -1),
    ((BIG, 1_999_998), 999_999, "list(range(0, 2000000, 2)), 1999998"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
