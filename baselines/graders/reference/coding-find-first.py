import bisect


def find_first(xs, target):
    i = bisect.bisect_left(xs, target)
    return i if i < len(xs) and xs[i] == target else -1
