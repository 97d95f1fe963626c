"""``verigym new-env NAME``: write a plugin package skeleton for a new environment.

The skeleton is an installable package (``pip install -e DIR``) that registers its env through the
entry-point group ``verigym.envs`` and an agent through ``verigym.agents`` (docs/design.md,
"Plugins"); once installed, its id (``<name>/<Env>-v0``) appears in ``verigym list``, passes
``verigym check`` and runs in ``verigym eval``. It holds:

* ``pyproject.toml`` with both entry points;
* ``<name>/env.py``: a small text env (add two integers) with a verifier, a documented penalty for
  unreadable answers, the text view and a scripted oracle;
* ``<name>/table.py``: its ``ROWS``;
* ``<name>/agent.py``: an agent that solves it from the observation text;
* ``tests/test_env.py``: runs ``verigym.checker.check_env`` on the id.
"""

from __future__ import annotations

import argparse
import pathlib
import re

HELP = "write a plugin package skeleton (env, verifier, oracle, table, agent, test) for a new environment"

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
ENV_PATTERN = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", help="package name and id namespace, lowercase (e.g. acme: ids acme/<Env>-v0)"
    )
    parser.add_argument("--env", default="Sum", help="CamelCase env name (default: Sum)")
    parser.add_argument(
        "--dir", default=".", help="parent folder; the package is written to DIR/NAME (default: .)"
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite the files of an existing DIR/NAME"
    )


_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "{env} and its agent, a verigym plugin"
requires-python = ">=3.10"
dependencies = ["verigym"]

[tool.setuptools]
packages = ["{name}"]

# verigym registers the ROWS of this module (ids {name}/<Name>-v<N>)
[project.entry-points."verigym.envs"]
{name} = "{name}.table"

# `verigym eval --agent {name}-solver`, `verigym.agents.make("{name}-solver", env)`
[project.entry-points."verigym.agents"]
{name}-solver = "{name}.agent:SolverAgent"
"""

_INIT = '''\
"""{env}: a verigym plugin (see table.py for its ids)."""
'''

_TABLE = '''\
"""Registration rows of {name} (read by verigym through the ``verigym.envs`` entry point).

Keep this module light: it is imported by ``import verigym``; the env module is imported only when
an env is made.
"""

from verigym.registration import variants

ROWS = variants(
    "{name}/{env}{{}}-v0", "{name}.env:{env}Env", family="text",
    rows={{"": {{}}, "-Hard": {{"max_value": 1000}}}},
    description="Add two integers; answer with the sum.",
)
'''

_ENV = '''\
"""{env}: add two integers (a verigym plugin env: a verifier, a penalty for bad input, an oracle)."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym

from verigym import ActionParseError, EpisodeGuard, UnicodeText, action_error_info, episode_end
from verigym.validation import check_int, check_number

_INTEGER = re.compile(r"-?\\d+")


