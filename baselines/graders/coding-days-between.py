# Hidden tests of coding-days-between (baselines/cases.jsonl): days_between(a: str, b: str) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "days_between"


CHECKS = [
    (("2024-05-05", "2024-05-05"), 0),
    (("2024-03-01", "2024-01-01"), 60),
    (("2000-02-28", "2000-03-01"), 2),
    (("1900-02-28", "1900-03-01"), 1),
    (("1999-12-31", "2000-01-01"), 1),
    (("2023-01-01", "2024-01-01"), 365),
    (("0001-01-01", "9999-12-31"), 3652058),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
