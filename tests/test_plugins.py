"""Third-party plugins (issue 22 item 1): a package built by ``verigym new-env`` and a broken one are
pip-installed into a temporary folder (``--target``, never into the shared environment) and used
from subprocesses with that folder on ``PYTHONPATH``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from verigym.commands.new_env import write_skeleton

_BROKEN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "brokenplug"
version = "0.1.0"

[tool.setuptools]
py-modules = ["brokenplug_table", "brokenplug_agent", "brokenplug_exits"]

[project.entry-points."verigym.envs"]
brokenplug = "brokenplug_table"

[project.entry-points."verigym.agents"]
random = "brokenplug_agent:Stolen"
brokenplug-exits = "brokenplug_exits:Agent"
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the installed ``acme`` skeleton and the ``brokenplug`` package."""
    root = tmp_path_factory.mktemp("plugins")
    write_skeleton("acme", "Sum", root)
    broken = root / "brokenplug"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(_BROKEN_PYPROJECT)
    (broken / "brokenplug_table.py").write_text(
        "raise RuntimeError('brokenplug table is broken on purpose')\n"
    )
    (broken / "brokenplug_agent.py").write_text("class Stolen:\n    pass\n")
    (broken / "brokenplug_exits.py").write_text("import sys\n\nsys.exit(3)\n")
    site = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(root / "acme"),
            str(broken),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


