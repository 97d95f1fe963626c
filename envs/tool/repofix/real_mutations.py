"""SWE-smith's removal operators that :mod:`~verigym.envs.tool.repofix.mutations` lacks.

* ``removed_assignment``: an assignment (or augmented assignment) inside a function is deleted;
* ``removed_loop``: a ``for``/``while`` loop inside a function is deleted;
* ``dropped_method``: an undecorated method of a class is deleted (callers then reach a base
  class's method or get ``AttributeError``);
* ``swapped_statements``: two adjacent simple statements of a function body (assignments and
  expression statements, on consecutive lines) trade places (SWE-smith's "shuffle lines").

Inverting an if (SWE-smith's "invert if/else": the branches swapped, the test kept) and removing a
condition are :mod:`~verigym.envs.tool.repofix.mutations`' ``swapped_branches`` and
``dropped_guard``/``dropped_condition``. Each mutant is a
:class:`~verigym.envs.tool.repofix.mutations.Mutant` (a line-range edit), kept only when the edited
module still parses and its tree differs from the original.
"""

from __future__ import annotations

import ast

from verigym.envs.tool.repofix.mutations import Mutant, _as_mutant

__all__ = ["EXTRA_OPERATORS", "extra_mutants"]

EXTRA_OPERATORS = ("removed_assignment", "removed_loop", "dropped_method", "swapped_statements")
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def _delete(lines: list[str], first: int, last: int, body_len: int) -> list[str] | None:
    """``lines`` without lines ``first..last`` (1-based), or with a ``pass`` when the body empties."""
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    if body_len == 1:
        return lines[: first - 1] + [indent + "pass\n"] + lines[last:]
    return lines[: first - 1] + lines[last:]


def _swap_next(lines: list[str], stmt: ast.stmt) -> list[str] | None:
    """``lines`` with ``stmt`` and the statement on the lines right after it traded (the second
    ends where the next statement's indentation no longer continues it: its own end line)."""
    tree_next = getattr(stmt, "_vg_next", None)
    if tree_next is None or stmt.end_lineno is None or tree_next.end_lineno is None:
        return None
    first = lines[stmt.lineno - 1 : stmt.end_lineno]
    second = lines[tree_next.lineno - 1 : tree_next.end_lineno]
    return lines[: stmt.lineno - 1] + second + first + lines[tree_next.end_lineno :]


def extra_mutants(path: str, source: str) -> list[Mutant]:
    """The removal mutants of one module, in a fixed order (operator, then position)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    original = ast.dump(tree)
    proposals: list[tuple[str, ast.stmt, int]] = []
    inside = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
    }
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(parent, field, None)
            if not isinstance(body, list):
                continue
            in_function = id(parent) in inside
            for index, stmt in enumerate(body):
                if not isinstance(stmt, ast.stmt):
                    continue
                if in_function and isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    proposals.append(("removed_assignment", stmt, len(body)))
                elif in_function and isinstance(stmt, (ast.For, ast.While)):
                    proposals.append(("removed_loop", stmt, len(body)))
                elif (
                    isinstance(parent, ast.ClassDef)
                    and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not stmt.decorator_list
                ):
                    proposals.append(("dropped_method", stmt, len(body)))
                following = body[index + 1] if index + 1 < len(body) else None
                if (
                    in_function
                    and isinstance(stmt, _SIMPLE)
                    and isinstance(following, _SIMPLE)
                    and stmt.end_lineno is not None
                    and following.lineno == stmt.end_lineno + 1
                    and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
                ):
                    stmt._vg_next = following  # type: ignore[attr-defined]
                    proposals.append(("swapped_statements", stmt, len(body)))
    out: list[Mutant] = []
    seen: set[str] = set()
    for name in EXTRA_OPERATORS:
        for operator, stmt, body_len in proposals:
            if operator != name or stmt.end_lineno is None:
                continue
            new = (
                _swap_next(lines, stmt)
                if name == "swapped_statements"
                else _delete(lines, stmt.lineno, stmt.end_lineno, body_len)
            )
            if new is None:
                continue
            text = "".join(new)
            try:
                if text in seen or ast.dump(ast.parse(text)) == original:
                    continue
            except SyntaxError:
                continue
            seen.add(text)
            out.append(_as_mutant(path, name, lines, new))
    return out
