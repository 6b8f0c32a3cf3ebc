# Hidden tests of coding-balanced (baselines/cases.jsonl): balanced(s: str) -> bool.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "balanced"


CHECKS = [
    (("",), True),
    (("(]",), False),
    (("((",), False),
    (("))((",), False),
    (("a(b[c]d)e",), True),
    (("]",), False),
    (("([)]",), False),
    (("{" * 1000 + "}" * 1000,), True, "'{' * 1000 + '}' * 1000"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
