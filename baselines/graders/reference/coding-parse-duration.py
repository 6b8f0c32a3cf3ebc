import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(s):
    m = re.fullmatch(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", s)
    if not s or m is None:
        raise ValueError("not a duration: %r" % (s,))
    return sum(int(v) * _UNITS[u] for v, u in zip(m.groups(), "dhms") if v is not None)
