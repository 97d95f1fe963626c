"""Step cost of the mujoco family, side by side with its peers in the same run.

For each verigym MuJoCo id: the time of ``env.step`` (through ``gymnasium.make``; random actions,
resets excluded) against a bare ``mujoco.mj_step(model, data, frame_skip)`` on the same
compiled model from the same states with the same controls (recorded in a first pass, replayed on
a second ``MjData``). The two sides alternate in chunks of 250 steps, each in a loop of its own, so
both see the same machine load. ``--repeats`` rounds; the median round's ratio is printed with
the spread. (Issue 20's target, <= 1.3x, was withdrawn in issue 33: the floor below is already
about 1.2-1.6x, and the env keeps one readable step path rather than a second, faster copy.)

A third side, the *floor*, is the least a Python Gymnasium goal env can do per step on the same
replayed states: write the controls, ``mj_step``, and return a ``Dict`` observation of three new
``float64`` arrays (``qpos`` and ``qvel``, the first two ``qpos`` entries, a goal), a reward from
their distance and an ``info`` dict -- no wrappers, no action validation, no task logic. Its ratio
to the bare loop bounds from below what any env with this API reaches; ``ours/floor`` is
verigym's own cost above that. For Reach, also against Gymnasium's ``Reacher-v5`` (the same task family; needs
``imageio``, part of ``gymnasium[mujoco]``). Printed as ratios.

Usage::

    python benchmarks/mujoco_step.py [--steps 5000] [--repeats 5] [--ids verigym/Reach-2Link-v0 ...]
"""

from __future__ import annotations

import argparse
import math
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


def record_states(
    env: gym.Env, steps: int, actions: np.ndarray, seed: int
) -> list[tuple[mujoco.MjModel, np.ndarray, np.ndarray]]:
    """(model, physics state, controls) before each of ``steps`` env steps from ``reset(seed)``
    (episodes restarted with ``reset(seed=seed + i + 1)``), for :func:`time_chunks` to replay."""
    inner = env.unwrapped
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    env.reset(seed=seed)
    record = []
    for i in range(steps):
        state = np.empty(mujoco.mj_stateSize(inner.model, spec))
        mujoco.mj_getState(inner.model, inner.data, state, spec)
        record.append((inner.model, state, inner.controls(actions[i])))
        _, _, terminated, truncated, _ = env.step(actions[i])
        if terminated or truncated:
            env.reset(seed=seed + i + 1)
    return record


def floor_step(
    model: mujoco.MjModel,
    data: mujoco.MjData,
    controls: np.ndarray,
    goal: np.ndarray,
    frame_skip: int,
) -> tuple:
    """The least a Python goal env's step does (see the module docstring)."""
    data.ctrl[:] = controls
    mujoco.mj_step(model, data, frame_skip)
    qpos = data.qpos
    achieved = qpos[:2].copy()
    observation = {
        "observation": np.concatenate((qpos, data.qvel)),
        "achieved_goal": achieved,
        "desired_goal": goal.copy(),
    }
    x, y = achieved.tolist()
    gx, gy = goal.tolist()
    distance = math.sqrt((x - gx) ** 2 + (y - gy) ** 2)
    return observation, -distance, distance < 0.05, False, {"distance": distance}


def time_chunks(
    env: gym.Env, actions: np.ndarray, seed: int, record: list, chunk: int = 250
) -> tuple[float, float, float]:
    """Seconds per ``env.step``, per bare ``mj_step(model, data, frame_skip)`` and per :func:`floor_step`
    over the recorded steps.

    The env replays the recording's episodes (same seeds, same actions, so the same states); every
    ``chunk`` env steps, the bare loop steps from the same ``chunk`` recorded states with the same
    controls on a second ``MjData``. Each side runs in a loop of its own (warm caches) and the
    chunks alternate every few milliseconds, so both see the same machine load.
    """
    inner = env.unwrapped
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    datas: dict[int, mujoco.MjData] = {}
    clock = time.perf_counter
    goal = np.array([0.1, 0.2])
    ours = theirs = floor = 0.0
    env.reset(seed=seed)
    for first in range(0, len(record), chunk):
        last = min(first + chunk, len(record))
        for i in range(first, last):
            start = clock()
            _, _, terminated, truncated, _ = env.step(actions[i])
            ours += clock() - start
            if terminated or truncated:
                env.reset(seed=seed + i + 1)
        for model, state, controls in record[first:last]:
            data = datas.get(id(model))
            if data is None:
                data = datas[id(model)] = mujoco.MjData(model)
            mujoco.mj_setState(model, data, state, spec)
            data.ctrl[:] = controls
            start = clock()
            mujoco.mj_step(model, data, inner.frame_skip)
            theirs += clock() - start
        for model, state, controls in record[first:last]:
            data = datas[id(model)]
            mujoco.mj_setState(model, data, state, spec)
            start = clock()
            floor_step(model, data, controls, goal, inner.frame_skip)
            floor += clock() - start
    return ours / len(record), theirs / len(record), floor / len(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--ids",
        nargs="+",
        default=IDS,
        choices=IDS,
        metavar="ID",
        help="ids to time (default: every mujoco id)",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        f"{'env':34s} {'env.step us':>12s} {'bare mj_step us':>16s} {'ratio (median)':>15s} {'min-max':>12s} {'floor/bare':>11s} {'ours/floor':>11s}"
    )
    for env_id in args.ids:
        env = gym.make(env_id)
        inner = env.unwrapped
        actions = rng.uniform(-1, 1, size=(args.steps, inner.model.nu)).astype(np.float32)
        record = record_states(env, args.steps, actions, seed=0)
        time_chunks(env, actions, 0, record[:500])  # warm-up
        rounds = sorted(
            (time_chunks(env, actions, 0, record) for _ in range(args.repeats)),
            key=lambda times: times[0] / times[1],
        )
        ours, bare, floor = rounds[len(rounds) // 2]
        low, high = rounds[0][0] / rounds[0][1], rounds[-1][0] / rounds[-1][1]
        print(
            f"{env_id:34s} {ours * 1e6:12.1f} {bare * 1e6:16.1f} {ours / bare:14.2f}x {low:5.2f}-{high:.2f} {floor / bare:10.2f}x {ours / floor:10.2f}x"
        )
        env.close()
    try:
        reacher = gym.make("Reacher-v5", disable_env_checker=True)
    except Exception as exc:  # imageio missing
        print(
            f"Reacher-v5 unavailable ({type(exc).__name__}: {exc}); pip install 'gymnasium[mujoco]'"
        )
        return
    actions = rng.uniform(-1, 1, size=(args.steps, 2)).astype(np.float32)
    ours_env = gym.make("verigym/Reach-2Link-v0", disable_env_checker=True)
    ours, theirs = _interleaved_best(
        args.repeats,
        lambda: time_env(ours_env, args.steps, actions),
        lambda: time_env(reacher, args.steps, actions),
    )
    print(
        f"verigym/Reach-2Link-v0 {ours * 1e6:.1f} us/step vs Gymnasium Reacher-v5 {theirs * 1e6:.1f} us/step: ratio {ours / theirs:.2f}x"
    )


if __name__ == "__main__":
    main()
