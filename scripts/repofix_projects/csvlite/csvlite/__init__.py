"""A small CSV reader/writer (RFC 4180 quoting), typed columns and simple queries."""

from csvlite.reader import CSVError, parse_line, read
from csvlite.table import Table
from csvlite.writer import format_row, write

__all__ = ["CSVError", "Table", "format_row", "parse_line", "read", "write"]
