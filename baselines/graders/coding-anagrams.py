# Hidden tests of coding-anagrams (baselines/cases.jsonl): group_anagrams(words: list[str]) -> list[list[str]].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so run_checks
# (loomwork_checks, beside every code grader) imports the solution.py the
# agent wrote. The agent never sees this file;
# its task shows one example only.
from loomwork_checks import run_checks

NAME = "group_anagrams"


CHECKS = [
    (([],), []),
    ((["a"],), [["a"]]),
    ((["a", "a"],), [["a", "a"]]),
    ((["ab", "ba", "Ab"],), [["Ab"], ["ab", "ba"]]),
    ((["listen", "silent", "google", "enlist"],), [["enlist", "listen", "silent"], ["google"]]),
    (([""],), [[""]]),
]


def grade(transcript, outcome):
    return run_checks(NAME, CHECKS)
