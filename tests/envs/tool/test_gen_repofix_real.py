"""scripts/gen_repofix_real.py's mutant drawing: per function, mapped back onto the module."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from verigym.envs.tool.repofix.mutations import apply, revert

_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gen_repofix_real.py"
_spec = importlib.util.spec_from_file_location("gen_repofix_real", _SCRIPT)
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SOURCE = '''"""A module."""

X = 1


class Box:
    def __init__(self, items):
        self.items = list(items)
        self.total = 0

    def add(self, value):
        for item in self.items:
            if item == value:
                return False
        self.items.append(value)
        self.total += value
        return True

    @property
    def size(self):
        count = len(self.items)
        return count


def helper(a, b):
    c = a + b
    return c * 2 if a > b else c
'''


def test_function_mutants_stay_inside_their_function_and_revert():
    tree = ast.parse(SOURCE)
    functions = gen._functions(tree)
    assert [(q, body) for q, _, body in functions] == [
        ("Box.__init__", 3),
        ("Box.add", 3),
        ("Box.size", 3),
        ("helper", 0),
    ]
    operators = set()
    for qualname, node, class_body in functions:
        mutants = gen.function_mutants("m.py", SOURCE, node, class_body)
        assert mutants, qualname
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        for mutant in mutants:
            assert first <= mutant.first and mutant.last <= node.end_lineno, (qualname, mutant)
            if gen.parses(SOURCE, mutant):
                mutated = apply(SOURCE, mutant)
                assert mutated != SOURCE and revert(mutated, mutant) == SOURCE
                operators.add(mutant.operator)
        dropped = [m for m in mutants if m.operator == "dropped_method"]
        # a decorated method (a property) is never dropped: its callers would see another kind
        assert len(dropped) == (1 if class_body and not node.decorator_list else 0), qualname
    assert {
        "removed_assignment",
        "removed_loop",
        "dropped_method",
        "swapped_statements",
    } <= operators
