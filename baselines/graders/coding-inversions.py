# Hidden tests of coding-inversions (baselines/cases.jsonl): count_inversions(xs: list[int]) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "count_inversions"


N = 100_000
CHECKS = [
    (([],), 0),
    (([1],), 0),
    (([1, 2, 3, 4, 5],), 0),
    (([5, 4, 3, 2, 1],), 10),
    (([2, 2, 1],), 2),
    (([1, 3, 2, 3, 1],), 4),
    # Big inputs: a quadratic solution takes minutes and the sandbox stops it.
    (([(i * 7919 + 13) % 100003 for i in range(N)],), 2499927115, "[(i * 7919 + 13) % 100003 for i in range(100000)]"),
    ((list(range(N, 0, -1)),), N * (N - 1) // 2, "list(range(100000, 0, -1))"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
