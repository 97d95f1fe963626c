"""A table: a header and typed rows."""

from csvlite.reader import CSVError, read
from csvlite.writer import write


def convert(value):
    """'' -> None, integers -> int, decimals -> float, 'true'/'false' -> bool, else the text."""
    if value == "":
        return None
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


class Table:
    def __init__(self, header, rows):
        self.header = list(header)
        if len(set(self.header)) != len(self.header):
            raise CSVError("duplicate column names", 1)
        self.rows = [list(r) for r in rows]

    @classmethod
    def from_csv(cls, text, typed=True, **options):
        records = read(text, **options)
        if not records:
            raise CSVError("no header", 1)
        header, body = records[0], records[1:]
        for number, record in enumerate(body, start=2):
            if len(record) != len(header):
                raise CSVError(f"expected {len(header)} fields, got {len(record)}", number)
        if typed:
            body = [[convert(v) for v in record] for record in body]
        return cls(header, body)

    def to_csv(self):
        return write([self.header] + self.rows)

    def column(self, name):
        index = self.header.index(name)
        return [row[index] for row in self.rows]

    def where(self, name, predicate):
        index = self.header.index(name)
        return Table(self.header, [r for r in self.rows if predicate(r[index])])

    def select(self, *names):
        indexes = [self.header.index(n) for n in names]
        return Table(names, [[r[i] for i in indexes] for r in self.rows])

    def sort_by(self, name, reverse=False):
        """Rows sorted by a column; None values last whatever the direction."""
        index = self.header.index(name)
        present = [r for r in self.rows if r[index] is not None]
        missing = [r for r in self.rows if r[index] is None]
        return Table(
            self.header, sorted(present, key=lambda r: r[index], reverse=reverse) + missing
        )

    def group_sum(self, key, value):
        """{key value: sum of value column}, None values skipped, keys in first-seen order."""
        k, v = self.header.index(key), self.header.index(value)
        out = {}
        for row in self.rows:
            if row[v] is None:
                continue
            out[row[k]] = out.get(row[k], 0) + row[v]
        return out
