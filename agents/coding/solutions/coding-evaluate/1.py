import re


def evaluate(expr):
    tokens = re.findall(r"\d+|[-+*()]", expr)

    def expression(i):
        # expression := expression ('+' | '-') term | term
        left, i = expression(i)
        if i < len(tokens) and tokens[i] in "+-":
            op = tokens[i]
            right, i = term(i + 1)
            return (left + right if op == "+" else left - right), i
        return left, i

    def term(i):
        left, i = factor(i)
        while i < len(tokens) and tokens[i] == "*":
            right, i = factor(i + 1)
            left *= right
        return left, i

    def factor(i):
        if tokens[i] == "(":
            value, i = expression(i + 1)
            return value, i + 1
        return int(tokens[i]), i + 1

    return expression(0)[0]


if __name__ == "__main__":
    print(evaluate("2 * (3 + 4) - 5"))
