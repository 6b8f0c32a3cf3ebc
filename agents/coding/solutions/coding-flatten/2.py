def flatten(nested):
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out


if __name__ == "__main__":
    print(flatten([1, [2, [3, 4]], 5]))
