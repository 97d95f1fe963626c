"""Identifier and title case conversion."""

SMALL_WORDS = {
    "a",
    "an",
    "and",
    "as",
    "at",
    "but",
    "by",
    "for",
    "in",
    "of",
    "on",
    "or",
    "the",
    "to",
}


def camel_to_snake(name):
    """'parseHTTPResponse2' -> 'parse_http_response2'."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper():
            prev_lower = i > 0 and (name[i - 1].islower() or name[i - 1].isdigit())
            next_lower = i + 1 < len(name) and name[i + 1].islower()
            prev_upper = i > 0 and name[i - 1].isupper()
            if prev_lower or (prev_upper and next_lower):
                out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def snake_to_camel(name, upper_first=False):
    """'user_id_list' -> 'userIdList' (or 'UserIdList'); leading underscores are kept."""
    stripped = name.lstrip("_")
    prefix = name[: len(name) - len(stripped)]
    parts = [p for p in stripped.split("_") if p]
    if not parts:
        return name
    head = parts[0].capitalize() if upper_first else parts[0].lower()
    return prefix + head + "".join(p.capitalize() for p in parts[1:])


def title_case(text):
    """Capitalize words, except small words that are neither first nor last."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        lower = word.lower()
        if 0 < i < len(words) - 1 and lower in SMALL_WORDS:
            out.append(lower)
        else:
            out.append(lower[:1].upper() + lower[1:])
    return " ".join(out)
