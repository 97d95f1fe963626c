"""The Agent / Learner contract (docs/design.md section 4) and the agent registry.

Agents are registered by name with a lazy ``"module:Class"`` entry point; a class is built with
``cls.from_env(env, **config)`` when it has that classmethod, else ``cls(env, **config)``.

Third-party agents are plugins: a package declares each agent as an entry point of the group
``verigym.agents`` (:data:`AGENT_GROUP`) whose name is the agent name and whose value is a class
or a factory ``factory(env, **config) -> agent``, imported only when the agent is made::

    [project.entry-points."verigym.agents"]
    acme-greedy = "acme_agents.greedy:GreedyAgent"

:func:`plugin_agents` merges them into :data:`AGENTS` (a name verigym already uses, or a value
that is not ``"module:attr"``, is skipped with a warning and reported by ``verigym doctor``).
After that, ``verigym.agents.make("acme-greedy", env)`` and ``verigym eval --agent acme-greedy``
work like for verigym's own agents.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AGENTS",
    "AGENT_GROUP",
    "Agent",
    "Learner",
    "agent_class",
    "env_for",
    "load",
    "make",
    "plugin_agents",
]

AGENT_GROUP = "verigym.agents"
"""Entry-point group of plugin agents: name -> ``"module:Class"`` or ``"module:factory"``."""


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


AGENTS: dict[str, str] = {
    "random": "verigym.agents.reference:RandomAgent",
    "oracle": "verigym.agents.reference:OracleAgent",
    "ppo": "verigym.agents.ppo:PPO",
    "sac": "verigym.agents.sac:SAC",
    "dqn": "verigym.agents.dqn:DQN",
    "qlearning": "verigym.agents.qlearning:QLearning",
    "option-critic": "verigym.agents.option_critic:OptionCritic",
    "ippo": "verigym.agents.ippo:IPPO",
    "llm": "verigym.agents.llm.agent:LLMAgent",
    "openai": "verigym.agents.llm.openai_agent:OpenAIAgent",
}
"""Agent name -> ``"module:Class"``; a new algorithm adds its row here (plugins are merged in by
:func:`plugin_agents`)."""

BUILTIN_AGENTS: frozenset[str] = frozenset(AGENTS)
"""verigym's own agent names (a plugin cannot take one)."""

_PLUGINS_LOADED = False


def plugin_agents() -> dict[str, str]:
    """Merge the installed ``verigym.agents`` entry points into :data:`AGENTS` (once per process).

    Only the entry points' metadata is read; a plugin's module is imported when its agent is made.

    Returns:
        Plugin agent name -> ``"module:attr"``, for the plugins that were accepted.
    """
    global _PLUGINS_LOADED
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        from verigym.registration import entry_points, record_plugin_error

        for point in entry_points(AGENT_GROUP):
            if point.name in BUILTIN_AGENTS:
                if point.value != AGENTS[point.name]:
                    record_plugin_error(
                        AGENT_GROUP,
                        point,
                        ValueError(
                            f"agent name {point.name!r} is verigym's own; choose another name"
                        ),
                    )
                continue
            module, sep, attr = point.value.partition(":")
            if not (module and sep and attr):
                record_plugin_error(
                    AGENT_GROUP,
                    point,
                    ValueError("the entry point must be 'module:Class' or 'module:factory'"),
                )
                continue
            if point.name in AGENTS and AGENTS[point.name] != point.value:
                record_plugin_error(
                    AGENT_GROUP,
                    point,
                    ValueError(
                        f"agent name {point.name!r} is already taken by {AGENTS[point.name]!r}"
                    ),
                )
                continue
            AGENTS[point.name] = point.value
    return {name: target for name, target in AGENTS.items() if name not in BUILTIN_AGENTS}


def agent_class(name: str) -> Any:
    """The class (or, for a plugin, the class or factory) registered under ``name``.

    Raises:
        KeyError: unknown name (the message lists the registered ones, plugins included).
        ImportError / AttributeError: the registered module or attribute cannot be loaded.
    """
    plugin_agents()
    try:
        module, attr = AGENTS[name].split(":")
    except KeyError:
        raise KeyError(
            f"unknown agent {name!r}; registered agents: {', '.join(sorted(AGENTS))}"
        ) from None
    return getattr(importlib.import_module(module), attr)


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
