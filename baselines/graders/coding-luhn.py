# Hidden tests of coding-luhn (baselines/cases.jsonl): luhn_valid(number: str) -> bool.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "luhn_valid"


CHECKS = [
    (("8273 1232 7352 0569",), False),
    (("0",), False),
    ((" 0",), False),
    (("059",), True),
    (("055a 444 285",), False),
    (("0000 0",), True),
    (("79927398713",), True),
    (("79927398710",), False),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
