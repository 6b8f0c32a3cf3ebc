import re


def evaluate(expr):
    tokens = re.findall(r"\d+|[-+*()]", expr)
    pos = 0

    def expression():
        nonlocal pos
        value = term()
        while tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            value = value + term() if op == "+" else value - term()
        return value

    def term():
        nonlocal pos
        value = factor()
        while tokens[pos] == "*":
            pos += 1
            value *= factor()
        return value

    def factor():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            value = expression()
            pos += 1
            return value
        return int(tok)

    return expression()


if __name__ == "__main__":
    print(evaluate("2 * (3 + 4) - 5"))
