# Loomwork code-grader harness. Runs in the grader's own sandbox as
#   /usr/bin/python3 -I /work/_loomwork_grader/harness.py
# with the grader's input on stdin: {"nonce", "transcript", "outcome",
# "run_modules"}. The sandbox holds the grader and this folder only: none of
# the run's files, and no code of the run ever runs in this process. It
# loads /work/_loomwork_grader/grader.py, calls grade(transcript, outcome)
# (the run's files are in transcript["files"], as text) and prints one line
# last on stdout:
#   LOOMWORK-GRADE <nonce> {"status": ..., "passed": ..., "score": ..., "reason": ...}
# status is "ok" (a verdict), "fail" (grade() raised: the trial failed a
# check), "error" (the grader could not be loaded, or returned something
# that is not a verdict) or "plan" (grade() called run_checks: the line
# carries the plan instead, and Loomwork runs the solution under driver.py
# in a second sandbox).
import importlib.util
import json
import sys
import traceback

GRADER = "/work/_loomwork_grader/grader.py"


def emit(nonce, obj):
    sys.stdout.flush()
    sys.stderr.flush()
    sys.__stdout__.write("\nLOOMWORK-GRADE %s %s\n" % (nonce, json.dumps(obj, separators=(",", ":"))))
    sys.__stdout__.flush()


def verdict(nonce, status, passed, score, reason):
    emit(nonce, {"status": status, "passed": passed, "score": score, "reason": reason})


def where(tb):
    # The innermost frame in the grader file: the check that failed.
    loc = ""
    for fr in traceback.extract_tb(tb):
        if fr.filename == GRADER:
            loc = "grader.py line %d: %s" % (fr.lineno, (fr.line or "").strip())
    return loc


def raised(nonce, e, run_modules):
    traceback.print_exc()
    if isinstance(e, ModuleNotFoundError) and e.name and e.name.split(".")[0] in run_modules:
        # The grader imported the run's code into its own process: that is
        # exactly what this layout forbids, so it is the grader's bug.
        verdict(nonce, "error", False, 0.0,
                "grader.py imports %s, a file of the run: code graders never load the run's code in their own process; "
                "call loomwork_checks.run_checks(...) to run it in a sandbox of its own" % e.name)
        return
    msg = (str(e) or "assertion failed") if isinstance(e, AssertionError) else "%s: %s" % (type(e).__name__, e)
    loc = where(e.__traceback__)
    verdict(nonce, "fail", False, 0.0, "%s (%s)" % (msg, loc) if loc else msg)


def main():
    data = json.loads(sys.stdin.read())
    nonce = data["nonce"]
    run_modules = set(data.get("run_modules") or [])
    sys.path.insert(0, "/work/_loomwork_grader")
    import loomwork_checks

    try:
        spec = importlib.util.spec_from_file_location("grader", GRADER)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn = getattr(mod, "grade")
    except (SyntaxError, AttributeError) as e:
        traceback.print_exc()
        verdict(nonce, "error", False, 0.0, "grader did not load: %s: %s" % (type(e).__name__, e))
        return
    except BaseException as e:
        raised(nonce, e, run_modules)
        return
    try:
        v = fn(data["transcript"], data["outcome"])
    except loomwork_checks.Plan as p:
        emit(nonce, {"status": "plan", "plan": p.plan})
        return
    except BaseException as e:
        raised(nonce, e, run_modules)
        return
    if isinstance(v, bool):
        verdict(nonce, "ok", v, 1.0 if v else 0.0, "grade() returned %s" % v)
    elif isinstance(v, (int, float)):
        verdict(nonce, "ok", None, float(v), "grade() returned score %s" % v)
    elif isinstance(v, dict):
        passed = v.get("passed")
        score = v.get("score")
        if passed is not None and not isinstance(passed, bool):
            verdict(nonce, "error", False, 0.0, "grade() returned passed=%r, want a bool" % (passed,))
            return
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            verdict(nonce, "error", False, 0.0, "grade() returned score=%r, want a number" % (score,))
            return
        if passed is None and score is None:
            verdict(nonce, "error", False, 0.0, "grade() returned a dict without passed or score")
            return
        verdict(nonce, "ok", passed, None if score is None else float(score), str(v.get("reason", "")))
    else:
        verdict(nonce, "error", False, 0.0, "grade() returned %s, want a bool, a number in [0, 1] or a dict" % type(v).__name__)


main()
