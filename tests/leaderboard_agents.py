"""Agent factories for the leaderboard tests (``tests.leaderboard_agents:<name>`` specs)."""

from __future__ import annotations

import time

from verigym.agents.reference import RandomAgent


class _Slow(RandomAgent):
    def act(self, obs, info=None, *, deterministic=False):
        time.sleep(0.02)
        return super().act(obs, info, deterministic=deterministic)


class _HangsOnSomeSeeds(RandomAgent):
    def reset(self, *, seed=None):
        super().reset(seed=seed)
        self.hang = seed is not None and seed % 5 == 0

    def act(self, obs, info=None, *, deterministic=False):
        if self.hang:
            time.sleep(3600)
        return super().act(obs, info, deterministic=deterministic)


def slow_random(env):
    return _Slow(env)


def hangs(env):
    return _HangsOnSomeSeeds(env)


class _ThinksThreeSeconds(RandomAgent):
    def act(self, obs, info=None, *, deterministic=False):
        if not getattr(self, "thought", False):
            time.sleep(3.0)
            self.thought = True
        return super().act(obs, info, deterministic=deterministic)


def thinks_3s(env):
    return _ThinksThreeSeconds(env)
