# Hidden tests of coding-rle (baselines/cases.jsonl): rle_encode(s: str) -> str.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "rle_encode"


CHECKS = [
    (("",), ""),
    (("a",), "1a"),
    (("abc",), "1a1b1c"),
    (("a" * 12 + "b",), "12a1b"),
    (("aabbaa",), "2a2b2a"),
    (("  x",), "2 1x"),
    (("AAa",), "2A1a"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
