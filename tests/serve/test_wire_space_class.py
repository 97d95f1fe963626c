"""Red-team round 5: a space description's ``"class"`` comes from the other side of the wire (a
server, for ``verigym.remote``): it may name verigym's and Gymnasium's public space classes and
nothing else. Before, ``"verigym.__main__:X"`` made the receiver import the CLI module, which ran
``verigym`` with the receiver's own ``sys.argv`` and raised ``SystemExit``."""

from __future__ import annotations

import importlib
import sys

import pytest

from verigym.core import UnicodeText
from verigym.serve import wire
from verigym.serve.wire import space_from_json

TEXT = {"type": "Text", "min_length": 0, "max_length": 5, "charset": "ab"}


def test_a_private_module_is_never_imported(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["client.py"])
    monkeypatch.delitem(sys.modules, "verigym.__main__", raising=False)
    space = space_from_json({**TEXT, "class": "verigym.__main__:Anything"})
    assert type(space).__name__ == "Text" and "verigym.__main__" not in sys.modules
    assert type(space_from_json({**TEXT, "class": "verigym.core:UnicodeText"})) is UnicodeText


@pytest.mark.parametrize("raised", [RuntimeError("boom"), OSError("no display")])
def test_a_module_that_fails_to_import_names_no_class(monkeypatch, raised):
    real = importlib.import_module

    def failing(name, *args):
        if name == "verigym.broken_spaces":
            raise raised
        return real(name, *args)

    monkeypatch.setattr(wire.importlib, "import_module", failing)
    space = space_from_json({**TEXT, "class": "verigym.broken_spaces:Space"})
    assert type(space).__name__ == "Text"
