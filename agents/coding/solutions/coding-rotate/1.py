def rotate(matrix):
    rows = matrix.copy().reverse()
    return [list(col) for col in zip(*rows)]


if __name__ == "__main__":
    print(rotate([[1, 2, 3], [4, 5, 6]]))
