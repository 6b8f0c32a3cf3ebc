# Hidden tests of coding-wrap (baselines/cases.jsonl): wrap(text: str, width: int) -> list[str].
#
# A code grader (docs/scoring.md, "Code graders"): the harness runs grade()
# in the sandbox with the agent's files in /work, so `import solution`
# imports the solution.py the agent wrote. The agent never sees this file;
# its task shows one example only.
import copy

NAME = "wrap"


class Raises:
    """A check that passes when the call raises exc."""

    def __init__(self, exc):
        self.exc = exc

    def __repr__(self):
        return "raises " + self.exc.__name__


CHECKS = [
    (("", 10), []),
    (("   ", 10), []),
    (("a b c", 1), ["a", "b", "c"]),
    (("abcdefghijk xy", 5), ["abcdefghijk", "xy"]),
    (("aa  bb\tcc\ndd", 5), ["aa bb", "cc dd"]),
    (("abc def", 7), ["abc def"]),
    (("abc def", 6), ["abc", "def"]),
]


def short(v, n=60):
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def grade(transcript, outcome):
    try:
        import solution
    except BaseException as e:  # a syntax error, or the import ran forever
        return {"passed": False, "score": 0.0, "reason": "import solution failed: %s: %s" % (type(e).__name__, e)}
    fn = getattr(solution, NAME, None)
    if not callable(fn):
        return {"passed": False, "score": 0.0, "reason": "solution.py defines no function %s" % NAME}
    if "before_checks" in globals():
        before_checks()
    passed, first = 0, None
    for check in CHECKS:
        args, want = check[0], check[1]
        call = "%s(%s)" % (NAME, check[2] if len(check) > 2 else ", ".join(short(a) for a in args))
        before = copy.deepcopy(args)
        try:
            got, err = fn(*args), None
        except Exception as e:
            got, err = None, e
        if isinstance(want, Raises):
            ok = isinstance(err, want.exc)
            what = "raised %s: %s" % (type(err).__name__, err) if err else "returned %s" % short(got)
        else:
            ok = err is None and got == want and (type(want) is not bool or type(got) is bool)
            what = "raised %s: %s" % (type(err).__name__, err) if err else "returned %s" % short(got)
            if ok and args != before:
                ok, what = False, "changed its argument to %s" % short(args)
        if ok:
            passed += 1
        elif first is None:
            first = "%s %s, want %s" % (call, what, short(want))
    n = len(CHECKS)
    reason = "%d/%d hidden tests passed" % (passed, n)
    if first:
        reason += "; first failure: " + first
    return {"passed": passed == n, "score": passed / n, "reason": reason}
