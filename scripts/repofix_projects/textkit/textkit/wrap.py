"""Greedy word wrapping, full justification, truncation and slugs."""

import re
import unicodedata


def wrap(text, width):
    """Lines of at most ``width`` characters, breaking at spaces; a longer word is split."""
    if width < 1:
        raise ValueError("width must be positive")
    lines = []
    current = ""
    for word in text.split():
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def justify(text, width):
    """Wrapped lines padded to ``width`` by widening gaps (leftmost gaps first); the last line
    and single-word lines stay left-aligned."""
    lines = wrap(text, width)
    out = []
    for index, line in enumerate(lines):
        words = line.split(" ")
        if index == len(lines) - 1 or len(words) == 1:
            out.append(line)
            continue
        spaces = width - sum(len(w) for w in words)
        gaps = len(words) - 1
        base, extra = divmod(spaces, gaps)
        pieces = []
        for i, word in enumerate(words[:-1]):
            pieces.append(word + " " * (base + (1 if i < extra else 0)))
        pieces.append(words[-1])
        out.append("".join(pieces))
    return out


def center(text, width, fill=" "):
    """``text`` centred in ``width``; an odd leftover goes to the right."""
    if len(text) >= width:
        return text
    total = width - len(text)
    left = total // 2
    return fill * left + text + fill * (total - left)


def truncate(text, limit, ellipsis="..."):
    """At most ``limit`` characters, cut at a word boundary when possible, ending in ``ellipsis``."""
    if len(text) <= limit:
        return text
    room = limit - len(ellipsis)
    if room <= 0:
        return ellipsis[:limit]
    cut = text[:room]
    space = cut.rfind(" ")
    if space > 0:
        cut = cut[:space]
    return cut.rstrip() + ellipsis


def slugify(text, separator="-"):
    """ASCII lowercase words joined by ``separator``: 'Héllo, World!' -> 'hello-world'."""
    normalized = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", normalized.lower())
    return separator.join(words)
