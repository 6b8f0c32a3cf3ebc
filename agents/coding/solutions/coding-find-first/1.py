from bisect import bisect_left


def find_first(xs, target):
    i = bisect_left(xs, target)
    if i < len(xs) and xs[i] == target:
        return i
    return -1


if __name__ == "__main__":
    print(find_first([1, 2, 2, 2, 3], 2))
