"""Shared by the tests of RepoFix-Real's sandbox-side runner (``_pytest_runner.py``): the runner
under test, the folder of trusted test dependencies it is given, and one run of a small tree.
The runner runs without bubblewrap here (what it refuses does not depend on the sandbox)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

from verigym.envs.tool.repofix import real

RUNNER = Path(os.environ.get("VG_PYTEST_RUNNER", real.__file__)).with_name("_pytest_runner.py")
"""The runner under test (``VG_PYTEST_RUNNER`` points at another copy, e.g. an older one)."""


def load_runner() -> ModuleType:
    """The runner module, loaded from :data:`RUNNER`."""
    spec = importlib.util.spec_from_file_location("_vg_pytest_runner", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_deps(root: Path, *, hypothesis: bool = False) -> str:
    """Write the trusted test dependencies the sandbox gets (pytest, and hypothesis if asked)
    under ``root``; its path."""
    files: dict[str, str | bytes] = dict(real.pytest_files())
    if hypothesis:
        files.update(real.hypothesis_files())
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(data)
    return str(root)


def run_tree(tree: Path, deps: str, files: dict[str, str], timeout: float = 60.0) -> dict:
    """Write ``files`` (path -> text) under ``tree`` and run ``tests/test_x.py`` there; the
    runner's result (``results``, ``messages``, ``tampered`` ...)."""
    for path, text in files.items():
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return load_runner().run_pytest(str(tree), deps, ["tests/test_x.py"], timeout)
