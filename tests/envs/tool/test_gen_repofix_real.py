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


def test_pair_candidates_join_only_bugs_of_one_split_in_other_functions_sharing_a_test():
    import random

    def bug(i, function, split, f2p, first, tests=("t.py",)):
        mutant = {"file": "m.py", "operator": "x", "first": first, "last": first}
        mutant |= {"old": "a\n", "new": "b\n"}
        row = {"id": f"b{i}", "function": function, "split": split, "f2p": f2p}
        return row | {"mutant": mutant, "tests": list(tests)}

    bugs = [
        bug(0, "f", "train", ["t.py::a"], 10),
        bug(1, "g", "train", ["t.py::a", "t.py::b"], 20, ("t.py", "u.py")),
        bug(2, "f", "train", ["t.py::a"], 30),  # the same function as b0
        bug(3, "h", "eval", ["t.py::a"], 40),  # another split
        bug(4, "k", "train", ["t.py::c"], 50),  # no FAIL_TO_PASS test in common
        bug(5, "m", "train", ["t.py::a"], 21),  # its line touches b1's
    ]
    pairs = gen.pair_candidates(bugs, random.Random(0))
    assert sorted(tuple(sorted((a["id"], b["id"]))) for a, b in pairs) == [
        ("b0", "b1"),
        ("b0", "b5"),
        ("b1", "b2"),
        ("b2", "b5"),
    ]
    # the fewest test files first: a pair with b1 runs u.py as well
    assert {pairs[0][0]["id"], pairs[0][1]["id"]} & {"b5"}
