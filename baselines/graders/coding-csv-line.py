# Hidden tests of coding-csv-line (baselines/cases.jsonl): parse_csv_line(line: str) -> list[str].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "parse_csv_line"


CHECKS = [
    (("a,,b",), ["a", "", "b"]),
    (('""',), [""]),
    (('x,"he said ""hi"""',), ["x", 'he said "hi"']),
    (("",), [""]),
    (("a,",), ["a", ""]),
    ((" a , b ",), [" a ", " b "]),
    (('"1,2,3"',), ["1,2,3"]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
