"""Grid tasks: oracle solvability per variant, SPL verdicts, determinism, both views, agents."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import verigym
from verigym.agents import make as make_agent
from verigym.envs.grid.engine import AGENT, COLOR_NAMES, OBJECT_NAMES, GridEnv
from verigym.wrappers import LanguageWrapper

GRID_IDS = [r.id for r in verigym.rows("grid") if "Treasure" not in r.id]
STOCHASTIC = {"verigym/IceLake-4x4-v0", "verigym/IceLake-8x8-v0"}
DETERMINISTIC = [i for i in GRID_IDS if i not in STOCHASTIC]
HEAVY_ORACLE = {
    "verigym/Sokoban-8x8-B3-v0": 20
}  # BFS solver ~0.2 s a level; 1,000 seeds in the slow run


def _play_oracle(env: GridEnv, seed: int) -> tuple[dict, int]:
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        steps += 1
        done = terminated or truncated
    return info, steps


def _check_oracle(env_id: str, seeds: range) -> None:
    env = gym.make(env_id).unwrapped
    failures = []
    for seed in seeds:
        info, steps = _play_oracle(env, seed)
        if not (info["success"] and info["score"] == 1.0 and steps == info["optimal_steps"]):
            failures.append((seed, steps, info.get("optimal_steps"), info["success"]))
    assert not failures, (
        f"{env_id}: oracle failed on (seed, steps, optimal, success) {failures[:5]}"
    )


@pytest.mark.parametrize("env_id", DETERMINISTIC)
def test_oracle_solves_200_seeds_optimally(env_id):
    """Every generated task is solved, in exactly ``optimal_steps`` steps, with score 1."""
    _check_oracle(env_id, range(HEAVY_ORACLE.get(env_id, 200)))


@pytest.mark.slow
@pytest.mark.parametrize("env_id", DETERMINISTIC)
def test_oracle_solves_1000_seeds_optimally(env_id):
    _check_oracle(env_id, range(1000))


@pytest.mark.parametrize(
    "seeds", [range(200), pytest.param(range(1000), marks=pytest.mark.slow)], ids=["200", "1000"]
)
def test_sokoban_reverse_play_witness_solves_every_level(seeds):
    """The reversed generator play solves each level through the real dynamics (cheap, all variants)."""
    for env_id in [i for i in GRID_IDS if "Sokoban" in i]:
        env = gym.make(env_id).unwrapped
        for seed in seeds:
            env.reset(seed=seed)
            env._optimal = len(env._witness)  # an upper bound; skips the BFS solver at the end
            info: dict = {}
            for action in env._witness:
                *_, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            assert info.get("success"), (
                f"{env_id} seed {seed}: the witness plan did not solve the level"
            )


@pytest.mark.parametrize("env_id", sorted(STOCHASTIC))
@pytest.mark.parametrize("num_seeds", [200, pytest.param(1000, marks=pytest.mark.slow)])
def test_icelake_is_solvable_and_oracle_matches_its_success_probability(env_id, num_seeds):
    env = gym.make(env_id).unwrapped
    successes, predicted = [], []
    for seed in range(num_seeds):
        env.reset(seed=seed)
        # solvable: a hole-free path from start to goal exists (the slip-free optimum)
        assert env.optimal_steps >= env.size, f"seed {seed}: no path"
        info, _ = _play_oracle(env, seed)
        successes.append(info["success"])
        predicted.append(info["oracle_success_probability"])
        assert info["score"] == float(info["success"])
    # the empirical success rate agrees with value iteration (binomial standard error ~0.035)
    assert abs(np.mean(successes) - np.mean(predicted)) < 4 * 0.5 / np.sqrt(num_seeds)
    assert np.mean(successes) > 0.4


def test_icelake_without_slip_is_deterministic_and_scored_by_spl():
    env = gym.make("verigym/IceLake-8x8-v0", slip=0.0).unwrapped
    for seed in range(20):
        info, steps = _play_oracle(env, seed)
        assert info["success"] and info["score"] == 1.0 and steps == info["optimal_steps"]


def test_failure_verdicts_lava_and_truncation():
    env = gym.make("verigym/LavaCrossing-S9N1-v0", observation="full").unwrapped
    env.reset(seed=0)
    lava = np.argwhere(env.grid.cells[..., 0] == 9)[0]
    env.agent_pos, env.agent_dir = (int(lava[0]), int(lava[1]) - 1), 0
    if (
        env.grid.cells[env.agent_pos][0] != 1
    ):  # west neighbour is a wall or lava: come from the north
        env.agent_pos, env.agent_dir = (int(lava[0]) - 1, int(lava[1])), 1
    *_, terminated, truncated, info = env.step(2)
    assert terminated and info["success"] is False and info["score"] == 0.0
    env = gym.make("verigym/DoorKey-5x5-v0", max_steps=3).unwrapped
    env.reset(seed=0)
    for _ in range(3):
        *_, terminated, truncated, info = env.step(0)  # turning in place never wins
    assert truncated and not terminated and info["success"] is False and info["score"] == 0.0


def test_spl_score_penalizes_detours():
    env = gym.make("verigym/Empty-8x8-v0").unwrapped
    env.reset(seed=3)
    optimal = env.optimal_steps
    env.step(0)  # two wasted turns
    env.step(1)
    info: dict = {}
    terminated = False
    while not terminated:
        *_, terminated, _, info = env.step(env.oracle_action())
    assert info["success"] and info["score"] == pytest.approx(optimal / (optimal + 2))


def test_coverage_rewards_diminish_on_revisits():
    env = gym.make("verigym/Coverage-6x6-v0", obstacle_density=0.0).unwrapped
    env.reset(seed=0)
    env.agent_pos = (2, 2)
    env.grid.cells[2, 2] = (3, 0, 1)
    first = env.step(1)[1]  # right: a new cell
    back = env.step(3)[1]  # left: the start cell again (visited once)
    again = env.step(1)[1]  # right: visited once
    assert (
        first == pytest.approx(1 / 16)
        and back == pytest.approx(0.5 / 16)
        and again == pytest.approx(0.5 / 16)
    )
    info, _ = _play_oracle(env, 1)
    assert info["success"] and info["covered"] == 1.0


def test_coverage_oscillation_keeps_decaying_past_the_shown_visit_count():
    """The cell shows at most 3 visits; the reward must keep decaying past that (it stayed at
    decay**3 / num_free, so oscillating between two cells out-earned covering the grid)."""
    env = gym.make("verigym/Coverage-6x6-v0", obstacle_density=0.0).unwrapped
    env.reset(seed=0)
    env.agent_pos = (2, 2)
    env.grid.cells[2, 2] = (3, 0, 1)
    rewards = [env.step(1 if i % 2 == 0 else 3)[1] for i in range(20)]
    assert rewards[:2] == pytest.approx([1 / 16, 0.5 / 16])
    entered_right = rewards[0::2]  # (2, 3): 0, 1, 2, ... visits before
    assert entered_right == pytest.approx([0.5**k / 16 for k in range(10)])
    assert sum(rewards) <= 2 / 16 / (1 - env.decay)  # the documented bound: 2 cells covered


def test_goto_mission_names_the_target():
    env = gym.make("verigym/GoToObject-8x8-N4-v0").unwrapped
    missions = set()
    for seed in range(20):
        _, info = env.reset(seed=seed)
        kind, color = env.target
        assert info["mission"] == f"go to the {COLOR_NAMES[color]} {OBJECT_NAMES[kind]}"
        missions.add(info["mission"])
    assert len(missions) > 5


@pytest.mark.parametrize(
    "env_id", ["verigym/DoorKey-8x8-v0", "verigym/Sokoban-7x7-B2-v0", "verigym/KeyCorridor-S3R1-v0"]
)
def test_same_seed_same_task_in_both_observation_modes(env_id):
    full = gym.make(env_id, observation="full").unwrapped
    partial = gym.make(env_id, observation="partial").unwrapped
    a, _ = full.reset(seed=11)
    partial.reset(seed=11)
    assert (
        np.array_equal(full.grid.cells, partial.grid.cells) and full.agent_pos == partial.agent_pos
    )
    b, _ = full.reset(seed=11)
    assert np.array_equal(a, b)
    c, _ = full.reset(seed=12)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(
    "env_id",
    ["verigym/DoorKey-6x6-v0", "verigym/Sokoban-6x6-B1-v0", "verigym/GoToObject-6x6-N2-v0"],
)
def test_oracle_wins_through_the_text_view(env_id):
    """An agent that answers in words (the oracle's action names) wins through LanguageWrapper."""
    env = LanguageWrapper(gym.make(env_id))
    text, info = env.reset(seed=5)
    assert "Mission:" in text and "Legend" in info["instructions"]
    inner = env.unwrapped
    terminated = truncated = False
    while not (terminated or truncated):
        reply = f"I think the best move is: {inner.action_text(inner.oracle_action())}"
        text, reward, terminated, truncated, info = env.step(reply)
        assert isinstance(text, str)
    assert info["success"] and reward > 0


def test_random_agent_acts_through_the_tensor_view_with_masks():
    for env_id in GRID_IDS:
        env = gym.make(env_id)
        agent = make_agent("random", env, seed=0)
        obs, info = env.reset(seed=0)
        for _ in range(30):
            action = agent.act(obs, info)
            assert info["action_mask"][action] == 1
            obs, reward, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(obs) and np.isfinite(reward)
            if terminated or truncated:
                obs, info = env.reset()


def test_tabular_q_learning_solves_empty_5x5_from_the_full_view():
    """A classic agent learns from the tensor view: success >= 0.9 within 4,000 steps."""
    env = gym.make("verigym/Empty-5x5-v0", observation="full")
    rng = np.random.default_rng(0)
    q: dict[bytes, np.ndarray] = {}
    obs, _ = env.reset(seed=0)
    episode = 0
    for _ in range(4000):
        key = obs.tobytes()
        values = q.setdefault(key, np.zeros(3))
        action = int(rng.integers(3)) if rng.random() < 0.2 else int(np.argmax(values))
        obs, reward, terminated, truncated, _ = env.step(action)
        target = reward + (
            0.0 if terminated else 0.95 * q.setdefault(obs.tobytes(), np.zeros(3)).max()
        )
        values[action] += 0.5 * (target - values[action])
        if terminated or truncated:
            episode += 1
            obs, _ = env.reset(seed=episode % 50)
    wins = 0
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        for _ in range(20):
            obs, _, terminated, truncated, info = env.step(
                int(np.argmax(q.get(obs.tobytes(), np.zeros(3))))
            )
            if terminated or truncated:
                break
        wins += bool(terminated and info["success"])
    assert wins / 50 >= 0.9
    assert (obs[..., 0] == AGENT).sum() == 1


def test_sokoban_solver_on_a_hand_written_level():
    from verigym.envs.grid.sokoban import solve_sokoban

    rows = ["######", "#    #", "# $. #", "#@   #", "######"]  # one crate, one target
    walls = np.array([[ch == "#" for ch in row] for row in rows])
    width = len(rows[0])
    plan = solve_sokoban(
        walls, frozenset({2 * width + 2}), frozenset({2 * width + 3}), 3 * width + 1
    )
    assert plan == [0, 1]  # up (to the crate's left), right (push it onto the target)
    corner = solve_sokoban(
        walls, frozenset({1 * width + 1}), frozenset({2 * width + 3}), 3 * width + 1
    )
    assert corner is None  # a crate in a corner is dead
