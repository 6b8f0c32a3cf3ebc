# Loomwork code-grader harness. Runs inside the sandbox as
#   /usr/bin/python3 -I /work/_loomwork_grader/harness.py
# with the grader's input on stdin: {"nonce", "transcript", "outcome"}.
# It loads /work/_loomwork_grader/grader.py, calls grade(transcript, outcome)
# and prints the verdict as the last stdout line:
#   LOOMWORK-GRADE <nonce> {"status": ..., "passed": ..., "score": ..., "reason": ...}
# status is "ok" (a verdict), "fail" (grade() raised: the code under test
# failed a check or crashed) or "error" (the grader itself could not be
# loaded or returned something that is not a verdict).
#
# The run's files are in /work (the working directory, and on sys.path
# after the standard library), so a grader imports the agent's solution with
# `import solution`; loomwork_checks (table-driven hidden tests) is importable
# beside it.
import importlib.util
import json
import sys
import traceback

GRADER = "/work/_loomwork_grader/grader.py"


def emit(nonce, status, passed, score, reason):
    sys.stdout.flush()
    sys.stderr.flush()
    line = json.dumps({"status": status, "passed": passed, "score": score, "reason": reason})
    # Write through the original stdout even if the code under test
    # replaced sys.stdout.
    sys.__stdout__.write("\nLOOMWORK-GRADE %s %s\n" % (nonce, line))
    sys.__stdout__.flush()


def where(tb):
    # The innermost frame in the grader file: the check that failed.
    loc = ""
    for fr in traceback.extract_tb(tb):
        if fr.filename == GRADER:
            loc = "grader.py line %d: %s" % (fr.lineno, (fr.line or "").strip())
    return loc


def main():
    data = json.loads(sys.stdin.read())
    nonce = data["nonce"]
    # The grader's own folder (loomwork_checks) first; the run's files
    # last, after the standard library, so a file the run wrote (a copy.py,
    # a json.py) cannot shadow a module the grader imports, while
    # `import solution` still finds solution.py.
    sys.path.insert(0, "/work/_loomwork_grader")
    sys.path.append("/work")
    try:
        spec = importlib.util.spec_from_file_location("grader", GRADER)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn = getattr(mod, "grade")
    except (SyntaxError, AttributeError) as e:
        # A grader that does not compile or defines no grade() is the
        # grader's bug.
        traceback.print_exc()
        emit(nonce, "error", False, 0.0, "grader did not load: %s: %s" % (type(e).__name__, e))
        return
    except BaseException as e:
        # Anything else raised while loading comes from what the grader
        # imports at its top, usually the run's own code (a missing
        # solution.py, one that crashes on import): the run failed.
        traceback.print_exc()
        loc = where(e.__traceback__)
        msg = "%s: %s" % (type(e).__name__, e)
        emit(nonce, "fail", False, 0.0, "%s (%s)" % (msg, loc) if loc else msg)
        return
    try:
        v = fn(data["transcript"], data["outcome"])
    except AssertionError as e:
        traceback.print_exc()
        msg = str(e) or "assertion failed"
        loc = where(e.__traceback__)
        emit(nonce, "fail", False, 0.0, "%s (%s)" % (msg, loc) if loc else msg)
        return
    except BaseException as e:
        traceback.print_exc()
        loc = where(e.__traceback__)
        msg = "%s: %s" % (type(e).__name__, e)
        emit(nonce, "fail", False, 0.0, "%s (%s)" % (msg, loc) if loc else msg)
        return
    if isinstance(v, bool):
        emit(nonce, "ok", v, 1.0 if v else 0.0, "grade() returned %s" % v)
    elif isinstance(v, (int, float)):
        emit(nonce, "ok", None, float(v), "grade() returned score %s" % v)
    elif isinstance(v, dict):
        passed = v.get("passed")
        score = v.get("score")
        if passed is not None and not isinstance(passed, bool):
            emit(nonce, "error", False, 0.0, "grade() returned passed=%r, want a bool" % (passed,))
            return
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            emit(nonce, "error", False, 0.0, "grade() returned score=%r, want a number" % (score,))
            return
        if passed is None and score is None:
            emit(nonce, "error", False, 0.0, "grade() returned a dict without passed or score")
            return
        emit(nonce, "ok", passed, None if score is None else float(score), str(v.get("reason", "")))
    else:
        emit(nonce, "error", False, 0.0, "grade() returned %s, want a bool, a number in [0, 1] or a dict" % type(v).__name__)


main()
