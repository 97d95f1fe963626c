"""Step cost of the mujoco family, side by side with its peers in the same run.

For each verigym MuJoCo id: the time of ``env.step`` (random actions, resets excluded) against a
bare ``mujoco.mj_step(model, data, nstep=frame_skip)`` on the same compiled model, replayed from
the same states with the same controls (the overhead target is <= 1.3x), and for Reach against Gymnasium's ``Reacher-v5``
(the same task family; needs ``imageio``, part of ``gymnasium[mujoco]``). Printed as ratios.

Usage::

    python benchmarks/mujoco_step.py [--steps 20000] [--repeats 3] [--ids verigym/Reach-2Link-v0 ...]
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


def time_env(env: gym.Env, steps: int, actions: np.ndarray, record: list | None = None) -> float:
    """Seconds per ``env.step`` over ``steps`` steps (episodes restarted, resets not timed).

    With ``record``, the physics state and controls before each step are appended to it, for
    :func:`time_bare` to replay (outside the timed region).
    """
    inner = env.unwrapped
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    env.reset(seed=0)
    total = 0.0
    for i in range(steps):
        if record is not None:
            state = np.empty(mujoco.mj_stateSize(inner.model, spec))
            mujoco.mj_getState(inner.model, inner.data, state, spec)
            record.append((inner.model, state, inner.controls(actions[i])))
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(actions[i])
        total += time.perf_counter() - start
        if terminated or truncated:
            env.reset(seed=i)
    return total / steps


def time_bare(frame_skip: int, record: list) -> float:
    """Seconds per bare ``mj_step(nstep=frame_skip)`` from the same states with the same controls."""
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    datas: dict[int, mujoco.MjData] = {}
    total = 0.0
    for model, state, controls in record:
        data = datas.setdefault(id(model), mujoco.MjData(model))
        mujoco.mj_setState(model, data, state, spec)
        data.ctrl[:] = controls
        start = time.perf_counter()
        mujoco.mj_step(model, data, nstep=frame_skip)
        total += time.perf_counter() - start
    return total / len(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ids", nargs="+", default=IDS, choices=IDS, metavar="ID", help="ids to time (default: every mujoco id)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'env':42s} {'env.step us':>12s} {'bare mj_step us':>16s} {'ratio':>7s}")
    for env_id in args.ids:
        env = gym.make(env_id, disable_env_checker=True)
        inner = env.unwrapped
        actions = rng.uniform(-1, 1, size=(args.steps, inner.model.nu)).astype(np.float32)
        record: list = []
        time_env(env, args.steps, actions, record)
        ours, bare = _interleaved_best(
            args.repeats,
            lambda: time_env(env, args.steps, actions),  # noqa: B023
            lambda: time_bare(inner.frame_skip, record),  # noqa: B023
        )
        print(f"{env_id:42s} {ours * 1e6:12.1f} {bare * 1e6:16.1f} {ours / bare:7.2f}x")
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
