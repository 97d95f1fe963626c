"""Precedence climbing into a tuple tree: ('num', v), ('var', n), ('neg', x), ('call', f, args),
(op, left, right)."""

from exprcalc.lexer import tokenize

BINARY = {
    "+": (1, "left"),
    "-": (1, "left"),
    "*": (2, "left"),
    "/": (2, "left"),
    "//": (2, "left"),
    "%": (2, "left"),
    "**": (4, "right"),
}
UNARY_PRECEDENCE = 3


class ParseError(ValueError):
    pass


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.i = 0

    def peek(self):
        return self.tokens[self.i]

    def take(self):
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, text):
        token = self.take()
        if token.text != text:
            raise ParseError(f"expected {text!r} at position {token.position}, got {token.text!r}")
        return token

    def expression(self, min_precedence=1):
        left = self.unary()
        while True:
            token = self.peek()
            if token.kind != "op" or token.text not in BINARY:
                return left
            precedence, assoc = BINARY[token.text]
            if precedence < min_precedence:
                return left
            self.take()
            next_min = precedence + 1 if assoc == "left" else precedence
            right = self.expression(next_min)
            left = (token.text, left, right)

    def unary(self):
        token = self.peek()
        if token.kind == "op" and token.text in "+-":
            self.take()
            operand = self.expression(UNARY_PRECEDENCE)
            return ("neg", operand) if token.text == "-" else operand
        return self.atom()

    def atom(self):
        token = self.take()
        if token.kind == "number":
            text = token.text
            value = float(text) if any(c in text for c in ".eE") else int(text)
            return ("num", value)
        if token.kind == "name":
            if self.peek().text == "(":
                self.take()
                args = []
                if self.peek().text != ")":
                    args.append(self.expression())
                    while self.peek().text == ",":
                        self.take()
                        args.append(self.expression())
                self.expect(")")
                return ("call", token.text, tuple(args))
            return ("var", token.text)
        if token.text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        raise ParseError(
            f"unexpected {token.text or 'end of input'!r} at position {token.position}"
        )


def parse(text):
    parser = _Parser(tokenize(text))
    tree = parser.expression()
    if parser.peek().kind != "end":
        token = parser.peek()
        raise ParseError(f"unexpected {token.text!r} at position {token.position}")
    return tree
