"""JSON Pointer (RFC 6901): parse, resolve, set, remove, and build pointers."""

from jsonpointer.ops import add, remove, replace, resolve, walk
from jsonpointer.pointer import JsonPointerError, Pointer, escape, unescape

__all__ = [
    "JsonPointerError",
    "Pointer",
    "add",
    "escape",
    "remove",
    "replace",
    "resolve",
    "unescape",
    "walk",
]
