"""Evaluate parsed expressions with variables and a few functions."""

import math

from exprcalc.parser import parse

FUNCTIONS = {
    "abs": (abs, 1, 1),
    "min": (min, 1, None),
    "max": (max, 1, None),
    "sqrt": (math.sqrt, 1, 1),
    "round": (round, 1, 2),
}


def _check_arity(name, count):
    function, low, high = FUNCTIONS[name]
    if count < low or (high is not None and count > high):
        raise TypeError(f"{name}() takes {low}..{high or 'any'} arguments, got {count}")
    return function


def _eval(node, env):
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "var":
        if node[1] not in env:
            raise NameError(f"unknown variable {node[1]!r}")
        return env[node[1]]
    if kind == "neg":
        return -_eval(node[1], env)
    if kind == "call":
        name = node[1]
        if name not in FUNCTIONS:
            raise NameError(f"unknown function {name!r}")
        function = _check_arity(name, len(node[2]))
        return function(*[_eval(arg, env) for arg in node[2]])
    left = _eval(node[1], env)
    right = _eval(node[2], env)
    if kind == "+":
        return left + right
    if kind == "-":
        return left - right
    if kind == "*":
        return left * right
    if kind == "/":
        if right == 0:
            raise ZeroDivisionError("division by zero")
        return left / right
    if kind == "//":
        if right == 0:
            raise ZeroDivisionError("division by zero")
        return left // right
    if kind == "%":
        if right == 0:
            raise ZeroDivisionError("modulo by zero")
        return left % right
    if kind == "**":
        return left**right
    raise ValueError(f"unknown node {kind!r}")


def evaluate(text, env=None):
    """The value of the expression ``text`` with variables from ``env``."""
    return _eval(parse(text), dict(env or {}))


def variables(text):
    """The variable names used in ``text``, sorted, without duplicates."""
    found = set()

    def visit(node):
        if node[0] == "var":
            found.add(node[1])
        elif node[0] == "neg":
            visit(node[1])
        elif node[0] == "call":
            for arg in node[2]:
                visit(arg)
        elif node[0] != "num":
            visit(node[1])
            visit(node[2])

    visit(parse(text))
    return sorted(found)
