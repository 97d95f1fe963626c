"""A wheel built from the repo contains every subpackage (folders mapped by package-dir)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_wheel_contains_every_subpackage(tmp_path):
    # built from a copy: a build rewrites verigym.egg-info, where the tests (the repo is on
    # sys.path) read verigym's entry points, possibly at the same time in another xdist worker
    # (never a virtualenv: README's setup puts one in the clone, gigabytes of copy)
    source = tmp_path / "source"
    skip = shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".ruff_cache", ".hypothesis"
    )

    def ignore(folder: str, names: list[str]) -> set[str]:
        venvs = {n for n in names if (pathlib.Path(folder, n, "pyvenv.cfg")).is_file()}
        return set(skip(folder, names)) | venvs

    shutil.copytree(ROOT, source, ignore=ignore)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            "-q",
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("verigym-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"verigym/py.typed"}
    for package, folder in {
        "verigym": "verigym",
        "verigym/envs": "envs",
        "verigym/agents": "agents",
        "verigym/wrappers": "wrappers",
        "verigym/leaderboards": "leaderboards",
    }.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            expected.add(f"{package}/{init.relative_to(ROOT / folder).as_posix()}")
    assert expected <= names, sorted(expected - names)
    assert not any(
        n.startswith(("envs/", "agents/", "wrappers/", "leaderboards/")) for n in names
    ), "bare top-level packages leaked"
    for data in (ROOT / "leaderboards").rglob("*"):
        if data.suffix in {".json", ".toml", ".yaml"}:
            assert (
                f"verigym/leaderboards/{data.relative_to(ROOT / 'leaderboards').as_posix()}"
                in names
            )
