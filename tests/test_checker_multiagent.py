"""The multi-agent checker (verigym/checker_multiagent.py): every registered PettingZoo id passes,
and each deliberately broken game below fails exactly the check that targets its defect."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

import verigym  # noqa: F401  (registers the ids)
from verigym.checker_multiagent import MULTIAGENT_CHECKS, check_multiagent_env
from verigym.cli import main
from verigym.core import EpisodeEndedError, action_error_info, episode_end
from verigym.envs.multiagent.pursuit import PursuitEnv
from verigym.envs.multiagent.spread import SpreadEnv
from verigym.envs.multiagent.tag import TagEnv
from verigym.registration import rows

MULTIAGENT_IDS = [r.id for r in rows("multiagent") if r.api in ("aec", "parallel")]


@pytest.mark.parametrize("env_id", MULTIAGENT_IDS)
def test_every_registered_multiagent_id_passes(env_id):
    report = check_multiagent_env(env_id, steps=60)
    assert [r.name for r in report.results] == list(MULTIAGENT_CHECKS)
    report.raise_for_failures()


class PenniesEnv(ParallelEnv):
    """Matching pennies for 3 rounds, a correct parallel game: ``even`` scores when the coins match.

    Observations ``Box(0, 3, (2,), int64)``: the round and the other agent's last coin (2: none).
    A malformed coin counts as heads (0) and sets ``infos[agent]["action_error"]``.
    """

    metadata = {
        "name": "pennies",
        "is_parallelizable": True,
        "render_modes": [],
        "family": "multiagent",
    }

    def __init__(self):
        self.possible_agents = ["even", "odd"]
        self.agents = []
        self.observation_spaces = {
            a: spaces.Box(0, 3, (2,), np.int64) for a in self.possible_agents
        }
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self.rng = np.random.default_rng()
        self.round = 0
        self.last = {a: 2 for a in self.possible_agents}

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _observe(self, agent):
        other = "odd" if agent == "even" else "even"
        return np.array([self.round, self.last[other]], dtype=np.int64)

    def _noise(self) -> int:
        return int(self.rng.integers(2))

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.round = 0
        self.last = {a: 2 for a in self.possible_agents}
        self.last["odd"] = self._noise()  # a seeded opening coin of odd
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def _coin(self, action, info):
        if (
            isinstance(action, (int, np.integer))
            and not isinstance(action, bool)
            and action in (0, 1)
        ):
            return int(action)
        huge = isinstance(action, int) and abs(action) > 10**100  # repr fails past 4300 digits
        shown = "an int too long to show" if huge else f"{action!r:.40}"
        action_error_info(f"a coin is 0 or 1, got {shown}; counted as 0", info)
        return 0

    def step(self, actions):
        if not self.agents:
            raise EpisodeEndedError("the game is over; call reset()")
        infos = {a: {} for a in self.agents}
        coins = {a: self._coin(actions[a], infos[a]) for a in self.agents}
        self.round += 1
        self.last = coins
        even_wins = coins["even"] == coins["odd"]
        rewards = {"even": 1.0 if even_wins else -1.0, "odd": -1.0 if even_wins else 1.0}
        done = self.round >= 3
        for a in self.agents:
            if done:
                episode_end(infos[a], success=rewards[a] > 0, score=float(rewards[a] > 0))
        observations = {a: self._observe(a) for a in self.agents}
        flags = {a: done for a in self.agents}
        if done:
            self.agents = []
        return observations, rewards, flags, dict.fromkeys(flags, False), infos

    def close(self):
        pass


class GlobalRandomPennies(PenniesEnv):
    """Draws the opening coin from Python's global ``random``: not reproducible from the seed."""

    def _noise(self) -> int:
        return random.randrange(2)


class LeakyPennies(PenniesEnv):
    """Reset keeps ``even``'s coin of the previous game: a replay after other play differs."""

    def reset(self, seed=None, options=None):
        kept = self.last["even"]
        result = super().reset(seed=seed, options=options)
        self.last["even"] = kept
        return {a: self._observe(a) for a in self.agents}, result[1]


