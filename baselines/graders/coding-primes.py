# Hidden tests of coding-primes (baselines/cases.jsonl): primes_up_to(n: int) -> list[int].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "primes_up_to"


CHECKS = [
    ((0,), []),
    ((1,), []),
    ((2,), [2]),
    ((13,), [2, 3, 5, 7, 11, 13]),
    ((30,), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),
    ((97,), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
