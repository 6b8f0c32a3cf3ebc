def count_inversions(xs):
    count = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if xs[i] > xs[j]:
                count += 1
    return count


if __name__ == "__main__":
    print(count_inversions([3, 1, 2]))