class {env}Env(EpisodeGuard, gym.Env):
    """Answer ``a + b`` for two integers drawn in ``[0, max_value]``.

    Observation: the question (``str``). Action: text whose last integer is the answer.
    Reward: 1.0 for the right sum (the episode terminates), 0.0 for a wrong one (it terminates
    too), ``invalid_action_reward`` for a reply with no integer (``info["action_error"]`` says so;
    the agent may answer again). After ``max_steps`` unreadable replies the episode is truncated
    with ``success=False``. The last step carries ``info["success"]`` and ``info["score"]``.

    Args:
        max_value: largest operand (>= 1).
        max_steps: replies before truncation (>= 1).
        invalid_action_reward: reward of a reply with no integer (<= 0).
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata = {{"render_modes": ["ansi"], "family": "text"}}

    def __init__(self, *, max_value: int = 100, max_steps: int = 3, invalid_action_reward: float = -0.1, render_mode: str | None = None):
        self.max_value = check_int("max_value", max_value, 1)
        self.max_steps = check_int("max_steps", max_steps, 1)
        self.invalid_action_reward = check_number("invalid_action_reward", invalid_action_reward, high=0.0)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {{render_mode!r}}")
        self.render_mode = render_mode
        self.observation_space = UnicodeText(256)
        self.action_space = UnicodeText(1024)
        self._operands = (0, 0)
        self._steps = 0
        self._last = ""

    # ---- the text view -----------------------------------------------------------------------
    def instructions(self) -> str:
        return "Answer with the sum of the two integers, e.g. 'The answer is 42'. The last integer you write counts."

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> int:
        found = _INTEGER.findall(str(text))
        if not found:
            raise ActionParseError("no integer in the reply; write the sum as digits, e.g. 'The answer is 42'")
        if len(found[-1].lstrip("-")) > 18:  # bounded work on any reply: no huge int conversions
            raise ActionParseError("the answer has more than 18 digits; no sum here is that long")
        return int(found[-1])

    def oracle_action(self) -> str:
        return str(sum(self._operands))

    # ---- the env -----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._operands = tuple(int(x) for x in self.np_random.integers(0, self.max_value + 1, size=2))
        self._steps = 0
        self._last = f"What is {{self._operands[0]}} + {{self._operands[1]}}?"
        return self._last, {{"instructions": self.instructions()}}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        info: dict[str, Any] = {{}}
        try:
            answer = self.parse_action(action)
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            truncated = self._steps >= self.max_steps
            if truncated:
                episode_end(info, success=False, score=0.0)
            return self._last, self.invalid_action_reward, False, truncated, info
        correct = answer == sum(self._operands)  # the verifier: exact integer match, nothing else read
        episode_end(info, success=correct, score=float(correct))
        return self._last, float(correct), True, False, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
'''

_AGENT = '''\
"""An agent for {env} that reads the two integers from the question and answers their sum."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


class SolverAgent:
    """Registered as ``{name}-solver`` (entry point group ``verigym.agents``)."""

    def __init__(self, env: Any = None) -> None:
        self.env = env

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False) -> str:
        numbers = [int(x) for x in re.findall(r"-?\\d+", str(obs))]
        return f"The answer is {{sum(numbers[-2:])}}"
'''

_TEST = """\
import gymnasium as gym

from verigym import agents
from verigym.checker import check_env


def test_check_passes():
    report = check_env("{name}/{env}-v0")
    assert report.passed, report


def test_solver_agent_wins():
    env = gym.make("{name}/{env}-v0")
    agent = agents.make("{name}-solver", env)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
    assert terminated and info["success"] and reward == 1.0
"""


def write_skeleton(
    name: str, env: str = "Sum", parent: str | pathlib.Path = ".", *, force: bool = False
) -> pathlib.Path:
    """Write the plugin package skeleton to ``parent/name``.

    Args:
        name: package name and id namespace (``[a-z][a-z0-9_]*``).
        env: CamelCase env name; the ids are ``name/env-v0`` and ``name/env-Hard-v0``.
        parent: the folder that receives the package folder.
        force: overwrite files of an existing package folder.

    Returns:
        The package folder.

    Raises:
        ValueError: a bad name, or the folder exists and ``force`` is false.
    """
    if not NAME_PATTERN.match(name) or name == "verigym":
        raise ValueError(
            f"name {name!r} must be lowercase letters, digits and '_', start with a letter, and not be 'verigym'"
        )
    if not ENV_PATTERN.match(env):
        raise ValueError(f"env name {env!r} must be CamelCase letters and digits (e.g. Sum)")
    root = pathlib.Path(parent) / name
    if root.exists() and not force:
        raise ValueError(f"{root} exists; choose another name or pass --force")
    files = {
        "pyproject.toml": _PYPROJECT,
        f"{name}/__init__.py": _INIT,
        f"{name}/table.py": _TABLE,
        f"{name}/env.py": _ENV,
        f"{name}/agent.py": _AGENT,
        "tests/test_env.py": _TEST,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=name, env=env))
    return root


def run(args: argparse.Namespace) -> int:
    try:
        root = write_skeleton(args.name, args.env, args.dir, force=args.force)
    except ValueError as exc:
        print(f"verigym new-env: {exc}")
        return 2
    print(
        f"wrote {root}\n"
        f"next: pip install -e {root}\n"
        f"      verigym list | grep {args.name}/\n"
        f"      verigym check {args.name}/{args.env}-v0\n"
        f"      verigym eval --agent {args.name}-solver --env {args.name}/{args.env}-v0"
    )
    return 0
