"""Steps/s of ``verigym/DoorKey-8x8-v0`` against MiniGrid's ``MiniGrid-DoorKey-8x8-v0``, in one run.

Both envs are made with ``gymnasium.make`` (the same default wrappers) and stepped with the same
uniformly random actions (7 MiniGrid actions), resets included, partial egocentric 7x7 views on
both sides. Three settings: a single env; a ``gymnasium.vector.SyncVectorEnv`` of ``--num-envs``
copies on both sides (auto-reset); and verigym's per-env vector env, what the learners step for a
task without a batched engine (:class:`verigym.agents.common.vec.EnvPool`), against MiniGrid's
``SyncVectorEnv`` (MiniGrid has no batched runner of its own). Prints steps/s and the ratio verigym / MiniGrid; the target of
issue 5 is >= 10x.

The second table is the natively batched engine (:mod:`verigym.envs.grid.batched`, what
``gymnasium.make_vec("verigym/DoorKey-8x8-v0", num_envs=N)`` returns) at each ``--batch-sizes``
N, against MiniGrid per core (one MiniGrid env stepped in a loop: the steps/s one core gives
MiniGrid), MiniGrid under ``SyncVectorEnv`` of N copies, and verigym's per-env
``EnvPool`` of N copies; issue 32's targets at N=1024 are >= 100x MiniGrid per core and
>= 10x the per-env path. Everything runs in one process on one core. Needs the ``bench`` extra
(``pip install -e .[bench]``, which pulls minigrid).

Usage::

    python benchmarks/grid_doorkey.py [--steps 20000] [--num-envs 8] [--repeats 3]
        [--batch-sizes 1,64,1024] [--skip-classic]
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
    """Env steps per second of verigym's per-env ``EnvPool`` of ``num_envs`` DoorKey-8x8 envs."""
    from verigym.agents.common.vec import EnvPool

    return batched_rate(EnvPool.build(OURS, num_envs), steps)


def batched_engine_rate(steps: int, num_envs: int) -> float:
    """Env steps per second of the batched engine (``gymnasium.make_vec``) with ``num_envs``."""
    envs = gym.make_vec(OURS, num_envs=num_envs, vectorization_mode="vector_entry_point")
    return batched_rate(envs, max(steps, 8 * num_envs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs per cell")
    parser.add_argument(
        "--batch-sizes", default="1,64,1024", help="comma-separated N of the batched-engine table"
    )
    parser.add_argument("--skip-classic", action="store_true", help="only the batched-engine table")
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
    if not args.skip_classic:
        classic(args, ours, peer, n)
    batched_table(args, peer)


def batched_table(args: argparse.Namespace, peer: Callable[[], gym.Env]) -> None:
    """The batched engine against MiniGrid per core, MiniGrid SyncVectorEnv and EnvPool."""
    sizes = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    print()
    print(
        f"{'N':>5s} {'batched steps/s':>16s} {'MiniGrid 1 core':>16s} {'MiniGrid Sync xN':>17s} "
        f"{'EnvPool xN':>17s} {'vs MG core':>11s} {'vs MG Sync':>11s} {'vs EnvPool':>11s}"
    )
    for num_envs in sizes:
        a = core = sync = grid = 0.0
        for _ in range(args.repeats):  # interleaved, so that load hits every column alike
            a = max(a, batched_engine_rate(args.steps, num_envs))
            core = max(core, single_rate(peer, args.steps))
            sync = max(sync, vector_rate(peer, max(args.steps, 2 * num_envs), num_envs))
            grid = max(grid, native_rate(max(args.steps, 2 * num_envs), num_envs))
        print(
            f"{num_envs:5d} {a:16,.0f} {core:16,.0f} {sync:17,.0f} {grid:17,.0f} "
            f"{a / core:10.1f}x {a / sync:10.1f}x {a / grid:10.1f}x"
        )
    print("batched: verigym.envs.grid.batched via gymnasium.make_vec (one process, one core)")


def classic(
    args: argparse.Namespace, ours: Callable[[], gym.Env], peer: Callable[[], gym.Env], n: int
) -> None:
    """The first table: single env, SyncVectorEnv and EnvPool against MiniGrid."""
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
            f"EnvPool x{n} *",
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
    print("* verigym's per-env vector env against MiniGrid under SyncVectorEnv")


if __name__ == "__main__":
    main()
