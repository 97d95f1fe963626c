"""PPO's grid encoders side by side: ``cnn`` against ``mlp`` on DoorKey (issue 32).

For each task, encoder and seed PPO trains on the batched grid engine and every ``every`` env
steps its deterministic policy plays the 20 evaluation seeds (10,000-10,019, all at once on the
batched engine; the evaluation time is off the clock); training stops when the success rate
reaches 0.95. Printed per run: training seconds and env steps to that point (or the whole budget,
flagged ``*``), the final success rate, and the steps/s of the rollout and the update phases;
per task: the median seconds and steps per encoder and the mlp/cnn ratio of seconds (< 1: the
MLP solves sooner). These numbers made ``mlp`` PPO's default ``encoder``.

Usage::

    python benchmarks/ppo_grid_encoders.py --tasks doorkey5 doorkey8 --seeds 3
    python benchmarks/ppo_grid_encoders.py --jobs 8   # runs in parallel processes (idle cores)

Settings: DoorKey-5x5 uses docs/agents.md's DoorKey example (8 envs x 128 steps, 256-sample
minibatches, 4 epochs, lr 7e-4, entropy 0.01), DoorKey-8x8 the same with 16 envs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COMMON = {"batch_size": 256, "num_epochs": 4, "learning_rate": 7e-4, "ent_coef": 0.01}
TASKS = {
    # name: (env id, PPO settings, step budget, evaluate every)
    "doorkey5": ("verigym/DoorKey-5x5-v0", {"num_envs": 8, **COMMON}, 100_000, 4096),
    "doorkey8": ("verigym/DoorKey-8x8-v0", {"num_envs": 16, **COMMON}, 400_000, 16384),
}
EVAL_SEEDS = 20
THRESHOLD = 0.95


def evaluate(agent, env_id: str, episodes: int = EVAL_SEEDS) -> float:
    """Success rate of ``agent``'s deterministic policy on seeds 10,000.. (one batched env each)."""
    import gymnasium as gym

    envs = gym.make_vec(
        env_id,
        num_envs=episodes,
        vectorization_mode="vector_entry_point",
        autoreset_mode=gym.vector.AutoresetMode.DISABLED,
    )
    obs, info = envs.reset(seed=10_000)
    open_ = np.ones(episodes, dtype=bool)
    success = np.zeros(episodes, dtype=bool)
    while open_.any():
        obs, _, terminated, truncated, info = envs.step(agent.act(obs, info, deterministic=True))
        ended = (terminated | truncated) & open_
        if ended.any():
            success[ended] = info["success"][ended]
            open_ &= ~ended
    envs.close()
    return float(success.mean())


def run(
    task: str, encoder: str, seed: int, threads: int | None, max_seconds: float | None = None
) -> dict:
    import verigym.agents as agents

    env_id, config, budget, every = TASKS[task]
    extra = {} if threads is None else {"torch_threads": threads}
    agent = agents.make("ppo", env_id, seed=seed, encoder=encoder, **config, **extra)
    state = {"eval": 0.0, "next": every, "reached": None, "success": 0.0, "phases": (0.0, 0.0)}
    start = time.perf_counter()

    def check(metrics) -> bool:
        state["phases"] = (metrics["charts/rollout_SPS"], metrics["charts/update_SPS"])
        step = int(metrics["global_step"])
        if max_seconds is not None and time.perf_counter() - start - state["eval"] > max_seconds:
            return False  # out of time: counted as not reached
        if step < state["next"]:
            return True
        state["next"] += every
        t = time.perf_counter()
        state["success"] = evaluate(agent, env_id)
        state["eval"] += time.perf_counter() - t
        if state["success"] >= THRESHOLD:
            state["reached"] = (step, time.perf_counter() - start - state["eval"])
            return False
        return True

    agent.learn(env_id, budget, callbacks=[check])
    train = time.perf_counter() - start - state["eval"]
    seconds, steps = state["reached"][::-1] if state["reached"] else (train, agent.global_step)
    return {
        "task": task,
        "encoder": encoder,
        "seed": seed,
        "seconds": seconds,
        "steps": steps,
        "reached": state["reached"] is not None,
        "success": state["success"],
        "rollout_sps": state["phases"][0],
        "update_sps": state["phases"][1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--encoders", nargs="+", default=["cnn", "mlp"], choices=["cnn", "mlp"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads (default: verigym's choice)")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel processes")
    parser.add_argument(
        "--max-seconds", type=float, help="cut each run's training there (counted as not reached)"
    )
    args = parser.parse_args()
    runs = [(t, e, s) for t in args.tasks for s in range(args.seeds) for e in args.encoders]
    results = []

    def show(r: dict) -> None:
        results.append(r)
        print(
            f"{r['task']:9} {r['encoder']:4} seed {r['seed']}: {r['seconds']:7.1f} s"
            f"{'' if r['reached'] else '*'} {r['steps']:>8} steps, success {r['success']:.2f}, "
            f"rollout {r['rollout_sps']:,.0f} steps/s, update {r['update_sps']:,.0f} steps/s",
            flush=True,
        )

    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for future in as_completed(
                [pool.submit(run, *r, args.threads, args.max_seconds) for r in runs]
            ):
                show(future.result())
    else:
        for r in runs:
            show(run(*r, args.threads, args.max_seconds))
    for task in args.tasks:
        medians = {}
        for encoder in args.encoders:
            rows = [r for r in results if r["task"] == task and r["encoder"] == encoder]
            medians[encoder] = (
                statistics.median(r["seconds"] for r in rows),
                statistics.median(r["steps"] for r in rows),
                sum(r["reached"] for r in rows),
                len(rows),
            )
        text = "; ".join(
            f"{e} {s:.1f} s, {n:,.0f} steps ({k}/{m} reached)"
            for e, (s, n, k, m) in medians.items()
        )
        ratio = (
            f"; mlp/cnn time {medians['mlp'][0] / medians['cnn'][0]:.2f}"
            if {"mlp", "cnn"} <= medians.keys()
            else ""
        )
        print(f"{task}: median time to {THRESHOLD} success: {text}{ratio}", flush=True)
    print("(* = not reached within the budget: the whole training time is counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
