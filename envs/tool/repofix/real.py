"""Real libraries for RepoFix-Real: read the vendored sdists and run their own pytest suites in the sandbox.

``vendor/`` (``scripts/vendor_repofix_libs.py`` rebuilds it) holds each library's pinned sdist with
its licence, and pytest with its pure-Python requirements as wheels. The verdict sandbox runs
``python -I -S`` and never sees the host's site-packages, so those test dependencies are written into
the sandbox's tree (:data:`DEPS`, outside the repository at :data:`~verigym.envs.tool.workspace.ROOT`)
next to the checkout; the trusted runner (``_pytest_runner.py``, sent as source) runs pytest from
there in a child process.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import json
import os
import posixpath
import py_compile
import re
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = [
    "DEPS",
    "LIBRARIES",
    "available",
    "deps_bytecode",
    "hypothesis_files",
    "imports_hypothesis",
    "tests_need",
    "needs",
    "library_files",
    "package_dirs",
    "pytest_files",
    "run_tests",
    "test_files",
    "tests_dir",
]

VENDOR = Path(__file__).with_name("vendor")
DEPS = "/tmp/vgdeps"
"""Where the sandbox finds pytest (written there before each run; never part of the repository)."""
_RUNNER = Path(__file__).with_name("_pytest_runner.py").read_text()
_MAX_FILE = 1 << 20
_PYGMENTS_KEPT = frozenset(("__init__.py", "_mapping.py", "python.py", "diff.py", "default.py"))
"""The lexers and styles pytest's terminal writer loads (the other 4 MB of pygments stay out)."""


@functools.lru_cache(maxsize=1)
def _manifest() -> dict[str, Any]:
    return json.loads((VENDOR / "manifest.json").read_text())


LIBRARIES: tuple[str, ...] = tuple(sorted(_manifest()["libraries"]))
"""The vendored libraries (their PyPI names)."""


@functools.lru_cache(maxsize=8)
def library_files(name: str) -> dict[str, str]:
    """The checkout of library ``name``: {path: text} of its package modules and its test files.

    The ``.py`` files of its package folders, its tests (a folder or one file) and its ``support``
    folders (modules its tests import that are neither: pyparsing's ``examples/``), plus the text
    files its manifest entry lists under ``data`` (files or folders its tests read). A ``src/``
    layout is flattened (``src/pkg/x.py`` -> ``pkg/x.py``).

    Raises:
        KeyError: ``name`` is not a vendored library.
    """
    entry = _manifest()["libraries"][name]
    keep = [_prefix(p) for p in (*entry["packages"], entry["tests"], *entry.get("support", ()))]
    data_keep = [_prefix(p) for p in entry.get("data", ())]
    out: dict[str, str] = {}
    with tarfile.open(VENDOR / entry["file"]) as archive:
        for member in archive.getmembers():
            if not member.isfile() or member.size > _MAX_FILE:
                continue
            inner = member.name.split("/", 1)[1] if "/" in member.name else ""
            if posixpath.normpath(inner) != inner:
                continue
            if not (
                (inner.endswith(".py") and any(_under(inner, k) for k in keep))
                or any(_under(inner, k) for k in data_keep)
            ):
                continue
            data = archive.extractfile(member)
            if data is None:
                continue
            path = inner[4:] if inner.startswith("src/") else inner
            try:
                out[path] = io.TextIOWrapper(data, encoding="utf-8").read()
            except UnicodeDecodeError:  # a binary data file: not part of the checkout
                continue
    return out


def _prefix(path: str) -> str:
    """A folder as ``"dir/"``; a single file (``test_x.py``, ``tests/data.txt``) as itself."""
    return path if "." in path.rsplit("/", 1)[-1] else path.rstrip("/") + "/"


def _under(path: str, prefix: str) -> bool:
    return path == prefix or (prefix.endswith("/") and path.startswith(prefix))


def package_dirs(name: str) -> list[str]:
    """The library's package folders in the checkout (``src/`` flattened)."""
    return [p.removeprefix("src/").rstrip("/") for p in _manifest()["libraries"][name]["packages"]]


def tests_dir(name: str) -> str:
    """The library's test folder in the checkout (or its one test file, e.g. ``test_x.py``)."""
    return _manifest()["libraries"][name]["tests"].rstrip("/")


