# loomwork_checks: table-driven hidden tests for code graders.
#
# The harness puts this module beside every code grader, so a grader
# writes its checks as data:
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
# the expected return value, or Raises(ExceptionType).
#
# run_checks does not call the solution here. The grader runs in a sandbox
# of its own that holds no file of the run; run_checks hands the harness a
# plan (the calls and, kept on the grader's side, the expected values) and
# ends grade(). The solution then runs in a second sandbox under a small
# driver that receives only the calls' arguments, and Loomwork compares each
# result with the expected value outside both sandboxes, by value and type
# (plain values only: None, bool, int, float, str, bytes, list, tuple,
# set, dict; an int equals the float of the same value, a bool is never an
# int). A call that changes its arguments fails. The verdict is
# {"passed": every check passed, "score": the share passed, "reason":
# "k/n hidden tests passed; first failure: f(x) returned y, want z"}.
#
# before, if given, is a function run in the solution's process before the
# solution is imported (e.g. to take away a builtin the task forbids). It
# is sent there as source, so it must be self-contained (imports inside
# it), and it is no secret: the solution runs beside it.
import inspect
import textwrap

import loomwork_values


class Raises:
    """A check that passes when the call raises exc (or a subclass)."""

    def __init__(self, exc):
        if not (isinstance(exc, type) and issubclass(exc, BaseException)):
            raise TypeError("Raises(%r): want an exception class" % (exc,))
        self.exc = exc

    def __repr__(self):
        return "raises " + self.exc.__name__


class Plan(BaseException):
    """Raised by run_checks to hand the harness its plan. A BaseException,
    so a grader's own `except Exception` does not swallow it."""

    def __init__(self, plan):
        super().__init__("run_checks plan")
        self.plan = plan


def short(v, n=60):
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def run_checks(name, checks, module="solution", before=None):
    """Plans the checks of the run's function name in module (the run's
    solution.py) and ends grade(): the harness runs them apart from the
    grader and its verdict is the grade's."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError("run_checks: name %r is not a function name" % (name,))
    if not isinstance(module, str) or not all(p.isidentifier() for p in module.split(".")):
        raise ValueError("run_checks: module %r is not a module name" % (module,))
    calls = []
    for i, check in enumerate(checks):
        if not isinstance(check, tuple) or len(check) not in (2, 3) or not isinstance(check[0], tuple):
            raise ValueError("run_checks: check %d is %s, want (args tuple, want) or (args, want, shown call)" % (i, short(check)))
        args, want = check[0], check[1]
        shown = check[2] if len(check) > 2 else ", ".join(short(a) for a in args)
        try:
            c = {"args": loomwork_values.encode(args), "call": "%s(%s)" % (name, shown), "want_shown": short(want)}
            if isinstance(want, Raises):
                c["raises"] = loomwork_values.exc_name(want.exc)
            else:
                c["want"] = loomwork_values.encode(want)
        except loomwork_values.Unencodable as e:
            raise ValueError("run_checks: check %d (%s): %s" % (i, short(check), e))
        calls.append(c)
    if not calls:
        raise ValueError("run_checks: no checks")
    plan = {"module": module, "name": name, "calls": calls}
    if before is not None:
        plan["before"] = {"name": before.__name__, "source": textwrap.dedent(inspect.getsource(before))}
    raise Plan(plan)
