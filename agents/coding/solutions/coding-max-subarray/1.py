def max_subarray(xs):
    best = current = 0
    for x in xs:
        current = max(0, current + x)
        best = max(best, current)
    return best


if __name__ == "__main__":
    print(max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]))