def test_files(name: str) -> list[str]:
    """The library's pytest modules in the checkout (``test_*.py`` under :func:`tests_dir`)."""
    tests = _prefix(tests_dir(name))
    return sorted(
        p
        for p in library_files(name)
        if p.endswith(".py") and _under(p, tests) and p.rsplit("/", 1)[-1].startswith("test_")
    )


@functools.lru_cache(maxsize=1)
def pytest_files() -> dict[str, str]:
    """pytest and its requirements: {path under :data:`DEPS`: text} read from the vendored wheels."""
    out: dict[str, str] = {}
    for entry in _manifest()["testdeps"].values():
        with zipfile.ZipFile(VENDOR / entry["file"]) as wheel:
            for info in wheel.infolist():
                name = info.filename
                parts = name.split("/")
                if (
                    name.endswith(".py")
                    and ".dist-info/" not in name
                    and not (
                        parts[:2] in (["pygments", "lexers"], ["pygments", "styles"])
                        and parts[-1] not in _PYGMENTS_KEPT
                    )
                ):
                    out[name] = wheel.read(info).decode("utf-8")
    return out


_OPTIONAL = ("hypothesis",)
"""Test dependencies a library's manifest entry may name under ``needs``: never vendored (hypothesis
is MPL-2.0), copied from the host's install into the sandbox's tree where importable."""
_HYPOTHESIS_TOP = ("_hypothesis_globals", "_hypothesis_ftz_detector")
"""Top-level modules hypothesis imports (next to its package in site-packages)."""


def needs(name: str) -> tuple[str, ...]:
    """The optional test dependencies (of :data:`_OPTIONAL`) library ``name``'s whole suite needs."""
    return tuple(n for n in _manifest()["libraries"][name].get("needs", ()) if n in _OPTIONAL)


@functools.lru_cache(maxsize=1)
def hypothesis_files() -> dict[str, bytes] | None:
    """hypothesis and its one requirement, sortedcontainers, as installed on the host (the ``test``
    extra): {path under :data:`DEPS`: bytes}, or None where either is not importable.

    Their package folders' modules and data files (hypothesis' compiled ``_native`` module too; not
    ``hypothesis/extra/``'s modules, which need numpy, pandas, django...; not ``__pycache__``) and
    hypothesis' top-level helper modules. Never vendored: hypothesis is MPL-2.0.
    """
    out: dict[str, bytes] = {}
    for top in ("hypothesis", "sortedcontainers"):
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(folder.rglob("*")):
            inner = path.relative_to(folder).as_posix()
            if (
                not path.is_file()
                or "__pycache__" in inner.split("/")
                or path.suffix == ".pyc"
                or (inner.startswith("extra/") and inner != "extra/__init__.py")
                or path.stat().st_size > 4 * _MAX_FILE
            ):
                continue
            out[f"{top}/{inner}"] = path.read_bytes()
    for top in _HYPOTHESIS_TOP:
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.origin or not os.path.isfile(spec.origin):
            return None
        out[f"{top}.py"] = Path(spec.origin).read_bytes()
    return out


