"""Runner throughput: episodes/s with 1 and 2 workers (scaling ratio), and the runner's overhead
per episode against stepping the same episodes in a bare loop in one process.

Run: python benchmarks/leaderboard_runner.py [--episodes N]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import gymnasium as gym

import verigym  # noqa: F401
from verigym.agents.reference import RandomAgent
from verigym.leaderboards.episode import run_episode
from verigym.leaderboards.runner import evaluate
from verigym.leaderboards.suite import Suite, Task

ENV_ID = "verigym/Treasure-7x7-v0"


def bare_loop(episodes: int) -> float:
    env = gym.make(ENV_ID)
    agent = RandomAgent(env)
    start = time.perf_counter()
    for i in range(episodes):
        run_episode(agent, env, 1_000_000 + i)
    return time.perf_counter() - start


def runner(episodes: int, workers: int) -> float:
    suite = Suite("bench", (Task(ENV_ID, episodes=episodes),))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        evaluate("random", suite, out=out, workers=workers, progress=False)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=400)
    n = parser.parse_args().episodes
    bare = bare_loop(n)
    one, two = runner(n, 1), runner(n, 2)
    print(f"{n} episodes of {ENV_ID} with a random agent")
    print(f"bare loop, 1 process:  {n / bare:8.1f} episodes/s")
    print(
        f"runner, 1 worker:      {n / one:8.1f} episodes/s (includes worker start-up and one SQLite commit per episode)"
    )
    print(f"runner, 2 workers:     {n / two:8.1f} episodes/s")
    print(f"scaling ratio 2 workers / 1 worker: {one / two:.2f}")
    print(
        f"runner overhead per episode vs bare loop (1 worker): {(one - bare) / n * 1000:.2f} ms ({one / bare:.2f}x the bare time)"
    )


if __name__ == "__main__":
    main()
