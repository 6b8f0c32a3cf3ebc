# Loomwork solution driver. Runs in the solution's own sandbox as
#   /usr/bin/python3 -I /work/_loomwork_driver/driver.py
# beside the run's files, with a plan on stdin: {"module", "name", "before",
# "calls": [{"args": <encoded tuple>}...]}. It holds no expected value and
# decides nothing: it imports the solution, calls it once per plan entry and
# reports each outcome, encoded (loomwork_values), on what was stdout when
# it started:
#   LOOMWORK-RESULT {"imported": true}            (or {"import_error": ...}, {"no_function": ...})
#   LOOMWORK-RESULT {"i": 0, "value": <enc>, "shown": "..."}      (+ "args_changed": "<repr>")
#   LOOMWORK-RESULT {"i": 1, "raised": ["builtins.ValueError", ...], "message": "..."}
#   LOOMWORK-RESULT {"i": 2, "unencodable": "..."}
#   LOOMWORK-RESULT {"done": 3}
# The solution's own prints go to stderr (fd 1 is pointed there before it is
# imported). The solution shares this process and can reach anything here;
# whatever it makes this channel say is only its own answer, and Loomwork
# reads the channel strictly (every line in this order, nothing else), so
# an extra, missing or reordered line fails the solution.
import importlib
import json
import os
import sys

sys.path.insert(0, "/work/_loomwork_driver")
import loomwork_values  # noqa: E402  (before the run's folder joins sys.path)

MAX_LINE = 1 << 20


def main():
    data = json.loads(sys.stdin.read())
    out = os.dup(1)
    os.dup2(2, 1)

    def send(obj):
        line = json.dumps(obj, separators=(",", ":"))
        if len(line) > MAX_LINE:
            line = json.dumps({"i": obj.get("i"), "unencodable": "a result of %d bytes encoded (limit %d)" % (len(line), MAX_LINE)})
        b = ("LOOMWORK-RESULT " + line + "\n").encode()
        while b:
            b = b[os.write(out, b):]

    def short(v, n=60):
        try:
            s = repr(v)
        except BaseException as e:  # a repr that raises is the solution's own
            s = "<repr raised %s>" % type(e).__name__
        return s if len(s) <= n else s[: n - 3] + "..."

    def describe(e):
        try:
            return "%s: %s" % (type(e).__name__, str(e)[:200])
        except BaseException:
            return type(e).__name__

    encoded = [c["args"] for c in data["calls"]]
    calls = [loomwork_values.decode(e) for e in encoded]
    sys.path.append("/work")
    before = data.get("before")
    if before:
        ns = {}
        exec(compile(before["source"], "before_checks", "exec"), ns)
        ns[before["name"]]()
    try:
        mod = importlib.import_module(data["module"])
    except BaseException as e:
        send({"import_error": "import %s failed: %s: %s" % (data["module"], type(e).__name__, e)})
        return
    fn = getattr(mod, data["name"], None)
    if not callable(fn):
        send({"no_function": "%s.py defines no function %s" % (data["module"], data["name"])})
        return
    send({"imported": True})
    for i, args in enumerate(calls):
        args = list(args)
        try:
            got = fn(*args)
        except BaseException as e:
            send({"i": i, "raised": [loomwork_values.exc_name(c) for c in type(e).__mro__], "message": describe(e)})
            continue
        try:
            r = {"i": i, "value": loomwork_values.encode(got), "shown": short(got)}
        except loomwork_values.Unencodable as e:
            r = {"i": i, "unencodable": str(e), "shown": short(got)}
        # The arguments after the call, compared here with what was sent
        # (an encoding of plain values on both sides): a call that changes
        # its arguments fails. The solution could lie about this; it would
        # only hide a fault of its own, not reach an expected value.
        try:
            changed = loomwork_values.encode(tuple(args)) != encoded[i]
        except loomwork_values.Unencodable:
            changed = True
        if changed:
            r["args_changed"] = short(tuple(args))
        send(r)
    send({"done": len(calls)})


main()