def _bytecode(files: dict[str, bytes]) -> dict[str, bytes]:
    """Checked-hash bytecode (PEP 552) of the ``.py`` files of ``files`` ({path under :data:`DEPS`:
    source bytes}), compiled here by this interpreter: {path of its ``__pycache__`` file: bytes}.

    Written next to the sources in the sandbox, so its Python loads the trusted imports without
    compiling them (~3.5 s of CPU for pytest and hypothesis, on every verdict). A checked-hash file
    holds the source's hash, which the importer compares with the source it reads: a stale or
    foreign file is compiled again from source, never trusted over it; one of another Python
    (another magic number) is ignored. A file that does not compile here gets none.
    """
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="vg-pyc-") as tmp:
        for path, source in files.items():
            if not path.endswith(".py"):
                continue
            src = os.path.join(tmp, "src.py")
            cfile = os.path.join(tmp, "out.pyc")
            with open(src, "wb") as handle:
                handle.write(source)
            try:
                py_compile.compile(
                    src,
                    cfile=cfile,
                    dfile=posixpath.join(DEPS, path),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
            except py_compile.PyCompileError:
                continue
            folder, _, name = path.rpartition("/")
            cached = importlib.util.cache_from_source(name)  # __pycache__/<name>.<tag>.pyc
            with open(cfile, "rb") as handle:
                out[posixpath.join(folder, cached)] = handle.read()
    return out


@functools.lru_cache(maxsize=2)
def deps_bytecode(with_hypothesis: bool) -> dict[str, str]:
    """The bytecode of pytest's tree (and of hypothesis' where ``with_hypothesis`` and importable),
    base64-encoded for the sandbox's ``write_blobs``: {path under :data:`DEPS`: base64 text}.
    Compiled once per process (a few seconds of CPU)."""
    sources = {p: t.encode("utf-8") for p, t in pytest_files().items()}
    if with_hypothesis:
        sources.update(hypothesis_files() or {})
    return {p: base64.b64encode(b).decode("ascii") for p, b in _bytecode(sources).items()}


def imports_hypothesis(text: str) -> bool:
    """Whether a test module (or conftest) imports hypothesis."""
    return re.search(r"^\s*(from|import)\s+hypothesis\b", text, re.M) is not None


def tests_need(name: str, tests: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The optional test dependencies that running ``tests`` of library ``name`` takes: its
    manifest's ``needs``, and hypothesis where a test file, or a ``conftest.py`` in its folder or
    above, imports it."""
    files = library_files(name)
    out = set(needs(name))
    for test in tests:
        parts = test.split("/")
        above = ["/".join([*parts[:i], "conftest.py"]) for i in range(len(parts))]
        if any(imports_hypothesis(files.get(p, "")) for p in (test, *above)):
            out.add("hypothesis")
    return tuple(sorted(out))


def available(names: tuple[str, ...] | list[str]) -> bool:
    """Whether the optional test dependencies ``names`` can be copied into the sandbox here."""
    return all(
        n in _OPTIONAL and (n != "hypothesis" or hypothesis_files() is not None) for n in names
    )


def run_tests(
    box: Any,
    root: str,
    files: dict[str, str],
    tests: list[str],
    *,
    timeout_s: float,
    needs: tuple[str, ...] | list[str] = (),
):
    """Write ``files`` at ``root`` and pytest into ``box`` (already fresh), run the test files ``tests``.

    ``needs``: optional test dependencies to copy in as well (``"hypothesis"``; the caller checked
    :func:`available`). Returns (node id -> "pass"/"fail"/"skip", tampered, node id -> first line
    of its failure). A run that dies, times out or answers malformed reads as tampered with no
    results; so does one where no test ran or a needed dependency is missing here.
    """
    try:
        written = box.call("_vgw_write_tree", [DEPS, pytest_files()])
        written = box.call("_vgw_write_tree", [root, files]) if written.ok else written
        loaded = box.run(_RUNNER) if written.ok else written
        hypothesis = "hypothesis" in needs
        if loaded.ok and hypothesis:
            blobs = hypothesis_files()
            if blobs is None:
                return {}, True, {}
            loaded = box.call(
                "write_blobs",
                [DEPS, {p: base64.b64encode(b).decode("ascii") for p, b in blobs.items()}],
            )
        if loaded.ok:  # compiled here: the sandbox's Python need not compile the trusted imports
            loaded = box.call("write_blobs", [DEPS, deps_bytecode(hypothesis)])
        if not loaded.ok:
            return {}, True, {}
        answer = box.call(
            "run_pytest", [root, DEPS, list(tests), timeout_s], timeout=timeout_s + 10
        )
    except Exception:  # noqa: BLE001 -- a sandbox that died reads as every test failing
        return {}, True, {}
    value = answer.value if answer.ok else None
    if not isinstance(value, dict) or not isinstance(value.get("results"), dict):
        return {}, True, {}
    results = {
        t: v
        for t, v in value["results"].items()
        if isinstance(t, str) and v in ("pass", "fail", "skip")
    }
    messages = value.get("messages") if isinstance(value.get("messages"), dict) else {}
    messages = {t: str(m)[:400] for t, m in messages.items() if isinstance(t, str)}
    return results, value.get("tampered") is not False or not results, messages
