"""A parallel game whose agent set stays fixed until the game is over ("black death").

SuperSuit's vector wrappers (``pettingzoo_env_to_vec_env_v1``), and so SB3 through them, need every
agent present on every step; in games where agents drop out (Tag: a tagged runner is out)
SuperSuit asks for its ``black_death_v3`` wrapper, whose episode end in SuperSuit 3.11.0 is
``all(terminations & truncations)``, never true for a game that terminates *or* truncates its agents
(fixed upstream in Farama-Foundation/SuperSuit PR #265, not released yet). :class:`FixedAgents` is
the same idea done right for verigym's parallel games::

    import supersuit as ss
    from verigym.envs.multiagent.fixed_agents import FixedAgents
    from verigym.registration import make

    vec = ss.pettingzoo_env_to_vec_env_v1(FixedAgents(make("verigym/Tag-v0")))
    vec = ss.concat_vec_envs_v1(vec, 4, num_cpus=0, base_class="stable_baselines3")
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces
from pettingzoo import ParallelEnv

from verigym.core import EpisodeEndedError

__all__ = ["FixedAgents"]


class FixedAgents(ParallelEnv):
    """Keep every agent of a parallel game in ``agents`` until the whole game is over.

    An agent whose episode ended stays in the game as a spectator: its observation is its last
    one, repeated (always in its space), its reward 0, its info ``{}``, and its
    ``terminated``/``truncated`` flags stay ``False``; its action entries are ignored (any value,
    malformed included). The step on which it actually finished is passed through unchanged (its
    last observation, reward and the info with ``success``/``score``), except for its flags. When no
    agent of the wrapped game is live any more, every agent gets its own final flags on that step
    (an agent tagged out earlier: ``terminated=True``, with its verdict info again) and the game is
    over; ``step`` then raises :class:`verigym.core.EpisodeEndedError` until ``reset``.

    Args:
        env: a PettingZoo ``ParallelEnv``.

    Raises:
        TypeError: ``env`` is not a ``ParallelEnv``.
    """

    def __init__(self, env: ParallelEnv):
        if not isinstance(env, ParallelEnv):
            raise TypeError(f"FixedAgents wraps a PettingZoo ParallelEnv, got {type(env).__name__}")
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        self.metadata = dict(getattr(env, "metadata", {}))
        self.render_mode = getattr(env, "render_mode", None)
        self._final: dict[str, tuple[bool, bool, dict[str, Any]]] = {}
        self._last: dict[str, Any] = {}

    @property
    def unwrapped(self) -> ParallelEnv:
        return self.env.unwrapped

    def observation_space(self, agent: str) -> spaces.Space:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self.env.action_space(agent)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        self._final = {}
        self._last = dict(observations)
        return dict(observations), {a: infos.get(a, {}) for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise EpisodeEndedError("the game is over (or was never reset); call reset()")
        if not isinstance(actions, dict):
            raise TypeError(
                f"a joint action is a dict mapping each agent {self.agents} to its action, got {type(actions).__name__}"
            )
        live = list(self.env.agents)
        observations, rewards, terminations, truncations, infos = self.env.step(
            {a: actions.get(a) for a in live}
        )
        self._last.update(observations)
        for agent in observations:
            if terminations.get(agent) or truncations.get(agent):
                self._final[agent] = (
                    bool(terminations.get(agent)),
                    bool(truncations.get(agent)),
                    dict(infos.get(agent, {})),
                )
        over = not self.env.agents
        out: tuple[dict, dict, dict, dict, dict] = ({}, {}, {}, {}, {})
        for agent in self.agents:
            terminated, truncated, final_info = self._final.get(agent, (False, False, {}))
            out[0][agent] = self._last[agent]
            out[1][agent] = float(rewards.get(agent, 0.0))
            out[2][agent] = terminated and over
            out[3][agent] = truncated and over
            out[4][agent] = infos.get(agent, final_info if over else {})
        if over:
            self.agents = []
        return out

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        """Close the wrapped game (safe to call twice when it is)."""
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)
