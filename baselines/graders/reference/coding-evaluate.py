import re


def evaluate(expr):
    tokens = re.findall(r"\d+|[-+*()]|\S", expr)
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        tok = peek()
        if tok is None:
            raise ValueError("unexpected end of %r" % expr)
        pos += 1
        return tok

    def atom():
        tok = take()
        if tok == "(":
            v = sum_()
            if take() != ")":
                raise ValueError("missing ) in %r" % expr)
            return v
        if tok.isdigit():
            return int(tok)
        raise ValueError("unexpected %r in %r" % (tok, expr))

    def product():
        v = atom()
        while peek() == "*":
            take()
            v *= atom()
        return v

    def sum_():
        v = product()
        while peek() in ("+", "-"):
            if take() == "+":
                v += product()
            else:
                v -= product()
        return v

    v = sum_()
    if peek() is not None:
        raise ValueError("unexpected %r in %r" % (peek(), expr))
    return v
