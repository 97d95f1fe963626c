"""Step cost of the mujoco family, side by side with its peers in the same run.

For each verigym MuJoCo id: the time of ``env.step`` (through ``gymnasium.make``; random actions,
resets excluded) against a bare ``mujoco.mj_step(model, data, nstep=frame_skip)`` on the same
compiled model from the same state with the same controls. The two are timed in pairs, step by
step: before each ``env.step`` the physics state is saved, and right after it the bare step runs
from that state on a second ``MjData``, so both sides of a pair see the same machine load (the
overhead target of issue 20 is <= 1.3x). ``--repeats`` rounds; the median round's ratio is printed
with the spread. For Reach, also against Gymnasium's ``Reacher-v5`` (the same task family; needs
``imageio``, part of ``gymnasium[mujoco]``). Printed as ratios.

Usage::

    python benchmarks/mujoco_step.py [--steps 5000] [--repeats 5] [--ids verigym/Reach-2Link-v0 ...]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import mujoco
import numpy as np

import verigym

IDS = [row.id for row in verigym.rows("mujoco")]


def _interleaved_best(repeats: int, *runs) -> list[float]:
    """Best time of each run over ``repeats`` rounds, alternating the runs (shared-machine noise)."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            best[i] = min(best[i], run())
    return best


def time_env(env: gym.Env, steps: int, actions: np.ndarray) -> float:
    """Seconds per ``env.step`` over ``steps`` steps (episodes restarted, resets not timed)."""
    env.reset(seed=0)
    total = 0.0
    for i in range(steps):
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(actions[i])
        total += time.perf_counter() - start
        if terminated or truncated:
            env.reset(seed=i)
    return total / steps


def time_pairs(env: gym.Env, steps: int, actions: np.ndarray, seed: int) -> tuple[float, float]:
    """Seconds per ``env.step`` and per bare ``mj_step(nstep=frame_skip)`` from the same states.

    Each ``env.step`` is followed at once by the bare step from the state the env stepped from,
    with the controls the env applied, on a second ``MjData`` of the same model (state save and
    restore are not timed).
    """
    inner = env.unwrapped
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    bare: dict[int, tuple[mujoco.MjData, np.ndarray]] = {}
    env.reset(seed=seed)
    ours = theirs = 0.0
    for i in range(steps):
        model, data = inner.model, inner.data
        if id(model) not in bare:
            bare[id(model)] = (mujoco.MjData(model), np.empty(mujoco.mj_stateSize(model, spec)))
        bare_data, state = bare[id(model)]
        mujoco.mj_getState(model, data, state, spec)
        controls = inner.controls(actions[i])
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(actions[i])
        middle = time.perf_counter()
        mujoco.mj_setState(model, bare_data, state, spec)
        bare_data.ctrl[:] = controls
        restored = time.perf_counter()
        mujoco.mj_step(model, bare_data, nstep=inner.frame_skip)
        end = time.perf_counter()
        ours += middle - start
        theirs += end - restored
        if terminated or truncated:
            env.reset(seed=seed + i + 1)
    return ours / steps, theirs / steps


def _interleaved_best(repeats: int, *runs) -> list[float]:
    """Best time of each run over ``repeats`` rounds, alternating the runs (shared-machine noise)."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            best[i] = min(best[i], run())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ids", nargs="+", default=IDS, choices=IDS, metavar="ID", help="ids to time (default: every mujoco id)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'env':34s} {'env.step us':>12s} {'bare mj_step us':>16s} {'ratio (median)':>15s} {'min-max':>12s}")
    for env_id in args.ids:
        env = gym.make(env_id)
        inner = env.unwrapped
        actions = rng.uniform(-1, 1, size=(args.steps, inner.model.nu)).astype(np.float32)
        time_pairs(env, min(args.steps, 500), actions, seed=10_000)  # warm-up
        rounds = sorted((time_pairs(env, args.steps, actions, seed=r) for r in range(args.repeats)), key=lambda pair: pair[0] / pair[1])
        ours, bare = rounds[len(rounds) // 2]
        low, high = rounds[0][0] / rounds[0][1], rounds[-1][0] / rounds[-1][1]
        print(f"{env_id:34s} {ours * 1e6:12.1f} {bare * 1e6:16.1f} {ours / bare:14.2f}x {low:5.2f}-{high:.2f}")
        env.close()
    try:
        reacher = gym.make("Reacher-v5", disable_env_checker=True)
    except Exception as exc:  # imageio missing
        print(f"Reacher-v5 unavailable ({type(exc).__name__}: {exc}); pip install 'gymnasium[mujoco]'")
        return
    actions = rng.uniform(-1, 1, size=(args.steps, 2)).astype(np.float32)
    ours_env = gym.make("verigym/Reach-2Link-v0", disable_env_checker=True)
    ours, theirs = _interleaved_best(
        args.repeats,
        lambda: time_env(ours_env, args.steps, actions),
        lambda: time_env(reacher, args.steps, actions),
    )
    print(f"verigym/Reach-2Link-v0 {ours * 1e6:.1f} us/step vs Gymnasium Reacher-v5 {theirs * 1e6:.1f} us/step: ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
