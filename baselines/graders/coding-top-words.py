# Hidden tests of coding-top-words (baselines/cases.jsonl): top_words(text: str, k: int) -> list[tuple[str, int]].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "top_words"


CHECKS = [
    (("b a c a b c d", 3), [("a", 2), ("b", 2), ("c", 2)]),
    (("Hi! hi, HI.", 1), [("hi", 3)]),
    (("don't stop, don't", 1), [("don't", 2)]),
    (("x y", 5), [("x", 1), ("y", 1)]),
    (("", 3), []),
    (("a1 a2 b", 2), [("a", 2), ("b", 1)]),
    (("zeta alpha zeta alpha beta", 2), [("alpha", 2), ("zeta", 2)]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
