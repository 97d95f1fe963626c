"""The Agent / Learner contract (DESIGN.md section 4) and the agent registry.

Agents are registered by name with a lazy ``"module:Class"`` entry point; a class is built with
``cls.from_env(env, **config)`` when it has that classmethod, else ``cls(env, **config)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["AGENTS", "Agent", "Learner", "agent_class", "load", "make"]


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
"""Agent name -> ``"module:Class"``; a new algorithm adds its row here."""


def agent_class(name: str) -> type:
    """The class registered under ``name``.

    Raises:
        KeyError: unknown name (the message lists the registered ones).
    """
    try:
        module, attr = AGENTS[name].split(":")
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; registered agents: {', '.join(sorted(AGENTS))}") from None
    return getattr(importlib.import_module(module), attr)


def make(name: str, env: Any = None, **config: Any) -> Agent:
    """Build the agent registered as ``name`` for ``env`` with ``config`` overrides.

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
