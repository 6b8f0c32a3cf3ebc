def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2 == 1:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


if __name__ == "__main__":
    print(median([3, 1, 4, 1, 5]))
