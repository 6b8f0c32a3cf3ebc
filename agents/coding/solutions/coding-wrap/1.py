def wrap(text, width):
    lines = []
    for word in text.split():
        if len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


if __name__ == "__main__":
    print(wrap("the quick brown fox jumps over the lazy dog", 10))
