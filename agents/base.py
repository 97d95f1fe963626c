"""The Agent / Learner contract (docs/design.md section 4) and the agent registry.

Every agent, verigym's own and a plugin's, is an entry point of the group ``verigym.agents``
(:data:`AGENT_GROUP`) whose name is the agent name and whose value is a class or a factory
``factory(env, **config) -> agent``, imported only when the agent is made. verigym declares its own
in its ``pyproject.toml``; a plugin package the same way::

    [project.entry-points."verigym.agents"]
    acme-greedy = "acme_agents.greedy:GreedyAgent"

:data:`AGENTS` (agent name -> ``"module:attr"``) is read from the installed entry points on first
use; a plugin's name that verigym already uses, or a value that is not ``"module:attr"``, is
skipped with a warning and reported by ``verigym doctor``; so is a plugin module that raises anything
when its agent is made (``SystemExit`` included: the make raises ``ImportError``, only a real
Ctrl-C propagates). A class is built with
``cls.from_env(env, **config)`` when it has that classmethod, else ``cls(env, **config)``, so
``verigym.agents.make("acme-greedy", env)`` and ``verigym eval --agent acme-greedy`` work like for
verigym's own agents.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AGENTS",
    "AGENT_GROUP",
    "Agent",
    "Learner",
    "agent_class",
    "builtin_agents",
    "env_for",
    "load",
    "make",
    "plugin_agents",
]

logger = logging.getLogger(__name__)

AGENT_GROUP = "verigym.agents"
"""Entry-point group of agents: name -> ``"module:Class"`` or ``"module:factory"``."""


@runtime_checkable
class Agent(Protocol):
    """Anything that acts: ``reset`` at episode start, ``act`` on each observation."""

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> Any: ...


@runtime_checkable
class Learner(Agent, Protocol):
    """An agent that learns from an env and saves to / loads from a directory."""

    def learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Any] = ()) -> Learner: ...

    def save(self, path: Any) -> None: ...

    @classmethod
    def load(cls, path: Any, *, device: str = "auto") -> Learner: ...


class _AgentTable(Mapping[str, str]):
    """Agent name -> ``"module:attr"``, read from the ``verigym.agents`` entry points on first use
    (metadata only: no agent module is imported)."""

    def __init__(self) -> None:
        self._targets: dict[str, str] | None = None
        self._builtin: frozenset[str] = frozenset()

    def _load(self) -> dict[str, str]:
        if self._targets is None:
            self._targets, self._builtin = _read_entry_points()
        return self._targets

    def builtin(self) -> frozenset[str]:
        self._load()
        return self._builtin

    def __getitem__(self, name: str) -> str:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"AGENTS({self._load()!r})"


def _read_entry_points() -> tuple[dict[str, str], frozenset[str]]:
    """(name -> ``"module:attr"``, verigym's own names) from the installed entry points; a
    plugin's entry point that cannot be used is recorded with ``record_plugin_error``."""
    from verigym.registration import entry_points, record_plugin_error

    targets: dict[str, str] = {}
    builtin: set[str] = set()
    for point in entry_points(AGENT_GROUP):  # verigym's own first
        dist = getattr(point, "dist", None)
        own = dist is not None and dist.metadata["Name"] == "verigym"
        if point.name in builtin and not own:
            if point.value != targets[point.name]:
                problem = f"agent name {point.name!r} is verigym's own; choose another name"
                record_plugin_error(AGENT_GROUP, point, ValueError(problem))
            continue
        module, sep, attr = point.value.partition(":")
        if not (module and sep and attr):
            problem = "the entry point must be 'module:Class' or 'module:factory'"
            record_plugin_error(AGENT_GROUP, point, ValueError(problem))
            continue
        if point.name in targets and targets[point.name] != point.value:
            problem = f"agent name {point.name!r} is already taken by {targets[point.name]!r}"
            record_plugin_error(AGENT_GROUP, point, ValueError(problem))
            continue
        targets[point.name] = point.value
        if own:
            builtin.add(point.name)
    if not builtin:
        logger.warning(
            "no %s entry points of verigym itself are installed, so verigym's own agents are not "
            "registered; install verigym (pip install verigym, or pip install -e . in a checkout)",
            AGENT_GROUP,
        )
    return targets, frozenset(builtin)


_TABLE = _AgentTable()
AGENTS: Mapping[str, str] = _TABLE
"""Agent name -> ``"module:attr"``, verigym's own (``random``, ``oracle``, ``ppo``, ``sac``,
``dqn``, ``qlearning``, ``option-critic``, ``ippo``, ``llm``, ``openai``) and the plugins', read
from the ``verigym.agents`` entry points on first use. A new algorithm adds its entry point to
verigym's ``pyproject.toml`` (then ``pip install --no-deps -e .``)."""


def builtin_agents() -> frozenset[str]:
    """verigym's own agent names (a plugin cannot take one)."""
    return _TABLE.builtin()


def plugin_agents() -> dict[str, str]:
    """The plugin agents: name -> ``"module:attr"`` for the accepted ``verigym.agents`` entry
    points of other packages (the rejected ones are in ``verigym.registration.plugin_errors()``).

    Only the entry points' metadata is read; a plugin's module is imported when its agent is made.
    """
    own = builtin_agents()
    return {name: target for name, target in AGENTS.items() if name not in own}


def agent_class(name: str) -> Any:
    """The class (or, for a plugin, the class or factory) registered under ``name``.

    Raises:
        KeyError: unknown name (the message suggests close names and lists the registered ones,
            plugins included).
        ImportError / AttributeError: the registered module or attribute cannot be loaded (for a
            plugin's, whatever its import raised is an ``ImportError``, recorded in
            ``verigym.registration.plugin_errors()``).
    """
    try:
        module, attr = AGENTS[name].split(":")
    except KeyError:
        close = difflib.get_close_matches(name, list(AGENTS), n=3)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise KeyError(
            f"unknown agent {name!r}{hint}; registered agents: {', '.join(sorted(AGENTS))}"
        ) from None
    if name in builtin_agents():
        return getattr(importlib.import_module(module), attr)
    return _load_plugin_agent(name, module, attr)


def _load_plugin_agent(name: str, module: str, attr: str) -> Any:
    """A plugin agent's class or factory, loaded so that nothing its module raises (``SystemExit``,
    its own ``KeyboardInterrupt``) ends verigym: a failure is recorded like a broken env plugin
    (a warning, ``plugin_errors()``, ``verigym doctor``) and raised as ``ImportError``."""
    from verigym.registration import entry_points, record_plugin_error, run_plugin

    loaded, failure = run_plugin(lambda: getattr(importlib.import_module(module), attr))
    if failure is None:
        return loaded
    target = f"{module}:{attr}"
    point = next(
        (p for p in entry_points(AGENT_GROUP) if (p.name, p.value) == (name, target)),
        importlib.metadata.EntryPoint(name, target, AGENT_GROUP),
    )
    error = record_plugin_error(AGENT_GROUP, point, failure)
    raise ImportError(f"{error}; the agent cannot be made") from failure


def make(name: str, env: Any = None, **config: Any) -> Agent:
    """Build the agent registered as ``name`` (verigym's or a plugin's) for ``env`` with ``config``
    overrides.

    Args:
        name: a registered agent name (:data:`AGENTS`, plugins included).
        env: the env the agent acts in: an env, or an env id (``gym.make``, or PettingZoo's parallel
            API for a parallel game), for every agent. A class with ``from_env`` gets ``env`` as
            given; any other is built on ``make_env(env)``: an agent that reads the state of its env
            (``oracle``) is then bound to that instance (:func:`env_for`).
        **config: the agent's config fields.

    Raises:
        KeyError: unknown agent name.
        TypeError / ValueError: invalid config (from the agent's config dataclass).
        gymnasium.error.Error: ``env`` is an id that is not registered.
    """
    cls = agent_class(name)
    factory = getattr(cls, "from_env", None)
    if callable(factory):
        return factory(env, **config)
    if isinstance(env, str):
        from verigym.agents.common.vec import make_env

        env = make_env(env)
    return cls(env, **config)


def env_for(agent: Any, env: Any) -> Any:
    """The env to run ``agent`` on, given an env or an env id.

    Most agents act on observations alone and run on any env: ``env`` (made from its id when it
    is one). An agent with a ``bound_env`` attribute reads the state of that one env instance (the
    oracle calls its ``oracle_action()``); it runs on that instance (or a wrapper of it), and for an
    id it runs on its own env when that env is the id's registered task.

    Raises:
        ValueError: ``agent`` is bound to another env instance than ``env``.
    """
    bound = getattr(agent, "bound_env", None)
    if bound is None:
        from verigym.agents.common.vec import make_env

        return make_env(env)
    if isinstance(env, str):
        if _is_registered_task(bound, env):
            return bound
    elif getattr(env, "unwrapped", env) is getattr(bound, "unwrapped", bound):
        return env
    spec = getattr(bound, "spec", None)
    raise ValueError(
        f"this {type(agent).__name__} acts on one env instance ({spec.id if spec is not None else type(bound).__name__}) "
        f"and reads its state; it cannot play {env if isinstance(env, str) else type(env).__name__}: pass the env it was "
        "built for, or build the agent for this env (verigym.agents.make(name, env))"
    )


def _is_registered_task(env: Any, env_id: str) -> bool:
    """Whether ``env`` was made from ``env_id`` with the registered kwargs (so it is that task)."""
    import gymnasium as gym

    spec = getattr(env, "spec", None)
    if spec is None or spec.id != env_id:
        return False
    try:
        registered = gym.spec(env_id)
    except gym.error.Error:
        return False
    return dict(spec.kwargs) == dict(registered.kwargs)


def load(name: str, path: Any, *, device: str = "auto") -> Agent:
    """Load a saved agent of kind ``name`` from the directory ``path``."""
    return agent_class(name).load(path, device=device)
