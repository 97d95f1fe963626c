"""``verigym doctor``: which optional parts work on this machine, and how to fix what does not.

Each probe is a zero-argument function returning a :class:`Probe` (defined on the ground floor,
:mod:`verigym.probe`, so the layers below this module write probes without importing it). Probes
are collected from the entry-point group ``verigym.doctor`` (:data:`PROBE_GROUP`), verigym's own
first (declared in its ``pyproject.toml``, run in entry-point name order), then those of installed
plugins, so a part of the library or a third-party package contributes a probe without being named
here::

    [project.entry-points."verigym.doctor"]
    acme = "acme_envs.doctor:probe"
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sys

from verigym.probe import Probe

__all__ = ["PROBE_GROUP", "Probe", "probe_plugins", "run_probes"]

PROBE_GROUP = "verigym.doctor"


def _run(
    command: list[str], timeout: float = 60.0, env: dict[str, str] | None = None
) -> tuple[int, str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    # a command that worked is reported by its stdout alone: a wrapper script's stderr noise (Debian's
    # /usr/bin/chromium prints shell warnings) is not a detail; a failure shows both streams
    return done.returncode, (
        done.stdout if done.returncode == 0 else done.stdout + done.stderr
    ).strip()


def probe_core() -> Probe:
    import gymnasium
    import numpy

    import verigym

    return Probe(
        "verigym core",
        True,
        f"verigym {verigym.__version__}, gymnasium {gymnasium.__version__}, numpy {numpy.__version__}, Python {sys.version.split()[0]}",
    )


def probe_torch() -> Probe:
    try:
        import torch
    except ImportError as exc:
        return Probe("PyTorch", False, str(exc), "pip install torch")
    if torch.cuda.is_available():
        return Probe(
            "PyTorch / CUDA",
            True,
            f"torch {torch.__version__}, CUDA device {torch.cuda.get_device_name(0)}",
        )
    return Probe(
        "PyTorch / CUDA",
        True,
        f"torch {torch.__version__}, CPU only (no CUDA device; agents use device='cpu')",
    )


def probe_mujoco() -> Probe:
    code = (
        'import mujoco; m = mujoco.MjModel.from_xml_string(\'<mujoco><worldbody><light pos="0 0 3"/>'
        '<geom type="sphere" size=".2" rgba="1 0 0 1"/></worldbody></mujoco>\'); d = mujoco.MjData(m);'
        "r = mujoco.Renderer(m, 32, 32); mujoco.mj_forward(m, d); r.update_scene(d); px = r.render();"
        "print(mujoco.__version__, int(px.max()))"
    )
    backend = os.environ.get("MUJOCO_GL", "egl")
    code_, out = _run([sys.executable, "-c", code], env=dict(os.environ, MUJOCO_GL=backend))
    if code_ == 0:
        version, brightest = out.split()[-2:]
        return Probe(
            "MuJoCo rendering",
            int(brightest) > 0,
            f"mujoco {version}, MUJOCO_GL={backend}, headless frame rendered",
        )
    return Probe(
        "MuJoCo rendering",
        False,
        out.splitlines()[-1] if out else "failed",
        "pip install mujoco; apt-get install -y libegl1 libgl1 (then MUJOCO_GL=egl)",
    )


def probe_chromium() -> Probe:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        return Probe(
            "Chromium (GUI envs)",
            False,
            "no chromium on PATH",
            "apt-get update && apt-get install -y chromium",
        )
    try:
        importlib.import_module("playwright")
    except ImportError:
        return Probe(
            "Chromium (GUI envs)",
            False,
            f"{binary} found, playwright missing",
            'pip install "verigym[gui]"',
        )
    code, out = _run([binary, "--version"], timeout=30)
    return Probe(
        "Chromium (GUI envs)",
        code == 0,
        f"{out or binary}, playwright installed",
        "" if code == 0 else "apt-get install --reinstall -y chromium",
    )


def probe_ray() -> Probe:
    try:
        ray = importlib.import_module("ray")
    except ImportError:
        return Probe(
            "Ray (distributed evaluation)", False, "ray not installed", 'pip install "verigym[ray]"'
        )
    return Probe("Ray (distributed evaluation)", True, f"ray {ray.__version__}")


def probe_plugins() -> Probe:
    """The installed plugins (``verigym.envs``/``verigym.agents`` entry points of other packages)
    and any entry point that failed to load; each plugin agent's module is imported here, so one
    that fails (whatever it raises) is reported before an evaluation needs it."""
    from verigym.agents.base import agent_class, plugin_agents
    from verigym.registration import ENV_GROUP, entry_points, plugin_errors

    for name in plugin_agents():  # reads the agents group, so its failures are recorded too
        with contextlib.suppress(Exception):  # a failure is recorded in plugin_errors()
            agent_class(name)
    errors = plugin_errors()
    found = [
        f"{point.name} ({point.dist.metadata['Name'] if point.dist else '?'})"
        for group in (ENV_GROUP, "verigym.agents")
        for point in entry_points(group)
        if point.dist is None or point.dist.metadata["Name"] != "verigym"
    ]
    seen = f"plugins: {', '.join(found)}" if found else "no third-party plugins installed"
    if errors:
        return Probe(
            "Plugins",
            False,
            "; ".join([seen, *map(str, errors)]),
            "fix or uninstall the failing plugin package (pip uninstall <package>)",
        )
    return Probe("Plugins", True, seen)


def run_probes() -> list[Probe]:
    """Run every ``verigym.doctor`` entry point; a probe that fails to load, raises (anything,
    ``SystemExit`` or its own ``KeyboardInterrupt`` included: :func:`verigym.registration.run_plugin`)
    or returns something else than a :class:`Probe` is one broken line naming it, never raised. Only
    the user's Ctrl-C stops the report."""
    from verigym.registration import entry_points, run_plugin

    results = []
    points = entry_points(PROBE_GROUP)
    if not points:
        return [
            Probe(
                "verigym doctor",
                False,
                f"no {PROBE_GROUP} entry points are installed",
                "pip install -e . (in a checkout) or pip install verigym",
            )
        ]
    for point in points:
        result, failure = run_plugin(lambda point=point: point.load()())
        if failure is not None:
            detail = f"the probe raised {type(failure).__name__}: {failure}"
        elif not isinstance(result, Probe):
            detail = f"the probe returned {type(result).__name__}, not a verigym.doctor.Probe"
        else:
            results.append(result)
            continue
        results.append(Probe(f"{point.name} ({point.value})", False, detail))
    return results