def _verigym(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "verigym", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


# slow: six CLI runs in fresh interpreters (list, check, two evals, doctor, a broken agent; ~20 s of CPU);
# the loader's guarantees (namespaces, a plugin raising at import or at load) are default tests below
@pytest.mark.slow
def test_installed_plugin_is_listed_checked_and_evaluated(plugin_path: Path, tmp_path: Path):
    listed = _verigym(plugin_path, "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    ids = {row["id"]: row for row in json.loads(listed.stdout)}
    assert {"acme/Sum-v0", "acme/Sum-Hard-v0"} <= set(ids) and "verigym/GuessNumber-v0" in ids
    assert ids["acme/Sum-v0"]["family"] == "text"
    # the broken plugin is named in a warning and skipped; verigym's own agent name is not taken over
    assert "brokenplug" in listed.stderr and "broken on purpose" in listed.stderr

    checked = _verigym(plugin_path, "check", "acme/Sum-v0", cwd=tmp_path)
    assert checked.returncode == 0 and "1 passed, 0 failed" in checked.stdout, (
        checked.stdout + checked.stderr
    )

    export = tmp_path / "rows.json"
    evaluated = _verigym(
        plugin_path,
        "eval",
        "--agent",
        "random",
        "--agent",
        "acme-solver",
        "--env",
        "acme/Sum-v0",
        "--episodes",
        "3",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "results"),
        "--export",
        str(export),
        cwd=tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    rows = json.loads(export.read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    by_agent: dict[str, list[dict]] = {}
    for item in rows:
        assert item["env_id"] == "acme/Sum-v0"
        by_agent.setdefault(str(item.get("agent") or item.get("agent_spec")), []).append(item)
    assert {"random", "acme-solver"} <= set(by_agent), sorted(by_agent)
    assert len(by_agent["acme-solver"]) == 3 and all(
        item["success"] for item in by_agent["acme-solver"]
    )

    suite = tmp_path / "acme-suite.json"
    suite.write_text(
        json.dumps(
            {
                "name": "acme-suite",
                "metric": "success",
                "tasks": [{"env_id": "acme/Sum-Hard-v0", "episodes": 2}],
            }
        )
    )
    in_suite = _verigym(
        plugin_path,
        "eval",
        "--agent",
        "acme-solver",
        "--suite",
        str(suite),
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "results"),
        cwd=tmp_path,
    )
    assert (
        in_suite.returncode == 0 and "ran 2 episodes (2 ok)" in in_suite.stdout + in_suite.stderr
    ), in_suite.stdout + in_suite.stderr

    doctor = _verigym(plugin_path, "doctor", cwd=tmp_path)
    assert "brokenplug" in doctor.stdout and "acme" in doctor.stdout, doctor.stdout
    # a plugin agent whose module calls sys.exit(3): doctor loads it, reports it and goes on
    assert doctor.returncode == 0 and "Plugins" in doctor.stdout, doctor.stdout + doctor.stderr
    assert "'brokenplug-exits' of brokenplug" in doctor.stderr and "SystemExit: 3" in doctor.stderr

    exits = _verigym(
        plugin_path,
        "eval",
        "--agent",
        "brokenplug-exits",
        "--env",
        "acme/Sum-v0",
        "--episodes",
        "1",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "results"),
        cwd=tmp_path,
    )
    said = exits.stdout + exits.stderr
    assert exits.returncode == 1 and "SystemExit: 3; the agent cannot be made" in said, said


def test_plugin_agent_and_the_skeletons_own_test(plugin_path: Path, tmp_path: Path):
    code = (
        "import gymnasium as gym, verigym\n"
        "from verigym import agents\n"
        "env = gym.make('acme/Sum-Hard-v0')\n"
        "agent = agents.make('acme-solver', env)\n"
        "obs, info = env.reset(seed=3)\n"
        "print(env.step(agent.act(obs, info))[4]['success'], agents.AGENTS['random'])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(plugin_path), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "verigym.agents.reference:RandomAgent"]
    assert "agent name 'random' is verigym's own" in done.stderr
    skeleton_test = plugin_path.parent / "acme" / "tests" / "test_env.py"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(skeleton_test)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_new_env_refuses_bad_names(tmp_path: Path):
    for name in ("Acme", "verigym", "1x", "a-b"):
        with pytest.raises(ValueError):
            write_skeleton(name, "Sum", tmp_path)
    with pytest.raises(ValueError, match="CamelCase"):
        write_skeleton("acme", "sum", tmp_path)
    write_skeleton("acme", "Sum", tmp_path)
    with pytest.raises(ValueError, match="exists"):
        write_skeleton("acme", "Sum", tmp_path)


# -- plugin loading in this process (issue 28 section 6): fake entry points over modules in tmp_path --


@pytest.fixture
def loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``load(name, source)``: write module ``name`` with ``source``, then run ``register_all`` over
    one fake entry point of distribution ``name`` pointing at it; returns the new plugin errors.
    verigym's table and the env registries are restored afterwards."""
    import importlib.metadata

    import gymnasium

    from verigym import registration

    registration.register_all()
    saved_gym = dict(gymnasium.registry)
    monkeypatch.setattr(registration, "_TABLE", dict(registration._TABLE))
    monkeypatch.setattr(registration, "_PLUGIN_ERRORS", [])
    monkeypatch.setattr(registration, "_NAMESPACE_OWNERS", dict(registration._NAMESPACE_OWNERS))
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(name: str, source: str) -> list:
        (tmp_path / f"{name}.py").write_text(source)
        point = importlib.metadata.EntryPoint(name, name, registration.ENV_GROUP)
        monkeypatch.setattr(registration, "entry_points", lambda group: [point])
        monkeypatch.setattr(registration, "_distribution", lambda p: p.name)
        monkeypatch.setattr(registration, "_LOADED", False)
        known = len(registration._PLUGIN_ERRORS)
        registration.register_all()
        return registration._PLUGIN_ERRORS[known:]

    yield load
    gymnasium.registry.clear()
    gymnasium.registry.update(saved_gym)


_ROW = "from verigym.registration import EnvRow\nROWS = [EnvRow(id={id!r}, entry_point='verigym.envs.text.guess_number:GuessNumberEnv', family='text')]\n"


@pytest.mark.parametrize("raised", ["SystemExit(3)", "KeyboardInterrupt()", "GeneratorExit()"])
def test_plugin_raising_base_exception_at_import_is_skipped(loader, raised):
    """A plugin's sys.exit() or its own KeyboardInterrupt at import does not end the process."""
    errors = loader(f"plug_raises_{raised[:4].lower()}", f"raise {raised}\n")
    assert len(errors) == 1 and errors[0].error.startswith(raised.split("(")[0]), errors


def test_users_ctrl_c_while_plugins_load_still_stops(loader):
    """A real SIGINT during plugin loading is the user's: it propagates."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            loader("plug_ctrl_c", "import signal\nsignal.raise_signal(signal.SIGINT)\n")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGINT) is previous  # the loader's handler is gone


def test_plugin_cannot_register_in_verigyms_namespace(loader):
    import gymnasium

    errors = loader("plug_stealer", _ROW.format(id="verigym/Wordle-Easy-v9"))
    assert len(errors) == 1 and "namespace 'verigym' belongs to verigym" in errors[0].error, errors
    assert "verigym/Wordle-Easy-v9" not in gymnasium.registry
    # the unversioned id still resolves to verigym's own class
    assert gymnasium.envs.registration.find_highest_version("verigym", "Wordle-Easy") == 0


def test_plugin_cannot_register_in_another_plugins_namespace(loader):
    assert loader("plug_owner", _ROW.format(id="owner/Sum-v0")) == []
    errors = loader("plug_squatter", _ROW.format(id="owner/Sum-v1"))
    assert len(errors) == 1 and "belongs to plug_owner" in errors[0].error, errors
    # nor in a namespace that Gymnasium's registry holds and verigym's table did not register
    errors = loader("plug_tabular", _ROW.format(id="tabular/Blackjack-v9"))
    assert len(errors) == 1 and "belongs to another library" in errors[0].error, errors


def test_direct_registration_in_a_foreign_namespace_is_undone(loader):
    """A plugin that calls gymnasium.register itself at import cannot shadow a built-in id."""
    import gymnasium

    original = gymnasium.registry["verigym/GuessNumber-v0"]
    source = (
        "import gymnasium\n"
        "gymnasium.register('verigym/GuessNumber-v7', entry_point='plug_direct:Env')\n"
        "gymnasium.registry['verigym/GuessNumber-v0'] = gymnasium.registry['verigym/GuessNumber-v7']\n"
        "ROWS = []\n"
    )
    errors = loader("plug_direct", source)
    assert len(errors) == 1 and "behind verigym's back" in errors[0].error, errors
    assert "verigym/GuessNumber-v7" not in gymnasium.registry
    assert gymnasium.registry["verigym/GuessNumber-v0"] is original


# -- plugin agents and doctor probes: the same rule (registration.run_plugin) -------------------

_RAISED = ["SystemExit(3)", "KeyboardInterrupt()", "GeneratorExit()"]


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``write(name, source)``: a module ``name`` in ``tmp_path`` (importable); plugin errors and
    the agents table are restored afterwards."""
    from verigym import registration
    from verigym.agents import base

    registration.register_all()
    base.AGENTS["random"]  # the table is read before it is patched
    monkeypatch.setattr(registration, "_PLUGIN_ERRORS", [])
    monkeypatch.setattr(base._TABLE, "_targets", dict(base._TABLE._targets))
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(source)
        return name

    return write


@pytest.mark.parametrize("raised", _RAISED)
def test_plugin_agent_raising_base_exception_at_load_is_skipped_with_a_warning(
    plugin_module, raised, caplog
):
    """A plugin agent whose module calls sys.exit() (or raises its own KeyboardInterrupt) when the
    agent is made: the make raises ImportError, the failure is a plugin error (doctor's line)."""
    from verigym import agents, registration
    from verigym.agents import base

    module = plugin_module(f"agent_raises_{raised[:4].lower()}", f"raise {raised}\n")
    base._TABLE._targets["acme-exits"] = f"{module}:Agent"
    with pytest.raises(ImportError, match=raised.split("(")[0]):
        agents.make("acme-exits", "verigym/GuessNumber-v0")
    errors = registration._PLUGIN_ERRORS
    assert len(errors) == 1 and errors[0].group == base.AGENT_GROUP, errors
    assert errors[0].name == "acme-exits" and errors[0].error.startswith(raised.split("(")[0])
    assert "acme-exits" in caplog.text  # the warning names the plugin
    assert agents.make("random", "verigym/GuessNumber-v0") is not None  # verigym goes on


def test_users_ctrl_c_while_a_plugin_agent_loads_still_stops(plugin_module):
    import signal

    from verigym.agents import agent_class, base

    module = plugin_module("agent_ctrl_c", "import signal\nsignal.raise_signal(signal.SIGINT)\n")
    base._TABLE._targets["acme-ctrl-c"] = f"{module}:Agent"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            agent_class("acme-ctrl-c")
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("raised", _RAISED)
def test_doctor_probe_raising_base_exception_is_a_broken_line(plugin_module, monkeypatch, raised):
    """A doctor probe that exits at import or when called is one failing line; the report goes on."""
    import importlib.metadata

    from verigym import doctor, registration

    at_import = plugin_module(f"probe_import_{raised[:4].lower()}", f"raise {raised}\n")
    at_call = plugin_module(
        f"probe_call_{raised[:4].lower()}", f"def probe():\n    raise {raised}\n"
    )
    not_a_probe = plugin_module("probe_not_a_probe", "def probe():\n    return 'fine'\n")
    points = [
        importlib.metadata.EntryPoint("core", "verigym.doctor:probe_core", doctor.PROBE_GROUP),
        importlib.metadata.EntryPoint("a", f"{at_import}:probe", doctor.PROBE_GROUP),
        importlib.metadata.EntryPoint("b", f"{at_call}:probe", doctor.PROBE_GROUP),
        importlib.metadata.EntryPoint("c", f"{not_a_probe}:probe", doctor.PROBE_GROUP),
    ]
    monkeypatch.setattr(registration, "entry_points", lambda group: points)
    report = doctor.run_probes()
    assert [probe.ok for probe in report] == [True, False, False, False], report
    name = raised.split("(")[0]
    assert f"raised {name}" in report[1].detail and f"raised {name}" in report[2].detail
    assert "returned str" in report[3].detail


def test_an_env_module_that_exits_at_import_is_no_class_and_ends_nothing(tmp_path, monkeypatch):
    """The runner's render-mode probe and eval's oracle preflight import an env's module without
    building it: a module raising SystemExit there is a broken entry point, never the end of verigym."""
    from verigym.leaderboards.episode import _render_modes
    from verigym.registration import entry_point_class

    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert entry_point_class("exits_at_import:Env") is None
    gym.register("plugtest/ExitsAtImport-v0", entry_point="exits_at_import:Env")
    try:
        assert _render_modes("plugtest/ExitsAtImport-v0") == []
    finally:
        del gym.registry["plugtest/ExitsAtImport-v0"]
