"""Bug synthesis the SWE-smith way: AST mutation operators that edit a few source lines.

Each operator looks at one node of a module's AST and proposes a mutated node; the edit is applied
to the source text (only the lines of that node change, the rest of the file keeps its formatting)
and kept only when the edited text parses back to exactly the mutated tree. A mutant is a
:class:`Mutant`: the file, a 1-based line range and its old and new text, so applying or reverting
it needs no AST work. Which mutants a test suite detects is decided offline
(``scripts/gen_repofix_mutants.py``).

Operators (:data:`OPERATORS`): comparison swap, arithmetic swap, augmented-assignment swap,
off-by-one in ``range``/slices, wrong variable, dropped condition, dropped guard, dropped else
branch, swapped if/else, swapped arguments, wrong default, ``break``/``continue`` swap, wrong
exception, mutated constant, boolean negation, ``and``/``or`` swap, removed ``not``, wrong index,
``min``/``max`` swap, dropped unary minus.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

__all__ = ["OPERATORS", "Mutant", "apply", "mutants_of", "revert"]


@dataclass(frozen=True)
class Mutant:
    """An edit of ``file``: lines ``first..last`` (1-based, inclusive) ``old`` -> ``new``.

    ``old`` and ``new`` hold whole lines with their line ends; ``operator`` names the operator
    (kept out of anything the agent sees).
    """

    file: str
    operator: str
    first: int
    last: int
    old: str
    new: str

    def to_json(self) -> dict:
        return asdict(self)


def apply(text: str, mutant: Mutant) -> str:
    """``text`` with the mutant's lines replaced.

    Raises:
        ValueError: the lines are not what the mutant expects.
    """
    lines = text.splitlines(keepends=True)
    if "".join(lines[mutant.first - 1 : mutant.last]) != mutant.old:
        raise ValueError(f"{mutant.file}: lines {mutant.first}-{mutant.last} do not match")
    return "".join(lines[: mutant.first - 1]) + mutant.new + "".join(lines[mutant.last :])


def revert(text: str, mutant: Mutant) -> str:
    """The inverse of :func:`apply` on a mutated text."""
    lines = text.splitlines(keepends=True)
    count = len(mutant.new.splitlines(keepends=True))
    if "".join(lines[mutant.first - 1 : mutant.first - 1 + count]) != mutant.new:
        raise ValueError(f"{mutant.file}: the mutated lines are not there")
    return (
        "".join(lines[: mutant.first - 1]) + mutant.old + "".join(lines[mutant.first - 1 + count :])
    )


# -- operators: node -> mutated copies --------------------------------------------------------------

Proposal = Iterator[ast.AST | None]  # a replacement node; None deletes a statement

_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mod,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
_EXCEPTIONS = {
    "ValueError": "TypeError",
    "TypeError": "ValueError",
    "KeyError": "IndexError",
    "IndexError": "KeyError",
    "ZeroDivisionError": "ValueError",
    "NameError": "KeyError",
}
_SKIP_CALLS = {"print", "isinstance", "getattr", "setattr", "super", "range"}


def _compare_swap(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        new = copy.deepcopy(node)
        new.ops = [_COMPARE[type(node.ops[0])]()]
        yield new


def _arith_swap(node: ast.AST) -> Proposal:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return  # string formatting / concatenation
        new = copy.deepcopy(node)
        new.op = _ARITH[type(node.op)]()
        yield new


def _augassign_swap(node: ast.AST) -> Proposal:
    if isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        new = copy.deepcopy(node)
        new.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        yield new


def _plus_minus_one(expr: ast.expr, delta: int) -> ast.expr:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return ast.Constant(expr.value + delta)
    return ast.BinOp(copy.deepcopy(expr), ast.Add() if delta > 0 else ast.Sub(), ast.Constant(1))


def _off_by_one(node: ast.AST) -> Proposal:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and node.args
    ):
        for delta in (1, -1):
            new = copy.deepcopy(node)
            index = 1 if len(node.args) >= 2 else 0
            new.args[index] = _plus_minus_one(node.args[index], delta)
            yield new
    if isinstance(node, ast.Slice):
        for field in ("lower", "upper"):
            bound = getattr(node, field)
            if bound is not None:
                new = copy.deepcopy(node)
                setattr(new, field, _plus_minus_one(bound, 1))
                yield new


def _wrong_variable(node: ast.AST, scope_names: list[str]) -> Proposal:
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in scope_names:
        others = [n for n in scope_names if n != node.id]
        if others:
            # the nearest other name in the sorted list: deterministic, usually same kind of value
            position = scope_names.index(node.id)
            new = copy.deepcopy(node)
            new.id = others[position % len(others)]
            yield new


def _dropped_condition(node: ast.AST) -> Proposal:
    if isinstance(node, ast.BoolOp):
        for index in range(len(node.values)):
            values = [copy.deepcopy(v) for i, v in enumerate(node.values) if i != index]
            yield values[0] if len(values) == 1 else ast.BoolOp(copy.deepcopy(node.op), values)


def _dropped_guard(node: ast.AST) -> Proposal:
    if (
        isinstance(node, ast.If)
        and not node.orelse
        and len(node.body) == 1
        and isinstance(node.body[0], (ast.Raise, ast.Return, ast.Continue, ast.Break))
    ):
        yield None


def _dropped_else(node: ast.AST) -> Proposal:
    if (
        isinstance(node, ast.If)
        and node.orelse
        and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If))
    ):
        new = copy.deepcopy(node)
        new.orelse = []
        yield new


def _swapped_branches(node: ast.AST) -> Proposal:
    if isinstance(node, ast.IfExp):
        yield ast.IfExp(
            copy.deepcopy(node.test), copy.deepcopy(node.orelse), copy.deepcopy(node.body)
        )


def _swapped_arguments(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Call) and len(node.args) >= 2:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in _SKIP_CALLS or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            return
        if ast.dump(node.args[0]) == ast.dump(node.args[1]):
            return
        new = copy.deepcopy(node)
        new.args[0], new.args[1] = new.args[1], new.args[0]
        yield new


def _wrong_default(node: ast.AST) -> Proposal:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for index, default in enumerate(node.args.defaults):
            if isinstance(default, ast.Constant):
                value = default.value
                if type(value) is bool:
                    replacement = not value
                elif type(value) is int:
                    replacement = value + 1
                elif type(value) is str and len(value) == 1:
                    replacement = {",": ";", '"': "'", "-": "_"}.get(value)
                else:
                    continue
                if replacement is None:
                    continue
                new = copy.deepcopy(node)
                new.args.defaults[index] = ast.Constant(replacement)
                yield new


def _loop_control(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Break):
        yield ast.Continue()
    elif isinstance(node, ast.Continue):
        yield ast.Break()


def _wrong_exception(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Raise) and node.exc is not None:
        call = node.exc
        name = call.func if isinstance(call, ast.Call) else call
        if isinstance(name, ast.Name):
            replacement = _EXCEPTIONS.get(name.id, "RuntimeError")
            new = copy.deepcopy(node)
            target = new.exc.func if isinstance(new.exc, ast.Call) else new.exc
            target.id = replacement
            yield new


def _mutated_constant(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if node.value in (0, 1, -1):
            return  # those are covered by the index/off-by-one operators
        yield ast.Constant(node.value + 1)


def _negation(node: ast.AST) -> Proposal:
    if isinstance(node, (ast.If, ast.While)) and not isinstance(node.test, ast.UnaryOp):
        new = copy.deepcopy(node)
        new.test = ast.UnaryOp(ast.Not(), copy.deepcopy(node.test))
        yield new
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield ast.Constant(not node.value)


def _and_or(node: ast.AST) -> Proposal:
    if isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield new


def _removed_not(node: ast.AST) -> Proposal:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield copy.deepcopy(node.operand)


def _removed_minus(node: ast.AST) -> Proposal:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if not isinstance(node.operand, ast.Constant):
            yield copy.deepcopy(node.operand)


def _wrong_index(node: ast.AST) -> Proposal:
    if isinstance(node, ast.Subscript):
        index = node.slice
        value = None
        if isinstance(index, ast.Constant) and type(index.value) is int:
            value = index.value
        elif (
            isinstance(index, ast.UnaryOp)
            and isinstance(index.op, ast.USub)
            and isinstance(index.operand, ast.Constant)
            and type(index.operand.value) is int
        ):
            value = -index.operand.value
        if value is not None:
            new = copy.deepcopy(node)
            replacement = {0: 1, 1: 0, -1: 0}.get(value, value - 1)
            new.slice = ast.Constant(replacement)
            yield new


def _min_max(node: ast.AST) -> Proposal:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("min", "max")
    ):
        new = copy.deepcopy(node)
        new.func.id = "max" if node.func.id == "min" else "min"
        yield new


OPERATORS: dict[str, Callable[..., Proposal]] = {
    "compare_swap": _compare_swap,
    "arith_swap": _arith_swap,
    "augassign_swap": _augassign_swap,
    "off_by_one": _off_by_one,
    "wrong_variable": _wrong_variable,
    "dropped_condition": _dropped_condition,
    "dropped_guard": _dropped_guard,
    "dropped_else": _dropped_else,
    "swapped_branches": _swapped_branches,
    "swapped_arguments": _swapped_arguments,
    "wrong_default": _wrong_default,
    "loop_control": _loop_control,
    "wrong_exception": _wrong_exception,
    "mutated_constant": _mutated_constant,
    "negation": _negation,
    "and_or_swap": _and_or,
    "removed_not": _removed_not,
    "removed_minus": _removed_minus,
    "wrong_index": _wrong_index,
    "min_max_swap": _min_max,
}
"""Operator name -> function(node[, scope names]) yielding mutated copies (``None``: delete)."""


# -- applying a proposal to the text ------------------------------------------------------------------


def _line_offsets(lines: list[str]) -> list[int]:
    offsets, total = [], 0
    for line in lines:
        offsets.append(total)
        total += len(line.encode("utf-8"))
    return offsets


def _edit(
    source: str, node: ast.AST, replacement: ast.AST | None, siblings: list | None
) -> str | None:
    """The source with ``node``'s text replaced by ``replacement``'s (``None``: statement deleted)."""
    lines = source.splitlines(keepends=True)
    data = source.encode("utf-8")
    offsets = _line_offsets(lines)
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    if replacement is None:
        line_start = offsets[node.lineno - 1]
        if data[line_start:start].strip():
            return None  # the statement does not start its line
        if siblings is not None and len(siblings) == 1:
            text = b"pass"
        else:
            line_end = offsets[node.end_lineno] if node.end_lineno < len(lines) else len(data)
            if data[end:line_end].strip():
                return None
            return (data[:line_start] + data[line_end:]).decode("utf-8")
    else:
        unparsed = ast.unparse(replacement)
        indent = " " * node.col_offset
        text = unparsed.replace("\n", "\n" + indent).encode("utf-8")
    return (data[:start] + text + data[end:]).decode("utf-8")


def _scope_names(function: ast.AST) -> list[str]:
    """Local names of a function: its parameters and assigned names, sorted."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.arg) and node.arg not in ("self", "cls"):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return sorted(names)


