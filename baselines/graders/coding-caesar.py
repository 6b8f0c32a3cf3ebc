# Hidden tests of coding-caesar (baselines/cases.jsonl): caesar(text: str, shift: int) -> str.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "caesar"


CHECKS = [
    (("abc", 0), "abc"),
    (("abc", -3), "xyz"),
    (("abc", 29), "def"),
    (("Zz", 1), "Aa"),
    (("123 !?", 5), "123 !?"),
    (("Hello", -52), "Hello"),
    (("café", 1), "dbgé"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
