# Hidden tests of coding-wrap (baselines/cases.jsonl): wrap(text: str, width: int) -> list[str].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "wrap"


CHECKS = [
    (("", 10), []),
    (("   ", 10), []),
    (("a b c", 1), ["a", "b", "c"]),
    (("abcdefghijk xy", 5), ["abcdefghijk", "xy"]),
    (("aa  bb\tcc\ndd", 5), ["aa bb", "cc dd"]),
    (("abc def", 7), ["abc def"]),
    (("abc def", 6), ["abc", "def"]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
