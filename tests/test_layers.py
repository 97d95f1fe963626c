"""Imports go down the layers only (docs/design.md section 1).

The core (``verigym/`` less the top floor) < ``envs/`` and ``wrappers/`` < ``agents/`` <
``leaderboards/`` < the top floor (``verigym/cli.py``, ``verigym/commands/``, ``verigym/doctor.py``).
Every ``import`` statement of the shipped code is read with :mod:`ast`, function-local ones and
those under ``TYPE_CHECKING`` included, so a cycle hidden in a function body counts too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {
    "verigym": "verigym",
    "envs": "verigym.envs",
    "wrappers": "verigym.wrappers",
    "agents": "verigym.agents",
    "leaderboards": "verigym.leaderboards",
}
TOP_FLOOR = ("verigym.cli", "verigym.commands", "verigym.doctor", "verigym.__main__")
LAYERS = (
    ("verigym.leaderboards", 4),
    ("verigym.agents", 3),
    ("verigym.envs", 2),
    ("verigym.wrappers", 2),
)
KNOWN = {
    # the model server serves an agents-layer TransformersPolicy (docs/design.md section 1, Differs)
    ("verigym.serve.model", "verigym.agents.llm"),
    # verigym check runs the text and tensor views through their wrappers
    ("verigym.checker", "verigym.wrappers"),
    # the LLM trainers skip the evaluation tasks of the shipped suites
    ("verigym.agents.llm", "verigym.leaderboards.heldout"),
}
"""(importer prefix, imported prefix): the upward imports design.md lists; nothing else."""


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer(module: str) -> int:
    """0 outside verigym, 1 the core, ... 5 the top floor."""
    if not _within(module, "verigym"):
        return 0
    if any(_within(module, top) for top in TOP_FLOOR):
        return 5
    return next((rank for prefix, rank in LAYERS if _within(module, prefix)), 1)


def module_name(path: Path) -> str:
    """``verigym.envs.grid.base`` for ``envs/grid/base.py`` (the package-dir mapping)."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = [FOLDERS[relative.parts[0]], *relative.parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_IMPORT = re.compile(r"\bfrom\s+(\.*[\w.]*)\s+import\s+(\([^)]*\)|[^\n;]*)|\bimport\s+([\w., \t]+)")
"""A superset of the import statements (prose and strings too): a file whose matches all stay in
its layer is not parsed (parsing every file costs seconds on a loaded machine)."""


def _absolute(package: str, level: int, name: str) -> str:
    if not level:
        return name
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([name] if name else []))


def _names(source: str, names: str) -> list[str]:
    """``source`` and ``source.NAME`` for each imported NAME (a name may be a submodule)."""
    found = [source]
    for alias in names.strip("()").replace("\n", ",").split(","):
        word = alias.split("#")[0].split(" as ")[0].strip()
        if word.isidentifier():
            found.append(f"{source}.{word}" if source else word)
    return found


def imported(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path`` that leaves its layer."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    text = path.read_text()
    rough = []
    for match in _IMPORT.finditer(text):
        if match.group(3) is not None:
            rough += [name.split(" as ")[0].strip() for name in match.group(3).split(",")]
        else:
            level = len(match.group(1)) - len(match.group(1).lstrip("."))
            source = _absolute(package, level, match.group(1).lstrip("."))
            rough += _names(source, match.group(2))
    if all(layer(name) <= layer(module) for name in rough):
        return []
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(package, node.level, node.module or "")
            found.append((node.lineno, source))
            found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if layer(name) > layer(module)]


def upward_imports() -> list[str]:
    """``path:line: importer -> imported`` for each import from a higher layer."""
    hits = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            module = module_name(path)
            seen: set[int] = set()
            for line, name in sorted(imported(path, module)):
                if line in seen or any(_within(module, a) and _within(name, b) for a, b in KNOWN):
                    continue
                seen.add(line)  # one report a statement (its module, not each name)
                hits.append(f"{path.relative_to(ROOT)}:{line}: {module} -> {name}")
    return hits


def test_no_import_goes_up_a_layer():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The check is not vacuous: a core module importing the doctor (the old ``Probe`` import of
    the sandbox), a command (relatively) or an agents package (by name, in a parenthesized
    list) is reported, the line and both names given."""
    core = tmp_path / "verigym"
    core.mkdir()
    (core / "sandbox.py").write_text(
        "def probe():\n    from verigym.doctor import Probe\n    from . import commands\n\n"
        "from verigym import (\n    agents,  # noqa\n)\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "FOLDERS", {"verigym": "verigym"})
    assert upward_imports() == [
        "verigym/sandbox.py:2: verigym.sandbox -> verigym.doctor",
        "verigym/sandbox.py:3: verigym.sandbox -> verigym.commands",
        "verigym/sandbox.py:5: verigym.sandbox -> verigym.agents",
    ]
