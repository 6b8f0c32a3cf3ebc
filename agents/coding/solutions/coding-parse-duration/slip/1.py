import re

SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
PATTERN = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(s):
    match = PATTERN.fullmatch(s)
    if match is None:
        raise ValueError(f"not a duration: {s!r}")
    return sum(int(n) * SECONDS[unit] for n, unit in zip(match.groups(), "dhms") if n)


if __name__ == "__main__":
    print(parse_duration("1h30m"))
