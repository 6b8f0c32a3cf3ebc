def spiral(matrix):
    rows = [list(r) for r in matrix]
    out = []
    while rows:
        out.extend(rows.pop(0))
        rows = [list(r) for r in zip(*rows)][::-1]
    return out
