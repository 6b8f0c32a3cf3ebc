# loomwork_values: the typed value encoding between a code grader and the
# solution it checks. Both sides run it, in different sandboxes: the
# grader's side encodes a check's arguments and expected value, the
# solution's side (driver.py) decodes the arguments and encodes what the
# solution returned. The grader compares the two encodings in Go, by value
# and type, so no object of the solution's is ever compared with its own
# __eq__, and the expected values never enter the solution's process.
#
# A value is None as null, an int as a JSON integer (any size), a str as a
# JSON string, and everything else as a JSON array [tag, payload]:
#   ["bool", true|false] ["float", "<repr>"] ["bytes", "<hex>"]
#   ["list", [v...]] ["tuple", [v...]] ["set", [v...]] (set and frozenset)
#   ["dict", [[k, v]...]]
# (the common cases bare, so a million-int argument stays a few MB). Floats
# are strings so no JSON reader rounds them. Sets and dicts are sorted by
# their members' encodings, so equal values encode alike.
import json

MAX_DEPTH = 300


class Unencodable(Exception):
    """The value is not a plain value (a class instance, a function, a
    cycle, an int too long to print)."""


def _key(e):
    return json.dumps(e, separators=(",", ":"), sort_keys=True)


# Ints Python refuses to print (sys.get_int_max_str_digits()).
_INT_LIMIT = 10 ** 4000


def encode(v, depth=0):
    if depth > MAX_DEPTH:
        raise Unencodable("nested deeper than %d levels (or a cycle)" % MAX_DEPTH)
    # Exact types only: a subclass (of int, str, list, dict, ...) may
    # redefine what it means to be equal or how it iterates; the solution
    # must return plain values.
    t = type(v)
    if v is None:
        return None
    if t is int:
        if -_INT_LIMIT < v < _INT_LIMIT:
            return v
        raise Unencodable("an int of more than 4000 digits")
    if t is str:
        return v
    if t is bool:
        return ["bool", v]
    if t is float:
        return ["float", repr(v)]
    if t is bytes:
        return ["bytes", v.hex()]
    if t is list:
        return ["list", [encode(x, depth + 1) for x in v]]
    if t is tuple:
        return ["tuple", [encode(x, depth + 1) for x in v]]
    if t is set or t is frozenset:
        return ["set", sorted((encode(x, depth + 1) for x in v), key=_key)]
    if t is dict:
        items = [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]
        return ["dict", sorted(items, key=lambda kv: _key(kv[0]))]
    raise Unencodable("a %s.%s, not a plain value" % (t.__module__, t.__qualname__))


def decode(e):
    if e is None or type(e) is int or type(e) is str:
        return e
    if not isinstance(e, list) or len(e) != 2 or not isinstance(e[0], str):
        raise ValueError("not an encoded value: %r" % (e,))
    tag, p = e
    if tag == "bool":
        return p is True
    if tag == "float":
        return float(p)
    if tag == "bytes":
        return bytes.fromhex(p)
    if tag == "list":
        return [decode(x) for x in p]
    if tag == "tuple":
        return tuple(decode(x) for x in p)
    if tag == "set":
        return set(decode(x) for x in p)
    if tag == "dict":
        return {decode(k): decode(x) for k, x in p}
    raise ValueError("unknown tag %r" % (tag,))


def exc_name(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)
