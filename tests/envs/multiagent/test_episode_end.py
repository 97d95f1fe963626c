"""The episode-end and joint-action contracts of the multi-agent family.

Parallel games check the *structure* of a joint action before they run (a dict with an entry for
each live agent and no unknown agents) and refuse to step a finished game; the *values* stay the
agent's output, judged with a penalty. Turn-based games and the Gymnasium seats refuse to step
after the game is over.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from pettingzoo.utils.conversions import parallel_to_aec

import verigym  # noqa: F401  (registers the ids)
from verigym.core import EpisodeEndedError
from verigym.envs.multiagent.base import ParallelGame
from verigym.envs.multiagent.pursuit import PursuitEnv
from verigym.envs.multiagent.spread import SpreadEnv
from verigym.envs.multiagent.tag import TagEnv
from verigym.envs.multiagent.tictactoe import TicTacToeEnv
from verigym.registration import make, rows

PARALLEL = [PursuitEnv, TagEnv, SpreadEnv]


def _sample(env) -> dict:
    return {a: env.action_space(a).sample() for a in env.agents}


def _play_to_the_end(env) -> int:
    steps = 0
    while env.agents:
        env.step(_sample(env))
        steps += 1
    return steps


def test_every_registered_parallel_game_is_a_parallel_game():
    """The contract lives in the shared base, so a new parallel game gets it without code."""
    for row in rows("multiagent"):
        if row.api == "parallel":
            assert isinstance(make(row.id), ParallelGame), row.id


@pytest.mark.parametrize("env_class", PARALLEL)
@pytest.mark.parametrize(
    "joint", [[0, 1, 2], 3, None, "up", (("predator_0", 1),), np.zeros(3)], ids=repr
)
def test_a_joint_action_that_is_not_a_mapping_is_a_clear_type_error(env_class, joint):
    env = env_class()
    env.reset(seed=0)
    with pytest.raises(TypeError, match=rf"joint action is a dict .* got {type(joint).__name__}"):
        env.step(joint)
    env.step(_sample(env))  # the refused call changed nothing: the game goes on


@pytest.mark.parametrize("env_class", PARALLEL)
def test_unknown_or_missing_agents_are_named(env_class):
    env = env_class()
    env.reset(seed=0)
    joint = _sample(env)
    with pytest.raises(ValueError, match=r"unknown agents \['ghost_7'\]"):
        env.step({**joint, "ghost_7": 0})
    first = env.agents[0]
    with pytest.raises(ValueError, match=rf"no entry for the live agents \['{first}'\]"):
        env.step({a: v for a, v in joint.items() if a != first})
    with pytest.raises(ValueError, match="no entry for the live agents"):
        env.step({})
    assert env.cycle == 0  # nothing was played by the refused calls
    env.step(joint)
    assert env.cycle == 1


@pytest.mark.parametrize("env_class", PARALLEL)
def test_a_finished_game_refuses_step_until_reset(env_class):
    env = env_class(max_cycles=5)
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step({})  # never reset
    env.reset(seed=3)
    assert 1 <= _play_to_the_end(env) <= 5
    for joint in ({}, {a: env.action_space(a).sample() for a in env.possible_agents}):
        with pytest.raises(EpisodeEndedError, match="call reset"):
            env.step(joint)
    with pytest.raises(ResetNeeded):  # Gymnasium's error type catches it too
        env.step({})
    env.reset(seed=4)
    env.step(_sample(env))


@pytest.mark.parametrize("env_class", PARALLEL)
def test_the_aec_view_of_a_parallel_game_still_plays_whole_games(env_class):
    env = parallel_to_aec(env_class(max_cycles=6))
    for seed in (0, 1):
        env.reset(seed=seed)
        for agent in env.agent_iter(100):
            _, _, terminated, truncated, _ = env.last()
            env.step(None if terminated or truncated else env.action_space(agent).sample())
        assert not env.agents


@pytest.mark.parametrize("env_id", [r.id for r in rows("multiagent") if r.api == "aec"])
def test_turn_based_game_refuses_step_after_everyone_stepped_out(env_id):
    env = make(env_id)
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step(0)  # never reset
    env.reset(seed=0)
    payoffs = {}
    for agent in env.agent_iter(500):
        _, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            payoffs[agent] = info["payoff"]
        env.step(None if terminated or truncated else int(np.flatnonzero(info["action_mask"])[0]))
    assert not env.agents and set(payoffs) == set(env.possible_agents)
    with pytest.raises(EpisodeEndedError, match="call reset"):
        env.step(0)
    env.reset(seed=1)
    env.step(int(np.flatnonzero(env.infos[env.agent_selection]["action_mask"])[0]))


def test_a_move_for_a_finished_agent_is_refused():
    """PettingZoo's rule: once an agent is done, only ``None`` steps it out; a move cannot change
    the finished game."""
    env = TicTacToeEnv()
    env.reset(seed=0)
    for move in (0, 3, 1, 4, 2):  # X wins on the top row
        env.step(move)
    assert env.terminations["player_1"]
    board = env.board_text()
    with pytest.raises(ValueError, match="only valid action is None"):
        env.step(8)
    assert env.board_text() == board


@pytest.mark.parametrize(
    "env_id", ["verigym/TicTacToe-Random-v0", "verigym/KuhnPoker-Equilibrium-v0"]
)
def test_gymnasium_seat_refuses_step_after_the_game(env_id):
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    while True:
        _, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        if terminated or truncated:
            break
    verdict = (info["success"], info["score"])
    with pytest.raises(EpisodeEndedError, match="call reset"):
        env.step(0)
    with pytest.raises(EpisodeEndedError):
        env.step(0)
    assert verdict == (info["success"], info["score"])
    env.reset(seed=1)