def mutants_of(path: str, source: str) -> list[Mutant]:
    """Every valid single-edit mutant of one module, in a fixed order (operator, then position).

    A proposal is kept when the edited text parses to exactly the mutated tree and differs from
    the original; the edit is cut down to the changed lines.
    """
    tree = ast.parse(source)
    parents: dict[int, tuple[ast.AST, str]] = {}
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, ast.AST):
                        parents[id(child)] = (parent, field)
            elif isinstance(value, ast.AST):
                parents[id(value)] = (parent, field)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    scope_of: dict[int, list[str]] = {}
    for function in functions:
        names = _scope_names(function)
        for node in ast.walk(function):
            scope_of[id(node)] = names
    original_dump = ast.dump(tree)
    old_lines = source.splitlines(keepends=True)
    seen: set[str] = set()
    out: list[Mutant] = []
    nodes = list(ast.walk(tree))
    for name, operator in OPERATORS.items():
        for index, node in enumerate(nodes):
            if not hasattr(node, "lineno") or id(node) not in scope_of:
                continue  # only code inside functions and methods
            if isinstance(node, ast.Constant) and isinstance(
                parents.get(id(node), (None,))[0], ast.Expr
            ):
                continue  # docstrings
            args = (node, scope_of[id(node)]) if name == "wrong_variable" else (node,)
            for replacement in operator(*args):
                parent, field = parents[id(node)]
                siblings = (
                    getattr(parent, field) if isinstance(getattr(parent, field), list) else None
                )
                text = _edit(source, node, replacement, siblings)
                if text is None or text == source or text in seen:
                    continue
                expected = copy.deepcopy(tree)
                target = list(ast.walk(expected))[index]
                e_parent, e_field = _find_parent(expected, target)
                container = getattr(e_parent, e_field)
                if isinstance(container, list):
                    position = next(i for i, c in enumerate(container) if c is target)
                    if replacement is None:
                        if len(container) == 1:
                            container[position] = ast.Pass()
                        else:
                            del container[position]
                    else:
                        container[position] = replacement
                else:
                    setattr(e_parent, e_field, replacement)
                try:
                    if ast.dump(ast.parse(text)) != ast.dump(ast.parse(ast.unparse(expected))):
                        continue
                except SyntaxError:
                    continue
                if ast.dump(ast.parse(text)) == original_dump:
                    continue
                seen.add(text)
                out.append(_as_mutant(path, name, old_lines, text.splitlines(keepends=True)))
    return out


def _find_parent(tree: ast.AST, target: ast.AST) -> tuple[ast.AST, str]:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target or (isinstance(value, list) and any(v is target for v in value)):
                return parent, field
    raise LookupError("no parent")


def _as_mutant(path: str, operator: str, old: list[str], new: list[str]) -> Mutant:
    first = 0
    while first < min(len(old), len(new)) and old[first] == new[first]:
        first += 1
    tail = 0
    while (
        tail < min(len(old), len(new)) - first
        and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]
    ):
        tail += 1
    old_part = "".join(old[first : len(old) - tail])
    new_part = "".join(new[first : len(new) - tail])
    return Mutant(path, operator, first + 1, len(old) - tail, old_part, new_part)
