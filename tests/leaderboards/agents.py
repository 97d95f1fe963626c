"""Agent factories for the leaderboard tests (``tests.leaderboards.agents:<name>`` specs).

Some of them stand in for a misbehaving environment by wrapping the ``env`` they are given: the
runner steps that very object, so a wrapped ``step`` is what the runner sees.
"""

from __future__ import annotations

import os
import subprocess
import time

from verigym.agents.reference import RandomAgent


def bad_results(env):
    """A random agent on an env that misreports: NaN rewards on seeds = 1 (mod 3), an ``int``
    ``info["success"]`` on seeds = 2 (mod 3), honest results on the others."""
    step = env.step
    state = {"seed": 0}

    def bad_step(action):
        observation, reward, terminated, truncated, info = step(action)
        if state["seed"] % 3 == 1:
            reward = float("nan")
        elif state["seed"] % 3 == 2 and "success" in info:
            info = {**info, "success": int(info["success"])}
        return observation, reward, terminated, truncated, info

    env.step = bad_step
    agent = RandomAgent(env)
    reset = agent.reset

    def remember_seed(*, seed=None):
        state["seed"] = seed or 0
        reset(seed=seed)

    agent.reset = remember_seed
    return agent


class _FailsWhileAsked(RandomAgent):
    def act(self, obs, info=None, *, deterministic=False):
        if os.environ.get("VERIGYM_TEST_FAIL") == "1":
            raise RuntimeError("asked to fail")
        return super().act(obs, info, deterministic=deterministic)


def fails_while_asked(env):
    """Raises in ``act`` while ``VERIGYM_TEST_FAIL=1`` (an error row), plays randomly otherwise."""
    return _FailsWhileAsked(env)


class _SpawnsAndHangs(RandomAgent):
    def act(self, obs, info=None, *, deterministic=False):
        # a detached child, like the browser that Playwright starts in its own process group
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        folder = os.environ["VERIGYM_TEST_PIDS"]
        with open(os.path.join(folder, f"{os.getpid()}.pid"), "w") as handle:
            handle.write(f"{os.getpid()} {child.pid}")
        time.sleep(3600)
        return super().act(obs, info, deterministic=deterministic)


def spawns_and_hangs(env):
    """Starts a detached ``sleep`` and hangs: what a worker with a browser looks like mid-episode."""
    return _SpawnsAndHangs(env)


class _ExitsOnOddSeeds(RandomAgent):
    def reset(self, *, seed=None):
        if seed is not None and seed % 2:
            os._exit(3)  # the worker process dies mid-episode, as in a crash or an OOM kill
        super().reset(seed=seed)


def exits_on_odd_seeds(env):
    """Ends its whole process with exit code 3 on odd seeds; plays randomly on even ones."""
    return _ExitsOnOddSeeds(env)
