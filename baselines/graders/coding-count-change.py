# Hidden tests of coding-count-change (baselines/cases.jsonl): count_change(amount: int, coins: list[int]) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "count_change"


CHECKS = [
    ((0, [1, 2]), 1),
    ((0, []), 1),
    ((3, []), 0),
    ((3, [2]), 0),
    ((100, [50, 25, 10, 5, 1]), 292),
    ((200, [1, 2, 5, 10, 20, 50, 100, 200]), 73682),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
