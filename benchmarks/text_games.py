"""Steps/s of verigym's own multi-turn text games (no peer runs these exact games).

Each game is stepped ``--steps`` times through ``gymnasium.make`` at the medium level, resets
included. Half of the replies are the oracle's move and half are random short strings (the mix
``verigym check`` uses), all prepared before the clock starts so that only ``step``/``reset`` are
timed: parsing, rules, feedback text, ``info["action_candidates"]``.

Usage::

    python benchmarks/text_games.py [--steps 10000]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import verigym  # noqa: F401  (registers the verigym ids)

GAMES = (
    "Wordle",
    "Mastermind",
    "Hangman",
    "Minesweeper",
    "Countdown",
    "TwentyQuestions",
    "Household",
    "Shop",
)


def rate(env_id: str, steps: int, seed: int = 0) -> float:
    """Steps per second; the replies are recorded in a first pass and replayed under the clock."""
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    replies, episode_seeds = [], []
    env.reset(seed=seed)
    episode = 0
    for _ in range(steps):
        reply = env.unwrapped.oracle_action() if rng.random() < 0.5 else env.action_space.sample()
        replies.append(reply)
        _, _, terminated, truncated, _ = env.step(reply)
        if terminated or truncated:
            episode += 1
            episode_seeds.append(len(replies))
            env.reset(seed=seed + episode)
    ends = set(episode_seeds)
    env.reset(seed=seed)
    episode = 0
    start = time.perf_counter()
    for index, reply in enumerate(replies, start=1):
        env.step(reply)
        if index in ends:
            episode += 1
            env.reset(seed=seed + episode)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    print(f"{'env':32s} {'steps/s':>10s}")
    for game in GAMES:
        env_id = f"verigym/{game}-Medium-v0"
        print(f"{env_id:32s} {rate(env_id, args.steps):10.0f}")


if __name__ == "__main__":
    main()
