# Hidden tests of coding-weekdays (baselines/cases.jsonl): count_weekdays(start: str, end: str) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "count_weekdays"


CHECKS = [
    (("2024-03-02", "2024-03-03"), 0),
    (("2024-03-04", "2024-03-04"), 1),
    (("2024-03-05", "2024-03-04"), 0),
    (("2024-01-01", "2024-12-31"), 262),
    (("2023-12-29", "2024-01-01"), 2),
    (("2000-01-01", "2099-12-31"), 26089),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
