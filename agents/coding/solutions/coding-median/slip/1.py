def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


if __name__ == "__main__":
    print(median([3, 1, 4, 1, 5]))
