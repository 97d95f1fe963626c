"""Split an expression into tokens: numbers, names, operators and parentheses."""


class LexError(ValueError):
    """A character that starts no token; ``position`` is its 0-based offset."""

    def __init__(self, message, position):
        super().__init__(f"{message} at position {position}")
        self.position = position


class Token:
    __slots__ = ("kind", "text", "position")

    def __init__(self, kind, text, position):
        self.kind = kind
        self.text = text
        self.position = position

    def __repr__(self):
        return f"Token({self.kind!r}, {self.text!r}, {self.position})"

    def __eq__(self, other):
        return isinstance(other, Token) and (self.kind, self.text, self.position) == (
            other.kind,
            other.text,
            other.position,
        )


OPERATORS = ("**", "//", "+", "-", "*", "/", "%", "(", ")", ",")


def tokenize(text):
    """Tokens of ``text``; kinds: 'number', 'name', 'op', and a final 'end'."""
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < len(text) and text[i + 1].isdigit()):
            start = i
            seen_dot = False
            while i < len(text) and (text[i].isdigit() or (text[i] == "." and not seen_dot)):
                if text[i] == ".":
                    seen_dot = True
                i += 1
            if i < len(text) and text[i] in "eE":
                j = i + 1
                if j < len(text) and text[j] in "+-":
                    j += 1
                if j < len(text) and text[j].isdigit():
                    i = j
                    while i < len(text) and text[i].isdigit():
                        i += 1
            tokens.append(Token("number", text[start:i], start))
            continue
        if ch.isalpha() or ch == "_":
            start = i
            while i < len(text) and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(Token("name", text[start:i], start))
            continue
        for op in OPERATORS:
            if text.startswith(op, i):
                tokens.append(Token("op", op, i))
                i += len(op)
                break
        else:
            raise LexError(f"unexpected character {ch!r}", i)
    tokens.append(Token("end", "", len(text)))
    return tokens
