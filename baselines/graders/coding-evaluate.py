# Hidden tests of coding-evaluate (baselines/cases.jsonl): evaluate(expr: str) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import Raises, run_checks

NAME = "evaluate"


CHECKS = [
    (("7",), 7),
    (("1 + 2 * 3",), 7),
    (("(1 + 2) * 3",), 9),
    (("10 - 4 - 3",), 3),
    (("2*(3+(4-1))*2",), 24),
    (("  42  ",), 42),
    (("100 - 2 * 3 * 4 + 5",), 81),
    (("(2 +",), Raises(ValueError)),
]


def before_checks():
    # The task forbids eval(): an evaluate() that calls it fails every check.
    import builtins

    def no_eval(*args, **kwargs):
        raise RuntimeError("evaluate() called eval(), which the task forbids")

    builtins.eval = no_eval


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS, before=before_checks)
