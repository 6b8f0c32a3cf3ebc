# Hidden tests of coding-merge-intervals (baselines/cases.jsonl): merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "merge_intervals"


CHECKS = [
    (([],), []),
    (([(5, 7)],), [(5, 7)]),
    (([(8, 10), (1, 3), (2, 6)],), [(1, 6), (8, 10)]),
    (([(1, 3), (3, 5)],), [(1, 5)]),
    (([(1, 10), (2, 3), (4, 5)],), [(1, 10)]),
    (([(1, 2), (4, 5)],), [(1, 2), (4, 5)]),
    (([(-5, -1), (-2, 0)],), [(-5, 0)]),
    (([(2, 2), (2, 2)],), [(2, 2)]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
