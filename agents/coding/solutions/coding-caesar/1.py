import string


def caesar(text, shift):
    lower, upper = string.ascii_lowercase, string.ascii_uppercase
    k = shift % 26
    table = str.maketrans(lower + upper, lower[k:] + lower[:k] + upper[k:] + upper[:k])
    return text.translate(table)


if __name__ == "__main__":
    print(caesar("Hello, World!", 3))
