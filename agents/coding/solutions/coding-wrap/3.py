def wrap(text, width):
    lines, current = [], None
    for word in text.split():
        if len(current) + 1 + len(word) <= width:
            current = current + " " + word
        else:
            if current:
                lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


if __name__ == "__main__":
    print(wrap("the quick brown fox jumps over the lazy dog", 10))
