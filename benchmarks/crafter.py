"""Step speed of ``verigym/Crafter-v0`` side by side with upstream's ``crafter.Env`` in one run.

Both sides play the same worlds (upstream's ``crafter.Env(seed=world_seed)`` for the world seed
verigym's reset draws) with the same random actions, in chunks of ``--chunk`` steps that
alternate between the sides so both see the same machine load; an episode that ends (death) is
restarted on the next world. Steps are timed, resets are not (world generation is upstream's
code on both sides, memoized per seed on verigym's). ``--repeats`` rounds; the median round's
ratio ``verigym steps/s / crafter steps/s`` is printed with the spread (issue 39's target:
>= 0.9x).

Usage::

    python benchmarks/crafter.py [--steps 2000] [--chunk 250] [--repeats 3]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

# this file is named crafter.py: its folder, first on sys.path, would shadow the crafter package
sys.path = [
    p for p in sys.path if pathlib.Path(p or ".").resolve() != pathlib.Path(__file__).parent
]

import crafter  # noqa: E402
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import verigym  # noqa: E402, F401  (registers the ids)


def _side(make, steps: int, chunk: int, actions: np.ndarray):
    """A generator that plays ``chunk`` steps per ``next()`` and yields the seconds they took."""
    env, world = make(0)
    done_steps = 0
    while done_steps < steps:
        total = 0.0
        for _ in range(chunk):
            action = int(actions[done_steps % len(actions)])
            start = time.perf_counter()
            ended = env(action)
            total += time.perf_counter() - start
            done_steps += 1
            if ended:
                world += 1
                env, world = make(world)
        yield total


def run(steps: int, chunk: int, seed: int) -> tuple[float, float]:
    """(verigym steps/s, crafter steps/s) of one round."""
    actions = np.random.default_rng(seed).integers(17, size=steps)
    ours = gym.make("verigym/Crafter-v0", goal=[], survive=True)

    def make_ours(index: int):
        ours.reset(seed=seed * 1000 + index)

        def step(action: int) -> bool:
            return any(ours.step(action)[2:4])

        return step, index

    def make_theirs(index: int):
        ours.reset(seed=seed * 1000 + index)  # the same world seed as verigym's side
        game = crafter.Env(seed=ours.unwrapped.world_seed, length=0)
        game.reset()
        return (lambda action: game.step(action)[2]), index

    sides = [_side(make_ours, steps, chunk, actions), _side(make_theirs, steps, chunk, actions)]
    times = [0.0, 0.0]
    for chunk_times in zip(*sides):
        for i, t in enumerate(chunk_times):
            times[i] += t
    return steps / times[0], steps / times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rounds = [run(args.steps, args.chunk, seed) for seed in range(args.repeats)]
    rounds.sort(key=lambda r: r[0] / r[1])
    ours, theirs = rounds[len(rounds) // 2]  # the median round
    print(
        f"verigym/Crafter-v0 {ours:.0f} steps/s, crafter.Env {theirs:.0f} steps/s "
        f"({args.steps} steps a side, {args.repeats} rounds): ratio {ours / theirs:.2f}x "
        f"(rounds {rounds[0][0] / rounds[0][1]:.2f}-{rounds[-1][0] / rounds[-1][1]:.2f}x)"
    )


if __name__ == "__main__":
    main()
