"""Parse CSV text into rows of strings."""


class CSVError(ValueError):
    def __init__(self, message, line):
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_line(line, delimiter=",", quote='"', line_number=1):
    """Fields of one record that contains no newline inside quotes."""
    rows = read(line, delimiter=delimiter, quote=quote)
    if len(rows) != 1:
        raise CSVError("expected exactly one record", line_number)
    return rows[0]


def read(text, delimiter=",", quote='"', skip_blank=True):
    """Records of ``text``: quoted fields may hold delimiters, newlines and doubled quotes."""
    rows = []
    row = []
    field = []
    in_quotes = False
    was_quoted = False
    line = 1
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if in_quotes:
            if ch == quote:
                if i + 1 < n and text[i + 1] == quote:
                    field.append(quote)
                    i += 2
                    continue
                in_quotes = False
                i += 1
                continue
            if ch == "\n":
                line += 1
            field.append(ch)
            i += 1
            continue
        if ch == quote:
            if field:
                raise CSVError("quote inside an unquoted field", line)
            in_quotes = True
            was_quoted = True
        elif ch == delimiter:
            row.append("".join(field))
            field = []
            was_quoted = False
        elif ch == "\r" and i + 1 < n and text[i + 1] == "\n":
            pass
        elif ch == "\n":
            row.append("".join(field))
            if not (skip_blank and row == [""] and not was_quoted):
                rows.append(row)
            row, field, was_quoted = [], [], False
            line += 1
        else:
            if was_quoted:
                raise CSVError("text after a closing quote", line)
            field.append(ch)
        i += 1
    if in_quotes:
        raise CSVError("unterminated quoted field", line)
    if field or row or was_quoted:
        row.append("".join(field))
        rows.append(row)
    return rows
