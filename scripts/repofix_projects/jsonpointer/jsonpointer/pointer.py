"""The Pointer type: a sequence of reference tokens."""


class JsonPointerError(Exception):
    """A malformed pointer, or one that does not resolve in a document."""


def escape(token):
    """Escape one reference token: '~' -> '~0', '/' -> '~1' (order matters)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token):
    """Undo escape: '~1' -> '/', then '~0' -> '~'; a lone '~' is an error."""
    i = 0
    while i < len(token):
        if token[i] == "~":
            if i + 1 >= len(token) or token[i + 1] not in "01":
                raise JsonPointerError(f"bad escape in token {token!r}")
            i += 2
        else:
            i += 1
    return token.replace("~1", "/").replace("~0", "~")


class Pointer:
    def __init__(self, tokens=()):
        self.tokens = tuple(tokens)

    @classmethod
    def parse(cls, text):
        if text == "":
            return cls()
        if not text.startswith("/"):
            raise JsonPointerError(f"a pointer starts with '/': {text!r}")
        return cls(unescape(part) for part in text.split("/")[1:])

    def __str__(self):
        return "".join("/" + escape(t) for t in self.tokens)

    def __repr__(self):
        return f"Pointer({str(self)!r})"

    def __eq__(self, other):
        return isinstance(other, Pointer) and self.tokens == other.tokens

    def __hash__(self):
        return hash(self.tokens)

    def __truediv__(self, token):
        return Pointer(self.tokens + (str(token),))

    def parent(self):
        if not self.tokens:
            raise JsonPointerError("the root has no parent")
        return Pointer(self.tokens[:-1])

    def last(self):
        return self.tokens[-1] if self.tokens else None

    def is_prefix_of(self, other):
        return self.tokens == other.tokens[: len(self.tokens)]

    def relative_to(self, other):
        """The tokens of self after the prefix ``other``."""
        if not other.is_prefix_of(self):
            raise JsonPointerError(f"{other} is not a prefix of {self}")
        return Pointer(self.tokens[len(other.tokens) :])
