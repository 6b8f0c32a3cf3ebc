# Hidden tests of coding-flatten (baselines/cases.jsonl): flatten(nested: list) -> list.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "flatten"


def deep(n):
    v = [7]
    for _ in range(n):
        v = [v]
    return v


CHECKS = [
    (([],), []),
    (([[[]]],), []),
    ((["ab", ["cd"]],), ["ab", "cd"]),
    (([(1, 2), [3]],), [(1, 2), 3]),
    (([1, [2], [[3]], [[[4]]]],), [1, 2, 3, 4]),
    (([[1, 2], [], [3, [4, [5, []]]]],), [1, 2, 3, 4, 5]),
    ((deep(200),), [7], "[[...[7]...]] (200 levels)"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
