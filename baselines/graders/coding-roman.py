# Hidden tests of coding-roman (baselines/cases.jsonl): to_roman(n: int) -> str.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "to_roman"


CHECKS = [
    ((1,), "I"),
    ((4,), "IV"),
    ((9,), "IX"),
    ((14,), "XIV"),
    ((40,), "XL"),
    ((90,), "XC"),
    ((400,), "CD"),
    ((944,), "CMXLIV"),
    ((2024,), "MMXXIV"),
    ((3999,), "MMMCMXCIX"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
