"""Format rows as CSV, quoting only where needed."""


def _needs_quotes(value, delimiter, quote):
    return (
        value == ""
        or any(c in value for c in (delimiter, quote, "\n", "\r"))
        or value != value.strip()
    )


def format_row(values, delimiter=",", quote='"'):
    out = []
    for value in values:
        text = "" if value is None else str(value)
        if value is not None and _needs_quotes(text, delimiter, quote):
            text = quote + text.replace(quote, quote * 2) + quote
        out.append(text)
    return delimiter.join(out)


def write(rows, delimiter=",", quote='"'):
    """CSV text with '\\n' line ends and a final newline (empty for no rows)."""
    return "".join(format_row(row, delimiter, quote) + "\n" for row in rows)