class CrashingPennies(PenniesEnv):
    """Raises on a malformed coin instead of the documented penalty."""

    def _coin(self, action, info):
        if action not in (0, 1):
            raise ValueError(f"bad coin {action!r}")
        return int(action)


class SilentPennies(PenniesEnv):
    """Treats a malformed coin as heads without telling the agent (no ``action_error``)."""

    def _coin(self, action, info):
        return int(action) if isinstance(action, (int, np.integer)) and action in (0, 1) else 0


class EndlessPennies(PenniesEnv):
    """After the last round, ``step`` keeps paying rewards instead of asking for reset."""

    def step(self, actions):
        if not self.agents:
            return {}, {}, {}, {}, {}
        return super().step(actions)


class NoVerdictPennies(PenniesEnv):
    """Ends the game without ``success``/``score`` in the infos."""

    def step(self, actions):
        result = super().step(actions)
        for info in result[4].values():
            info.pop("success", None)
            info.pop("score", None)
        return result


class UnpicklablePennies(PenniesEnv):
    """Holds a lambda, so neither pickle nor the checker's copies work mid-game."""

    def reset(self, seed=None, options=None):
        self.hook = lambda: None
        return super().reset(seed=seed, options=options)


def _failed(env_class) -> set[str]:
    report = check_multiagent_env(
        env_class, steps=40, checks=[c for c in MULTIAGENT_CHECKS if c != "pettingzoo_api_test"]
    )
    return {r.name for r in report.failures}


def test_the_correct_game_passes():
    assert _failed(PenniesEnv) == set()


@pytest.mark.parametrize(
    ("env_class", "check"),
    [
        (GlobalRandomPennies, "determinism"),
        (LeakyPennies, "reset_leak"),
        (CrashingPennies, "malformed_actions"),
        (SilentPennies, "malformed_actions"),
        (EndlessPennies, "step_after_end"),
        (NoVerdictPennies, "episode_end"),
        (UnpicklablePennies, "pickle_deepcopy"),
    ],
)
def test_each_defect_is_caught_by_its_check(env_class, check):
    assert check in _failed(env_class)


def test_malformed_actions_reports_each_agent():
    report = check_multiagent_env(CrashingPennies, checks=["malformed_actions"])
    detail = report.failures[0].detail
    assert "even," in detail and "odd," in detail and "raised ValueError" in detail


def test_cli_checks_a_multiagent_id_and_the_family(capsys):
    assert main(["check", "verigym/TicTacToe-v0", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    assert (
        "verigym/TicTacToe-v0: PASS" in out
        and "pickle_deepcopy" in out
        and "1 passed, 0 failed" in out
    )
    assert main(["check", "--family", "multiagent", "--steps", "20"]) == 0
    out = capsys.readouterr().out
    views = [r.id for r in rows("multiagent") if r.api == "gymnasium"]
    assert all(f"{env_id}: PASS" in out for env_id in MULTIAGENT_IDS + views)
    assert f"{len(MULTIAGENT_IDS) + len(views)} passed, 0 failed" in out
    assert (
        main(["check", "verigym/Tag-v0", "--url", "http://127.0.0.1:1"]) == 2
    )  # remote checks are Gymnasium-only


@pytest.mark.parametrize("game", [PursuitEnv, SpreadEnv, TagEnv], ids=lambda cls: cls.__name__)
def test_the_aec_view_of_each_parallel_game_passes(game):
    check_multiagent_env(game.aec_env, steps=60).raise_for_failures()


def test_pettingzoos_plain_converter_steps_on_after_the_end():
    report = check_multiagent_env(lambda: parallel_to_aec(TagEnv()), checks=["step_after_end"])
    assert [r.name for r in report.failures] == ["step_after_end"]


def test_an_env_without_possible_agents_is_a_clear_make_failure():
    from pettingzoo.test.example_envs import generated_agents_parallel_v0

    report = check_multiagent_env(generated_agents_parallel_v0.env)
    assert [r.name for r in report.results] == ["make"] and "possible_agents" in report.results[
        0
    ].detail
