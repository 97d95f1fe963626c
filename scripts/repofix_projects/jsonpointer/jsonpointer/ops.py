"""Resolve and edit JSON documents (dicts, lists, scalars) by pointer."""

import copy

from jsonpointer.pointer import JsonPointerError, Pointer


def _as_pointer(pointer):
    return pointer if isinstance(pointer, Pointer) else Pointer.parse(pointer)


def _index(token, length, allow_end=False):
    """An array index token: decimal digits without leading zeros, or '-' (end) when allowed."""
    if token == "-" and allow_end:
        return length
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise JsonPointerError(f"bad array index {token!r}")
    index = int(token)
    limit = length + 1 if allow_end else length
    if index >= limit:
        raise JsonPointerError(f"index {index} out of range for length {length}")
    return index


def _step(node, token):
    if isinstance(node, dict):
        if token not in node:
            raise JsonPointerError(f"missing member {token!r}")
        return node[token]
    if isinstance(node, list):
        return node[_index(token, len(node))]
    raise JsonPointerError(f"cannot step into {type(node).__name__} with {token!r}")


def resolve(document, pointer, default=JsonPointerError):
    """The value at ``pointer``; ``default`` if given and it does not resolve."""
    node = document
    try:
        for token in _as_pointer(pointer).tokens:
            node = _step(node, token)
    except JsonPointerError:
        if default is JsonPointerError:
            raise
        return default
    return node


def add(document, pointer, value):
    """A copy of ``document`` with ``value`` added (JSON Patch 'add' semantics)."""
    pointer = _as_pointer(pointer)
    if not pointer.tokens:
        return copy.deepcopy(value)
    result = copy.deepcopy(document)
    container = resolve(result, pointer.parent())
    token = pointer.last()
    if isinstance(container, dict):
        container[token] = value
    elif isinstance(container, list):
        container.insert(_index(token, len(container), allow_end=True), value)
    else:
        raise JsonPointerError(f"cannot add into {type(container).__name__}")
    return result


def remove(document, pointer):
    """A copy of ``document`` without the value at ``pointer``."""
    pointer = _as_pointer(pointer)
    if not pointer.tokens:
        raise JsonPointerError("cannot remove the root")
    result = copy.deepcopy(document)
    container = resolve(result, pointer.parent())
    token = pointer.last()
    if isinstance(container, dict):
        if token not in container:
            raise JsonPointerError(f"missing member {token!r}")
        del container[token]
    elif isinstance(container, list):
        del container[_index(token, len(container))]
    else:
        raise JsonPointerError(f"cannot remove from {type(container).__name__}")
    return result


def replace(document, pointer, value):
    """A copy of ``document`` with the existing value at ``pointer`` replaced."""
    pointer = _as_pointer(pointer)
    resolve(document, pointer)
    if not pointer.tokens:
        return copy.deepcopy(value)
    return add(remove(document, pointer), pointer, value)


def walk(document, prefix=None):
    """Every (pointer string, leaf value) pair in document order (leaves: not dict/list)."""
    prefix = prefix or Pointer()
    if isinstance(document, dict):
        out = []
        for key in document:
            out.extend(walk(document[key], prefix / key))
        return out
    if isinstance(document, list):
        out = []
        for i, item in enumerate(document):
            out.extend(walk(item, prefix / i))
        return out
    return [(str(prefix), document)]
