"""Small deliberately broken envs; ``verigym check`` must catch each (tests/test_checker.py)."""

from __future__ import annotations

import random
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import EpisodeGuard, UnicodeText, action_error_info, episode_end

_LEAK: list[int] = []


class KeepsGoingEnv(gym.Env):
    """Say the number shown; 5 turns -- but ``step`` keeps playing after the episode ended (a second
    terminal reward, a verdict that changes). :class:`CountdownTextEnv` is the correct version."""

    metadata = {"render_modes": [], "family": "text"}

    def __init__(self):
        self.observation_space = UnicodeText(128)
        self.action_space = UnicodeText(64)
        self._target = 0
        self._turn = 0

    def _draw(self) -> int:
        return int(self.np_random.integers(0, 1000))

    def _obs(self) -> str:
        return f"say {self._target}"

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = self._draw()
        self._turn = 0
        return self._obs(), {}

    def _parse(self, action: str) -> int:
        if len(action) > 64 or not action.strip().isdigit():
            raise ValueError("reply with digits only")
        return int(action.strip())

    def step(self, action):
        self._turn += 1
        info = {}
        try:
            correct = self._parse(action) == self._target
        except ValueError as exc:
            action_error_info(str(exc), info)
            correct = False
        terminated = correct
        truncated = not terminated and self._turn >= 5
        if terminated or truncated:
            episode_end(info, success=correct, score=float(correct))
        self._target = self._draw()
        return self._obs(), float(correct), terminated, truncated, info


class CountdownTextEnv(EpisodeGuard, KeepsGoingEnv):
    """A correct baseline: the same game, ended episodes refuse ``step`` until ``reset``
    (:class:`verigym.core.EpisodeGuard`). Subclasses break one rule each."""


class CrashesAfterEndEnv(KeepsGoingEnv):
    """Fails after the end with an error from inside (``KeyError``), not one saying to reset."""

    def reset(self, *, seed=None, options=None):
        self._state = {"target": 0}
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._state["target"]  # noqa: B018  (the crash: a KeyError once the episode ended)
        result = super().step(action)
        if result[2] or result[3]:
            self._state.clear()
        return result


class ForgetsEndOnCopyEnv(CountdownTextEnv):
    """Refuses ``step`` after the end, but its pickled and deep copies forget that the episode ended."""

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_episode_over", None)
        return state


class IgnoresSeedEnv(CountdownTextEnv):
    """Draws from the global ``random`` module instead of ``self.np_random``."""

    def _draw(self) -> int:
        return random.randrange(1000)


class FixedTaskEnv(CountdownTextEnv):
    """Seeded but deterministic in a way that ignores the seed: every reset poses the same numbers."""

    def _draw(self) -> int:
        return (37 * self._turn + 11) % 1000


class CrashesOnBadTextEnv(CountdownTextEnv):
    """Reads the first word without checking there is one (IndexError on empty text)."""

    def _parse(self, action: str) -> int:
        first = action.split()[0]
        return int(first) if first.isdigit() else -1


class OutOfSpaceEnv(CountdownTextEnv):
    """Returns an observation longer than its space allows."""

    def _obs(self) -> str:
        return "say " + "x" * 200


class LeaksStateEnv(CountdownTextEnv):
    """Keeps a history across resets that changes the next task."""

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed)
        _LEAK.append(self._target)
        self._target = (self._target + len(_LEAK)) % 1000
        return self._obs(), info


class NoVerdictEnv(CountdownTextEnv):
    """Ends episodes without ``info["success"]``/``info["score"]``."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        info.pop("success", None)
        info.pop("score", None)
        return observation, reward, terminated, truncated, info


class BoxCrashEnv(gym.Env):
    """A tensor env that passes NaN actions through to its state (obs leaves its space)."""

    metadata = {"render_modes": [], "family": "mujoco"}

    def __init__(self):
        self.observation_space = spaces.Box(-10.0, 10.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self._x = np.zeros(2, dtype=np.float32)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._x = self.np_random.uniform(-1, 1, size=2).astype(np.float32)
        self._t = 0
        return self._x.copy(), {}

    def step(self, action):
        self._t += 1
        self._x = np.clip(self._x + np.asarray(action, dtype=np.float32).reshape(2) * 0.1, -10, 10)
        done = self._t >= 20
        info = episode_end({}, success=False, score=0.0) if done else {}
        return self._x.copy(), 0.0, False, done, info


class HangsInStepEnv(CountdownTextEnv):
    """From the third step of an episode on, ``step`` never returns (a stuck verifier or server)."""

    def step(self, action):
        if self._turn >= 2:
            while True:
                time.sleep(0.05)
        return super().step(action)


class LoneSurrogateEnv(CountdownTextEnv):
    """Shows a name it decoded with ``surrogateescape`` (as ``os.listdir`` does for a file name that
    is not UTF-8): the observation holds a lone surrogate, ``"\\udcff"``, that no tokenizer, UTF-8
    JSON or wire can carry."""

    def _obs(self) -> str:
        name = b"notes-\xff.txt".decode("utf-8", "surrogateescape")
        return f"say {self._target} (from {name})"


class SegfaultEnv(gym.Env):
    """A native crash on demand: ``step("segfault")`` reads address 0 (SIGSEGV, the whole process
    dies), ``step("bad")`` raises ``ValueError``; any other reply ends the episode. For
    ``serve-env --isolate`` (tests/serve/test_env_server_strangers.py)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {"pid": __import__("os").getpid()}

    def step(self, action):
        if action == "segfault":
            import ctypes

            ctypes.string_at(0)
        if action == "bad":
            raise ValueError("SegfaultEnv takes no 'bad' action")
        return "done", 1.0, True, False, episode_end({}, success=True, score=1.0)
