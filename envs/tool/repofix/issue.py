"""Write a RepoFix issue from what a user sees: a reproducing snippet, the result, the expectation.

The snippet is built from the failing test (its ``setUp`` and its body up to the failing statement),
rewritten as user code: ``self.x`` becomes ``x``, passing assertions become ``assert`` statements, and
the failing assertion becomes the bare call. The text never names the test, the test file or the
mutation; the level decides whether the file to fix is named.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["issue_text"]

_COMPARE = {
    "assertEqual": ast.Eq,
    "assertNotEqual": ast.NotEq,
    "assertIs": ast.Is,
    "assertIsNot": ast.IsNot,
    "assertIn": ast.In,
    "assertNotIn": ast.NotIn,
    "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
    "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE,
}
_MAX_LINES = 30


class _AsUserCode(ast.NodeTransformer):
    """``self.x`` -> ``x``; ``self.assertEqual(a, b)`` -> ``assert a == b``;
    ``with self.assertRaises(E) as c`` -> ``with pytest.raises(E) as c`` (``c.exception`` ->
    ``c.value``). One instance rewrites all statements of a snippet (it remembers the ``as`` names)."""

    def __init__(self) -> None:
        self.raises_names: set[str] = set()
        self.uses_pytest = False

    def visit_With(self, node: ast.With) -> ast.AST:  # noqa: N802
        for item in node.items:
            call = item.context_expr
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "self"
                and call.func.attr in ("assertRaises", "assertRaisesRegex")
            ):
                call.func = ast.Attribute(ast.Name("pytest", ast.Load()), "raises", ast.Load())
                if call.func and len(call.args) > 1:  # assertRaisesRegex(E, pattern)
                    call.keywords.append(ast.keyword("match", call.args.pop(1)))
                self.uses_pytest = True
                if isinstance(item.optional_vars, ast.Name):
                    self.raises_names.add(item.optional_vars.id)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        if (
            node.attr == "exception"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.raises_names
        ):
            return ast.copy_location(ast.Attribute(node.value, "value", node.ctx), node)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:  # noqa: N802
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
        ):
            name = call.func.attr
            args = [self.visit(a) for a in call.args]
            if name in _COMPARE and len(args) >= 2:
                test = ast.Compare(args[0], [_COMPARE[name]()], [args[1]])
                return ast.copy_location(ast.Assert(test), node)
            if name in ("assertTrue", "assertFalse") and args:
                test = args[0] if name == "assertTrue" else ast.UnaryOp(ast.Not(), args[0])
                return ast.copy_location(ast.Assert(test), node)
        self.generic_visit(node)
        return node


def _assertion(stmt: ast.stmt) -> tuple[str, ast.expr, ast.expr] | None:
    """(method, first, second) when ``stmt`` is ``self.assertX(first, second, ...)``."""
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and isinstance(stmt.value.func.value, ast.Name)
        and stmt.value.func.value.id == "self"
        and stmt.value.func.attr in _COMPARE
        and len(stmt.value.args) >= 2
    ):
        return stmt.value.func.attr, stmt.value.args[0], stmt.value.args[1]
    return None


def _user(node: ast.AST, rewriter: _AsUserCode) -> str:
    return ast.unparse(ast.fix_missing_locations(rewriter.visit(copy.deepcopy(node))))


def _containing(body: list[ast.stmt], line: int) -> int | None:
    for index, stmt in enumerate(body):
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return index
    return None


def issue_text(
    files: Mapping[str, str],
    test_id: str,
    detail: Mapping[str, Any],
    *,
    package: str,
    file_hint: str | None = None,
    several: bool = False,
) -> str:
    """The issue an agent is shown for a failing test (from the offline scan's ``detail``).

    Args:
        files: the original repository (the test file is read from it, never shown whole).
        test_id: ``tests.test_x.Class.method``.
        detail: ``line``/``outer_line`` (1-based, in the test file), ``kind``, ``error`` and, for
            value comparisons, ``got`` and ``expected`` (reprs).
        package: the package name, for the opening sentence.
        file_hint: the file to fix, named in the text when given.
        several: more than one bug (the text says the cause may not be single).
    """
    module, class_name, method_name = test_id.rsplit(".", 2)
    source = files.get(module.replace(".", "/") + ".py", "")
    tree = ast.parse(source)
    klass = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None
    )
    method = setup = None
    if klass is not None:
        for node in klass.body:
            if isinstance(node, ast.FunctionDef) and node.name == method_name:
                method = node
            if isinstance(node, ast.FunctionDef) and node.name == "setUp":
                setup = node
    line = int(detail.get("outer_line") or detail.get("line") or 0)
    inner_line = int(detail.get("line") or 0)
    statements: list[str] = []
    rewriter = _AsUserCode()
    if setup is not None:
        statements += [_user(s, rewriter) for s in setup.body]
    explanation = "it does not behave as documented"
    if method is not None:
        body = method.body
        index = _containing(body, line)
        index = len(body) - 1 if index is None else index
        failing = body[index]
        statements += [_user(s, rewriter) for s in body[:index]]
        compared = (
            _assertion(failing) if failing.lineno <= inner_line <= failing.end_lineno else None
        )
        kind = detail.get("kind")
        error = str(detail.get("error", ""))
        if compared is not None and "got" in detail:
            name, first, _ = compared
            statements.append(_user(first, rewriter))
            relation = {"assertEqual": "", "assertIs": ""}.get(name, None)
            want = str(detail.get("expected"))
            if relation is None:
                explanation = f"the last expression should satisfy `{_user(failing, rewriter)}`, but it gives `{detail['got']}`"
            else:
                explanation = (
                    f"the last expression gives `{detail['got']}`, but it should give `{want}`"
                )
        elif kind == "assert" and error.endswith("not raised"):
            statements.append(_user(failing, rewriter))
            raised = error.split(":", 1)[-1].strip().replace(" not raised", "")
            explanation = f"this should raise `{raised}`, but nothing is raised"
        elif kind == "error":
            statements.append(_user(failing, rewriter))
            explanation = f"this fails with `{error}`, which it should not"
        else:
            statements.append(_user(failing, rewriter))
            got = error.split(":", 1)[-1].strip()
            explanation = f"the check in the last statement fails ({got[:200]})"
    imports = ["import pytest"] if rewriter.uses_pytest else []
    imports += [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module and not n.module.startswith("unittest")
    ]
    snippet_text = "\n".join(statements)
    helpers = [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign))
        and not (isinstance(n, ast.ClassDef) and n.name.endswith("Test"))
        and any(
            name in snippet_text
            for name in (
                [n.name]
                if not isinstance(n, ast.Assign)
                else [t.id for t in n.targets if isinstance(t, ast.Name)]
            )
        )
    ]
    if klass is not None:  # the test class's own helper methods, as plain functions
        for node in klass.body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith(("test", "setUp", "tearDown"))
                and f"{node.name}(" in snippet_text
            ):
                function = copy.deepcopy(node)
                function.args.args = function.args.args[1:]  # no self
                function.body = [ast.parse(_user(b, rewriter)).body[0] for b in function.body]
                helpers.append(ast.unparse(function))
    lines = "\n".join(imports + helpers + [snippet_text]).splitlines()
    if len(lines) > _MAX_LINES:
        lines = lines[: _MAX_LINES - 1] + ["..."] + lines[-1:]
    code = "\n".join(lines)
    text = (
        f"Bug report for the `{package}` package (the repository is in the workspace).\n\n"
        f"Running this:\n\n```python\n{code}\n```\n\n{explanation[0].upper()}{explanation[1:]}.\n"
    )
    if several:
        text += "\nThere may be more than one thing wrong: other behaviour of the package may be broken too.\n"
    if file_hint:
        text += f"\nThe problem is in `{file_hint}`.\n"
    return text.rstrip("\n")
