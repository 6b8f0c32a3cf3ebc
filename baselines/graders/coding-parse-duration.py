# Hidden tests of coding-parse-duration (baselines/cases.jsonl): parse_duration(s: str) -> int.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import Raises, run_checks

NAME = "parse_duration"


CHECKS = [
    (("45s",), 45),
    (("1d",), 86400),
    (("2h5s",), 7205),
    (("0s",), 0),
    (("1d2h3m4s",), 93784),
    (("",), Raises(ValueError)),
    (("5x",), Raises(ValueError)),
    (("1m1h",), Raises(ValueError)),
    (("1h 30m",), Raises(ValueError)),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
