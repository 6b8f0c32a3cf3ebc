# Hidden tests of coding-snake-case (baselines/cases.jsonl): to_snake(name: str) -> str.
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "to_snake"


CHECKS = [
    (("simple",), "simple"),
    (("already_snake",), "already_snake"),
    (("A",), "a"),
    (("PascalCase",), "pascal_case"),
    (("version2Update",), "version2_update"),
    (("HTTPServer",), "http_server"),
    (("getID",), "get_id"),
    (("XMLHttpRequest",), "xml_http_request"),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
