"""Rebuild ``envs/tool/repofix/vendor/``: the real libraries of RepoFix-Real and their test runner.

Downloads, with pip's ordinary client, each pinned library as its **sdist** (``pip download --no-deps
--no-binary :all: name==version``: the tarball ships the library's own test suite) and the test-only
dependencies (pytest and its pure-Python requirements) as pinned ``py3-none-any`` wheels; checks
each file's licence (MIT, BSD or Apache-2.0 only) and that the whole folder stays under 15 MB;
extracts each licence next to its archive and writes ``vendor/manifest.json`` (name, version,
sha256, licence, where the package and its tests are inside the sdist).

Usage::

    python scripts/vendor_repofix_libs.py          # download what is missing, check, write manifest
    python scripts/vendor_repofix_libs.py --check  # only check the folder against the pins

Nothing here runs at import time of verigym; the environment reads the archives (never the network).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[1] / "envs" / "tool" / "repofix" / "vendor"
MAX_BYTES = 15 << 20

LIBRARIES = {
    # name: (version, licence, package folders inside the sdist, test folder (or one test file)
    # inside the sdist[, {"support": folders of modules the tests import, "data": text files or
    # folders the tests read}])
    "more-itertools": ("10.5.0", "MIT", ["more_itertools"], "tests"),
    "toolz": ("1.0.0", "BSD-3-Clause", ["toolz", "tlz"], "toolz/tests"),
    "cachetools": ("5.5.0", "MIT", ["src/cachetools"], "tests"),
    "tabulate": ("0.9.0", "MIT", ["tabulate"], "test"),
    "boltons": ("26.2.0", "BSD-3-Clause", ["boltons"], "tests"),
    "pyparsing": (
        "3.2.3",
        "MIT",
        ["pyparsing"],
        "tests",
        {
            "support": ["examples"],
            "data": [
                "tests/karthik.ini",
                "tests/parsefiletest_input_file.txt",
                "examples/Setup.ini",
            ],
        },
    ),
    "inflection": ("0.5.1", "MIT", ["inflection"], "test_inflection.py"),
    "itsdangerous": ("2.2.0", "BSD-3-Clause", ["src/itsdangerous"], "tests"),
    "click": ("8.5.1", "BSD-3-Clause", ["src/click"], "tests"),
    "idna": ("3.20", "BSD-3-Clause", ["idna"], "tests"),
    "attrs": ("25.4.0", "MIT", ["src/attr", "src/attrs"], "tests", {"needs": ["hypothesis"]}),
    "semver": ("3.1.2", "BSD-3-Clause", ["src/semver"], "tests"),
    "webcolors": ("25.10.0", "BSD-3-Clause", ["src/webcolors"], "tests"),
}
"""The pinned libraries. ``needs``: optional test dependencies the whole suite needs (attrs'
conftest imports hypothesis); hypothesis (MPL-2.0) is never vendored: where the host can import it
(the ``test`` extra), it is copied into the sandbox for the suites and test files that import it
(attrs', idna's ``test_idna_properties.py``); elsewhere those are not run. itsdangerous'
``test_timed.py`` needs freezegun, which is not vendored: that file is not collected."""

TEST_DEPS = {
    "pytest": ("9.2.0", "MIT"),
    "pluggy": ("1.7.0", "MIT"),
    "iniconfig": ("2.3.1", "MIT"),
    "packaging": ("26.4", "Apache-2.0 OR BSD-2-Clause"),
    "pygments": ("2.21.0", "BSD-2-Clause"),
}
"""Pure-Python test-only dependencies: their modules are written into the verdict sandbox's tree
(the sandbox's ``python -I -S`` never sees the host's site-packages)."""

_ALLOWED = ("MIT", "BSD", "Apache-2.0")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(spec: str, dest: Path, *, binary: bool) -> None:
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", *kind, spec, "-d", str(dest)],
        check=True,
    )


def _licence_text(archive: Path) -> tuple[str, str]:
    """(member name, text) of the archive's licence file."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if "LICENSE" in n.upper().split("/")[-1]]
            return names[0], z.read(names[0]).decode()
    with tarfile.open(archive) as t:
        names = [
            m.name
            for m in t.getmembers()
            if m.name.count("/") == 1 and m.name.split("/")[-1].upper().startswith("LICEN")
        ]
        data = t.extractfile(names[0])
        assert data is not None
        return names[0], io.TextIOWrapper(data, encoding="utf-8").read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check only, download nothing")
    args = parser.parse_args(argv)
    (VENDOR / "sdists").mkdir(parents=True, exist_ok=True)
    (VENDOR / "testdeps").mkdir(parents=True, exist_ok=True)
    (VENDOR / "licenses").mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict] = {"libraries": {}, "testdeps": {}}
    for section, table, binary in (
        ("libraries", LIBRARIES, False),
        ("testdeps", TEST_DEPS, True),
    ):
        folder = VENDOR / ("testdeps" if binary else "sdists")
        for name, (version, licence, *rest) in table.items():
            assert any(a in licence for a in _ALLOWED), (name, licence)
            stem = name.replace("-", "_") if binary else name
            found = sorted(folder.glob(f"{stem}-{version}*")) or sorted(
                folder.glob(f"{stem.replace('-', '_')}-{version}*")
            )
            if not found:
                if args.check:
                    print(f"missing: {name}=={version}", file=sys.stderr)
                    return 1
                with tempfile.TemporaryDirectory() as tmp:
                    _download(f"{name}=={version}", Path(tmp), binary=binary)
                    (got,) = Path(tmp).iterdir()
                    target = folder / got.name
                    target.write_bytes(got.read_bytes())
                found = [target]
            archive = found[0]
            member, text = _licence_text(archive)
            (VENDOR / "licenses" / f"{name}-{version}.LICENSE").write_text(text)
            entry = {
                "version": version,
                "licence": licence,
                "file": f"{folder.name}/{archive.name}",
                "sha256": _sha256(archive),
                "licence_file": member,
            }
            if not binary:
                entry["packages"], entry["tests"] = rest[:2]
                entry.update(rest[2] if len(rest) > 2 else {})
            manifest[section][name] = entry
    total = sum(p.stat().st_size for p in VENDOR.rglob("*") if p.is_file())
    if total > MAX_BYTES:
        print(f"vendor/ is {total} bytes, over {MAX_BYTES}", file=sys.stderr)
        return 1
    (VENDOR / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"vendor/: {len(manifest['libraries'])} libraries, {total} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
