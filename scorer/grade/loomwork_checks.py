# loomwork_checks: table-driven hidden tests for code graders.
#
# The harness puts this module beside every code grader in the sandbox, so
# a grader writes its checks as data and lets run_checks call the run's
# function:
#
#   from loomwork_checks import Raises, run_checks
#
#   NAME = "to_roman"
#   CHECKS = [((1994,), "MCMXCIV"), ((0,), Raises(ValueError))]
#
#   def grade(transcript, outcome):
#       return run_checks(NAME, CHECKS)
#
# A check is (args, want) or (args, want, "how to show the call"). want is
# the expected return value (compared with ==; a bool must be a bool), or
# Raises(ExceptionType). A call that changes its arguments fails. The
# verdict is {"passed": every check passed, "score": the share passed,
# "reason": "k/n hidden tests passed; first failure: f(x) returned y, want z"}.
import copy


class Raises:
    """A check that passes when the call raises exc."""

    def __init__(self, exc):
        self.exc = exc

    def __repr__(self):
        return "raises " + self.exc.__name__


def short(v, n=60):
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def run_checks(name, checks, module="solution", before=None):
    """Imports module (the run's solution.py), runs checks against its
    function name and returns the verdict. before, if given, runs after
    the import and before the first check (e.g. to forbid a builtin)."""
    try:
        mod = __import__(module)
    except BaseException as e:  # a syntax error, or the import ran forever
        return {"passed": False, "score": 0.0, "reason": "import %s failed: %s: %s" % (module, type(e).__name__, e)}
    fn = getattr(mod, name, None)
    if not callable(fn):
        return {"passed": False, "score": 0.0, "reason": "%s.py defines no function %s" % (module, name)}
    if before is not None:
        before()
    passed, first = 0, None
    for check in checks:
        args, want = check[0], check[1]
        call = "%s(%s)" % (name, check[2] if len(check) > 2 else ", ".join(short(a) for a in args))
        snapshot = copy.deepcopy(args)
        try:
            got, err = fn(*args), None
        except Exception as e:
            got, err = None, e
        what = "raised %s: %s" % (type(err).__name__, err) if err else "returned %s" % short(got)
        if isinstance(want, Raises):
            ok = isinstance(err, want.exc)
        else:
            ok = err is None and got == want and (type(want) is not bool or type(got) is bool)
            if ok and args != snapshot:
                ok, what = False, "changed its argument to %s" % short(args)
        if ok:
            passed += 1
        elif first is None:
            first = "%s %s, want %s" % (call, what, short(want))
    n = len(checks)
    reason = "%d/%d hidden tests passed" % (passed, n)
    if first:
        reason += "; first failure: " + first
    return {"passed": passed == n, "score": passed / n, "reason": reason}
