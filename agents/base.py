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

__all__ = ["AGENTS", "AGENT_GROUP", "Agent", "Learner", "agent_class", "load", "make", "plugin_agents"]

AGENT_GROUP = "verigym.agents"
"""Entry-point group of plugin agents: name -> ``"module:Class"`` or ``"module:factory"``."""


@runtime_checkable
class Agent(Protocol):
    """Anything that acts: ``reset`` at episode start, ``act`` on each observation."""

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False) -> Any: ...


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
                    record_plugin_error(AGENT_GROUP, point, ValueError(f"agent name {point.name!r} is verigym's own; choose another name"))
                continue
            module, sep, attr = point.value.partition(":")
            if not (module and sep and attr):
                record_plugin_error(AGENT_GROUP, point, ValueError("the entry point must be 'module:Class' or 'module:factory'"))
                continue
            if point.name in AGENTS and AGENTS[point.name] != point.value:
                record_plugin_error(AGENT_GROUP, point, ValueError(f"agent name {point.name!r} is already taken by {AGENTS[point.name]!r}"))
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
        raise KeyError(f"unknown agent {name!r}; registered agents: {', '.join(sorted(AGENTS))}") from None
    return getattr(importlib.import_module(module), attr)


def make(name: str, env: Any = None, **config: Any) -> Agent:
    """Build the agent registered as ``name`` (verigym's or a plugin's) for ``env`` with ``config``
    overrides.

    Raises:
        KeyError: unknown agent name.
        TypeError / ValueError: invalid config (from the agent's config dataclass).
    """
    cls = agent_class(name)
    factory = getattr(cls, "from_env", None)
    return factory(env, **config) if callable(factory) else cls(env, **config)


def load(name: str, path: Any, *, device: str = "auto") -> Agent:
    """Load a saved agent of kind ``name`` from the directory ``path``."""
    return agent_class(name).load(path, device=device)
