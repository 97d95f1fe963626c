"""Steps/s of ``verigym/DoorKey-8x8-v0`` against MiniGrid's ``MiniGrid-DoorKey-8x8-v0``, in one run.

Both envs are made with ``gymnasium.make`` (the same default wrappers) and stepped with the same
uniformly random actions (7 MiniGrid actions), resets included, partial egocentric 7x7 views on
both sides. Three settings: a single env; a ``gymnasium.vector.SyncVectorEnv`` of ``--num-envs``
copies on both sides (auto-reset); and verigym's own batched runner
(:class:`verigym.envs.grid.vector.GridVectorEnv`) against MiniGrid's ``SyncVectorEnv`` (MiniGrid
has no batched runner of its own). Prints steps/s and the ratio verigym / MiniGrid; the target of
issue 5 is >= 10x. Needs the ``bench`` extra (``pip install -e .[bench]``, which pulls minigrid).

Usage::

    python benchmarks/grid_doorkey.py [--steps 20000] [--num-envs 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import verigym  # noqa: F401  (registers the verigym ids)

OURS, PEER = "verigym/DoorKey-8x8-v0", "MiniGrid-DoorKey-8x8-v0"


def single_rate(make: Callable[[], gym.Env], steps: int, seed: int = 0) -> float:
    """Steps per second of one env under random actions (resets included)."""
    env = make()
    actions = np.random.default_rng(seed).integers(0, 7, size=steps).tolist()
    env.reset(seed=seed)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def batched_rate(envs: gym.vector.VectorEnv, steps: int, seed: int = 0) -> float:
    """Env steps per second of a vector env under random actions (auto-reset); closes it."""
    batches = max(1, steps // envs.num_envs)
    actions = np.random.default_rng(seed).integers(0, 7, size=(batches, envs.num_envs))
    envs.reset(seed=seed)
    start = time.perf_counter()
    for batch in actions:
        envs.step(batch)
    elapsed = time.perf_counter() - start
    envs.close()
    return batches * envs.num_envs / elapsed


def vector_rate(make: Callable[[], gym.Env], steps: int, num_envs: int) -> float:
    """Env steps per second of a ``SyncVectorEnv`` of ``num_envs`` copies."""
    return batched_rate(gym.vector.SyncVectorEnv([make for _ in range(num_envs)]), steps)


def native_rate(steps: int, num_envs: int) -> float:
    """Env steps per second of verigym's ``GridVectorEnv`` with ``num_envs`` DoorKey-8x8 envs."""
    from verigym.envs.grid.vector import GridVectorEnv

    return batched_rate(GridVectorEnv(OURS, num_envs=num_envs), steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs per cell")
    args = parser.parse_args()
    try:
        import minigrid  # noqa: F401  (registers the MiniGrid ids)
    except ImportError:
        raise SystemExit("minigrid is not installed: pip install -e .[bench]") from None

    def ours() -> gym.Env:
        return gym.make(OURS)

    def peer() -> gym.Env:
        return gym.make(PEER)

    n = args.num_envs
    settings = (
        (
            "single env",
            lambda: single_rate(ours, args.steps),
            lambda: single_rate(peer, args.steps),
        ),
        (
            f"SyncVectorEnv x{n}",
            lambda: vector_rate(ours, args.steps, n),
            lambda: vector_rate(peer, args.steps, n),
        ),
        (
            f"GridVectorEnv x{n} *",
            lambda: native_rate(args.steps, n),
            lambda: vector_rate(peer, args.steps, n),
        ),
    )
    print(f"{'setting':22s} {OURS + ' steps/s':>34s} {PEER + ' steps/s':>36s} {'ratio':>7s}")
    for label, measure_ours, measure_peer in settings:
        # interleave the two sides so machine load hits both alike; keep the best run of each
        a = b = 0.0
        for _ in range(args.repeats):
            a = max(a, measure_ours())
            b = max(b, measure_peer())
        print(f"{label:22s} {a:34,.0f} {b:36,.0f} {a / b:6.1f}x")
    print("* verigym's batched runner against MiniGrid under SyncVectorEnv")


if __name__ == "__main__":
    main()
