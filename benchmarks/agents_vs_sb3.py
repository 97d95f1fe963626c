"""verigym's classic agents against Stable-Baselines3, side by side in one run (issue 9).

For each task both libraries train with the same rl-baselines3-zoo hyperparameters and the same
seeds; every ``every`` env steps the deterministic policy is evaluated on 5 episodes (evaluation
time excluded from the clock) and training stops at the threshold. Printed per seed: seconds and
env steps to the threshold (the steps tell sample efficiency apart from speed); per task: median
(over seeds) wall-clock seconds to the threshold, median steps/s, and the verigym/SB3 ratios (< 1
means verigym is faster). A run that does not reach the threshold within the budget counts as its full
training time and is flagged.

For PPO both sides also print steps/s of the rollout phase (acting and env stepping) and of the
update phase apart (env steps of the run over the seconds spent in that phase; evaluations
excluded). ``ppo-doorkey`` is the DoorKey example of docs/agents.md (its PPO settings, 60k steps, stop at a mean
return of 0.9; SB3's PPO with the same settings and its MLP policy on the flattened grid).

``ppo-doorkey8`` is issue 32's target: PPO on DoorKey-8x8 until the deterministic policy succeeds on
at least 0.95 of the 20 evaluation seeds (10,000-10,019), verigym as a user gets it (the batched
grid engine and the default ``encoder="mlp"``, 16 envs, the DoorKey example's other settings) against SB3's
PPO on MiniGrid's own ``MiniGrid-DoorKey-8x8-v0`` with rl-zoo's MiniGrid hyperparameters (its
``MiniGrid-DoorKey-5x5-v0`` entry, the only DoorKey one: MiniGrid's ``FlatObsWrapper``, VecNormalize,
8 envs x 128 steps, minibatch 64, 10 epochs, lr 2.5e-4, no entropy bonus).

The slow tasks ``ppo-halfcheetah`` and ``sac-halfcheetah`` (not run by default; about an hour
each on one core) train HalfCheetah-v5 for a fixed 200k steps instead and compare the final
deterministic return over 5 episodes, with rl-zoo's MuJoCo settings: PPO with SB3's defaults and
observation/reward normalization (VecNormalize), SAC with SB3's defaults and 10k random steps.

Usage::

    pip install -e '.[bench]'
    python benchmarks/agents_vs_sb3.py --seeds 3 [--tasks ppo-cartpole dqn-cartpole sac-pendulum]
    python benchmarks/agents_vs_sb3.py --seeds 3 --tasks ppo-halfcheetah sac-halfcheetah

Threads: ``--threads auto`` (the default) runs verigym as a user gets it (``learn`` pins torch's
threads by itself: one for these small networks, see ``torch_threads``) and gives SB3 the same
count with ``torch.set_num_threads``; ``--threads N`` runs both with N. On a loaded machine the
ratio is the meaningful number, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.agents import rl_zoo  # noqa: E402

_TORCH_DEFAULT = torch.get_num_threads()

TASKS = {
    # name: (verigym agent, env id, verigym config, SB3 class, SB3 kwargs, budget, threshold, eval every)
    "ppo-cartpole": (
        "ppo",
        "CartPole-v1",
        rl_zoo.PPO_CARTPOLE,
        "PPO",
        {
            "n_envs": 8,
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "learning_rate": "lin_1e-3",
            "clip_range": "lin_0.2",
        },
        100_000,
        475.0,
        8192,
    ),
    "dqn-cartpole": (
        "dqn",
        "CartPole-v1",
        {**rl_zoo.DQN_CARTPOLE, "double_q": False},
        "DQN",
        {
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
        50_000,
        475.0,
        2048,
    ),
    "sac-pendulum": (
        "sac",
        "Pendulum-v1",
        rl_zoo.SAC_PENDULUM,
        "SAC",
        {"learning_rate": 1e-3},
        20_000,
        -200.0,
        1000,
    ),
    # the DoorKey example in docs/agents.md, as written there
    "ppo-doorkey": (
        "ppo",
        "verigym/DoorKey-5x5-v0",
        {
            "num_envs": 8,
            "batch_size": 256,
            "num_epochs": 4,
            "learning_rate": 7e-4,
            "ent_coef": 0.01,
        },
        "PPO",
        {
            "n_envs": 8,
            "n_steps": 128,
            "batch_size": 256,
            "n_epochs": 4,
            "learning_rate": 7e-4,
            "ent_coef": 0.01,
        },
        60_000,
        0.9,
        8192,
    ),
    # issue 32: success rate >= 0.95 on 20 evaluation seeds (SUCCESS_TASKS); SB3 on MiniGrid's env
    "ppo-doorkey8": (
        "ppo",
        "verigym/DoorKey-8x8-v0",
        {
            "num_envs": 16,
            "batch_size": 256,
            "num_epochs": 4,
            "learning_rate": 7e-4,
            "ent_coef": 0.01,
        },
        "PPO",
        {
            "normalize": True,
            "n_envs": 8,
            "n_steps": 128,
            "batch_size": 64,
            "gae_lambda": 0.95,
            "gamma": 0.99,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 2.5e-4,
            "clip_range": 0.2,
        },
        500_000,
        0.95,
        16384,
    ),
    # fixed budget (threshold None): the final return is compared; no evaluations on the way
    "ppo-halfcheetah": (
        "ppo",
        "HalfCheetah-v5",
        {"num_envs": 1, "num_steps": 2048, "normalize_observation": True, "normalize_reward": True},
        "PPO",
        {"normalize": True},
        200_000,
        None,
        50_000,
    ),
    "sac-halfcheetah": (
        "sac",
        "HalfCheetah-v5",
        {"learning_starts": 10_000},
        "SAC",
        {"learning_starts": 10_000},
        200_000,
        None,
        50_000,
    ),
}
SLOW = ("ppo-halfcheetah", "sac-halfcheetah")
SUCCESS_TASKS = {"ppo-doorkey8": 20}
"""Tasks whose threshold is a success rate on this many evaluation seeds (not a mean return)."""
SB3_ENVS = {"ppo-doorkey8": "MiniGrid-DoorKey-8x8-v0"}
"""SB3's env where it is not verigym's (MiniGrid's own, through ``FlatObsWrapper``)."""


def _make_eval_env(env_id: str) -> gym.Env:
    if env_id.startswith("MiniGrid-"):
        import minigrid  # noqa: F401  (registers MiniGrid-...)
        from minigrid.wrappers import FlatObsWrapper

        return FlatObsWrapper(gym.make(env_id))
    return gym.make(env_id)


def _evaluate(predict, env_id: str, episodes: int = 5, success: bool = False) -> float:
    """Mean return over ``episodes`` (seeds 10,000..), or with ``success`` the success rate
    (``info["success"]``; MiniGrid, which has none, succeeds exactly when its reward is > 0)."""
    env = _make_eval_env(env_id)
    returns, successes = [], []
    for episode in range(episodes):
        obs, info = env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:  # verigym's act reads info["action_mask"] (DoorKey's legal actions)
            obs, reward, terminated, truncated, info = env.step(predict(obs, info))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        successes.append(bool(info.get("success", terminated and reward > 0)))
    return float(np.mean(successes if success else returns))


class _Clock:
    """Evaluate every ``every`` steps; wall-clock minus evaluation time; stop at the threshold
    (``threshold`` None: no evaluations, never stop); ``last`` is the latest evaluation."""

    def __init__(self, predict, env_id: str, threshold: float | None, every: int, task: str = ""):
        self.predict, self.env_id, self.threshold, self.every = predict, env_id, threshold, every
        self.episodes = SUCCESS_TASKS.get(task, EVAL_EPISODES)
        self.success = task in SUCCESS_TASKS
        self.curve: list[tuple[int, float]] = []  # (env step, evaluation) of every evaluation
        self.start = time.perf_counter()
        self.eval_time = 0.0
        self.next = every
        self.reached: tuple[int, float] | None = None
        self.steps = 0
        self.last = float("nan")
        self.capped = False

    def check(self, step: int) -> bool:
        self.steps = step
        if MAX_SECONDS is not None and self.train_time() > MAX_SECONDS:
            self.capped = True
            return False  # out of time: counted as not reached
        if (
            self.threshold is None or step < self.next
        ):  # a fixed budget is evaluated once, at the end
            return True
        while self.next <= step:
            self.next += self.every
        t = time.perf_counter()
        value = self.last = _evaluate(self.predict, self.env_id, self.episodes, self.success)
        self.eval_time += time.perf_counter() - t
        self.curve.append((step, value))
        if self.threshold is not None and value >= self.threshold:
            self.reached = (step, self.train_time())
            return False
        return True

    def train_time(self) -> float:
        return time.perf_counter() - self.start - self.eval_time


EVAL_EPISODES = 5
"""Evaluation episodes (seeds 10,000..): 5, or 10 with ``--fidelity``."""
MAX_SECONDS: float | None = None
"""``--max-seconds``: a run's training time is cut there (then it counts as not reached)."""
OVERRIDES: dict = {}
"""``--set KEY=VALUE``: verigym config values over the task's (experiments; not for reports)."""
THREADS: int | None = None
"""``--threads``: None runs verigym with its own default and SB3 with the count verigym chose."""


def verigym_threads(task: str) -> int:
    """The torch thread count verigym's ``learn`` uses for ``task`` (its ``torch_threads`` choice)."""
    import verigym.agents as agents
    from verigym.agents.common.learner import choose_threads

    name, env_id, config, *_ = TASKS[task]
    agent = agents.make(
        name, env_id, **config, **({} if THREADS is None else {"torch_threads": THREADS})
    )
    chosen = choose_threads(agent.config.torch_threads, agent.device, agent.num_parameters())
    return torch.get_num_threads() if chosen is None else chosen


def run_verigym(task: str, seed: int) -> tuple[float, float, bool, float, int, tuple | None]:
    import verigym.agents as agents

    name, env_id, config, _, _, budget, threshold, every = TASKS[task]
    config = {**config, **OVERRIDES}
    if THREADS is not None:
        config = {**config, "torch_threads": THREADS}
    torch.set_num_threads(_TORCH_DEFAULT)  # what a user's process starts with: learn must pin it
    agent = agents.make(name, env_id, seed=seed, **config)
    clock = _Clock(lambda o, i: agent.act(o, i, deterministic=True), env_id, threshold, every, task)
    phases: list[tuple[float, float]] = []

    def check(metrics) -> bool:
        if "charts/rollout_SPS" in metrics:  # PPO reports its two phases apart
            phases.append((metrics["charts/rollout_SPS"], metrics["charts/update_SPS"]))
        return clock.check(int(metrics["global_step"]))

    agent.learn(env_id, budget, callbacks=[check])
    return (*_result(clock, threshold), phases[-1] if phases else None, clock.curve)


def _result(clock: _Clock, threshold: float | None) -> tuple[float, float, bool, float, int]:
    """(seconds to the threshold or of the whole run, steps/s, reached, final return, env steps
    to the threshold or of the whole run)."""
    seconds = clock.reached[1] if clock.reached else clock.train_time()
    final = clock.last if threshold is not None else _evaluate(clock.predict, clock.env_id)
    steps = clock.reached[0] if clock.reached else clock.steps
    return (
        seconds,
        clock.steps / max(clock.train_time(), 1e-9),
        clock.reached is not None or threshold is None,
        final,
        steps,
    )


def run_sb3(task: str, seed: int) -> tuple[float, float, bool, float, int, tuple | None]:
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    _, env_id, _, cls_name, kwargs, budget, threshold, every = TASKS[task]
    kwargs = dict(kwargs)
    n_envs = kwargs.pop("n_envs", 1)
    normalize = kwargs.pop("normalize", False)
    for key in ("learning_rate", "clip_range"):
        if isinstance(kwargs.get(key), str):
            initial = float(kwargs[key][4:])
            kwargs[key] = lambda progress, initial=initial: progress * initial
    import verigym  # noqa: F401  (registers verigym/... ids)

    torch.set_num_threads(verigym_threads(task))  # the same thread setting as verigym's run
    env_id = SB3_ENVS.get(task, env_id)
    wrapper = None
    if env_id.startswith("MiniGrid-"):
        import minigrid  # noqa: F401  (registers MiniGrid-...)
        from minigrid.wrappers import FlatObsWrapper as wrapper
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed, wrapper_class=wrapper)
    if normalize:
        env = VecNormalize(env)
    model = getattr(sb3, cls_name)("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    scale = env.normalize_obs if normalize else (lambda o: o)
    clock = _Clock(
        lambda o, i: model.predict(scale(o), deterministic=True)[0],
        env_id,
        threshold,
        every,
        task,
    )

    rollout = {"seconds": 0.0, "began": 0.0, "eval": 0.0}

    class Stop(BaseCallback):
        def _on_step(self) -> bool:
            return clock.check(self.num_timesteps)

        def _on_rollout_start(self) -> None:
            rollout["began"], rollout["eval"] = time.perf_counter(), clock.eval_time

        def _on_rollout_end(self) -> None:  # evaluations inside a rollout are not rollout time
            spent = time.perf_counter() - rollout["began"]
            rollout["seconds"] += spent - (clock.eval_time - rollout["eval"])

    clock.start = time.perf_counter()
    model.learn(budget, callback=Stop())
    if normalize:
        env.training = False
    result = _result(clock, threshold)
    phases = None
    if cls_name == "PPO":  # on-policy: collect_rollouts, then train
        update = max(clock.train_time() - rollout["seconds"], 1e-9)
        phases = (clock.steps / max(rollout["seconds"], 1e-9), clock.steps / update)
    return (*result, phases, clock.curve)


# -- --fidelity: the same-settings learning curves of issue 41 ---------------------------------
FIDELITY_TASKS = ("ppo-cartpole", "dqn-cartpole", "sac-pendulum")
FIDELITY_EVERY = 2000
"""--fidelity evaluates every 2,000 env steps (10 deterministic episodes, seeds 10,000-10,009)."""
TARGETS = {"steps": 1.2, "time_per_step": 0.75, "ppo_wall": 0.5}
"""Issue 41's targets, verigym/SB3: median steps to the threshold, median time per env step, and
PPO CartPole's median wall time to the threshold."""


def _fidelity_run(job: tuple[str, str, int, str, dict, int | None]) -> dict:
    """One (task, library, seed) run in a fresh process; its result as a JSON-able dict."""
    task, library, seed, results, overrides, threads = job
    global OVERRIDES, THREADS, EVAL_EPISODES
    OVERRIDES, THREADS, EVAL_EPISODES = overrides, threads, 10
    TASKS[task] = (*TASKS[task][:7], FIDELITY_EVERY)
    seconds, sps, reached, final, steps, _, curve = (
        run_verigym if library == "verigym" else run_sb3
    )(task, seed)
    out = {
        "task": task,
        "library": library,
        "seed": seed,
        "seconds": seconds,
        "steps_per_second": sps,
        "reached": reached,
        "steps": steps,
        "final": final,
        "curve": curve,
        "overrides": overrides,
    }
    path = Path(results) / f"{task}-{library}-{seed}.json"
    path.write_text(json.dumps(out))
    return out


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(median), float(q3)


def steps_difference(ours: list[float], theirs: list[float], draws: int = 20_000) -> dict:
    """How sure the steps-to-threshold difference is, over seeds: the Mann-Whitney U of ``ours``
    against ``theirs`` (the pairs where ours needed more steps, ties counting half), its two-sided
    permutation p-value, and a bootstrap 95% interval of the ratio of the medians (ours/theirs).
    Random draws from a fixed seed, so a report repeats.

    Returns:
        ``{"U": float, "pairs": int, "p": float, "ratio_ci": (low, high)}``.
    """
    a, b = np.asarray(ours, float), np.asarray(theirs, float)
    rng = np.random.default_rng(0)

    def u_stat(x: np.ndarray, y: np.ndarray) -> float:
        return float((x[:, None] > y[None, :]).sum() + 0.5 * (x[:, None] == y[None, :]).sum())

    pairs, observed = len(a) * len(b), u_stat(a, b)
    pooled = np.concatenate([a, b])
    extreme = 0
    for _ in range(draws):
        shuffled = rng.permutation(pooled)
        extreme += abs(u_stat(shuffled[: len(a)], shuffled[len(a) :]) - pairs / 2) >= abs(
            observed - pairs / 2
        )
    ratios = [
        np.median(rng.choice(a, len(a))) / max(np.median(rng.choice(b, len(b))), 1e-9)
        for _ in range(draws)
    ]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return {"U": observed, "pairs": pairs, "p": extreme / draws, "ratio_ci": (low, high)}


def _curve_on_grid(curve: list[list[float]], grid: np.ndarray) -> np.ndarray:
    """A run's evaluations on ``grid`` (each point: the latest evaluation at or before it; NaN
    before the first; a run that stopped at the threshold keeps its last value)."""
    out = np.full(len(grid), np.nan)
    for step, value in curve:
        out[grid >= step - FIDELITY_EVERY // 2] = value
    return out


def fidelity_report(tasks: list[str], seeds: range, results: Path, plot: Path | None) -> None:
    """Print the steps-to-threshold / time-per-step table of the stored runs and plot the curves."""
    rows = {}
    for task in tasks:
        runs = {lib: [] for lib in ("verigym", "sb3")}
        for lib in runs:
            for seed in seeds:
                path = results / f"{task}-{lib}-{seed}.json"
                if path.exists():
                    runs[lib].append(json.loads(path.read_text()))
        if not runs["verigym"] or not runs["sb3"]:
            print(f"{task}: no stored runs of both libraries in {results}")
            continue
        rows[task] = runs
        budget = TASKS[task][5]
        print(
            f"\n{task} ({len(runs['verigym'])} verigym / {len(runs['sb3'])} SB3 seeds, "
            f"threshold {TASKS[task][6]}, budget {budget:,} steps; * = not reached)"
        )
        for lib, rs in runs.items():
            steps = [r["steps"] for r in rs]
            q1, med, q3 = _quartiles(steps)
            tps = _quartiles([1e6 / r["steps_per_second"] for r in rs])
            wall = _quartiles([r["seconds"] for r in rs])
            each = " ".join(f"{r['steps']}{'' if r['reached'] else '*'}" for r in rs)
            print(
                f"  {lib:8} steps to threshold median {med:,.0f} (IQR {q1:,.0f}-{q3:,.0f}); "
                f"time/step median {tps[1]:.0f} us; wall to threshold median {wall[1]:.1f} s; "
                f"per seed: {each}"
            )
        med = {lib: _quartiles([r["steps"] for r in rs])[1] for lib, rs in runs.items()}
        tps = {
            lib: _quartiles([1 / r["steps_per_second"] for r in rs])[1] for lib, rs in runs.items()
        }
        wall = {lib: _quartiles([r["seconds"] for r in rs])[1] for lib, rs in runs.items()}
        ratios = {
            "steps": med["verigym"] / med["sb3"],
            "time_per_step": tps["verigym"] / tps["sb3"],
            "wall": wall["verigym"] / wall["sb3"],
        }
        checks = [
            ("steps", "steps", TARGETS["steps"]),
            ("time_per_step", "time_per_step", TARGETS["time_per_step"]),
        ]
        if task == "ppo-cartpole":
            checks.append(("wall", "wall", TARGETS["ppo_wall"]))
        verdicts = []
        for name, key, target in checks:
            ratio = ratios[key]
            verdicts.append(
                f"{name} {ratio:.2f}x (target <= {target}x: "
                + ("met" if ratio <= target else f"missed by {ratio / target:.2f}x")
                + ")"
            )
        print("  verigym/SB3: " + "; ".join(verdicts))
        sure = steps_difference(
            [r["steps"] for r in runs["verigym"]], [r["steps"] for r in runs["sb3"]]
        )
        print(
            f"  steps: Mann-Whitney U {sure['U']:.1f} of {sure['pairs']} seed pairs (U counts the pairs "
            "in which verigym needed more steps, ties half), "
            f"two-sided permutation p {sure['p']:.3f}; bootstrap 95% interval of the median "
            f"ratio {sure['ratio_ci'][0]:.2f}-{sure['ratio_ci'][1]:.2f}"
        )
        if not all(r["reached"] for rs in runs.values() for r in rs):
            print(
                "  (some runs did not reach the threshold: their steps and time count the whole "
                "run, a lower bound, so these ratios are not a measurement)"
            )
    if plot is None or not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, (task, runs) in zip(axes[0], rows.items()):
        last = max((r["curve"][-1][0] for rs in runs.values() for r in rs if r["curve"]), default=0)
        end = min(TASKS[task][5], last + 2 * FIDELITY_EVERY)  # up to the slowest run's last eval
        grid = np.arange(FIDELITY_EVERY, end + 1, FIDELITY_EVERY)
        for lib, color in (("verigym", "tab:blue"), ("sb3", "tab:orange")):
            curves = np.stack([_curve_on_grid(r["curve"], grid) for r in runs[lib]])
            n = np.sum(~np.isnan(curves), axis=0)
            mean = np.nanmean(np.where(np.isnan(curves), np.nan, curves), axis=0)
            se = np.nanstd(curves, axis=0) / np.sqrt(np.maximum(n, 1))
            label = "verigym" if lib == "verigym" else "Stable-Baselines3"
            ax.plot(grid, mean, color=color, label=f"{label} ({len(runs[lib])} seeds)")
            ax.fill_between(grid, mean - se, mean + se, color=color, alpha=0.25)
        ax.axhline(TASKS[task][6], color="gray", linestyle="--", linewidth=0.8)
        ax.set_title(f"{task} (same rl-zoo settings)")
        ax.set_xlabel("env steps")
        ax.set_ylabel("deterministic eval return (10 episodes)")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(plot, dpi=110)
    print(
        f"\nplot: {plot} (mean +- standard error; a run stopped at the threshold keeps its last value)"
    )


def fidelity(args: argparse.Namespace) -> int:
    """``--fidelity``: every (task, library, seed) run, stored as JSON in ``--results``
    (runs already stored are kept unless ``--rerun``), then the report and the plot."""
    from concurrent.futures import ProcessPoolExecutor

    tasks = (
        [t for t in args.tasks if t in FIDELITY_TASKS] if args.tasks_given else list(FIDELITY_TASKS)
    )
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    libs = ("verigym", "sb3") if args.library == "both" else (args.library,)
    jobs = [
        (task, lib, seed, str(results), OVERRIDES, THREADS)
        for task in tasks
        for seed in seeds
        for lib in libs
        if args.rerun or not (results / f"{task}-{lib}-{seed}.json").exists()
    ]
    print(
        f"fidelity: {len(jobs)} runs to do ({args.jobs} at a time), results in {results}",
        flush=True,
    )
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for r in pool.map(_fidelity_run, jobs):
                print(
                    f"  {r['task']} {r['library']} seed {r['seed']}: {r['steps']} steps"
                    f"{'' if r['reached'] else '*'}, {r['seconds']:.1f} s",
                    flush=True,
                )
    else:
        for job in jobs:
            r = _fidelity_run(job)
            print(
                f"  {r['task']} {r['library']} seed {r['seed']}: {r['steps']} steps"
                f"{'' if r['reached'] else '*'}, {r['seconds']:.1f} s",
                flush=True,
            )
    fidelity_report(tasks, seeds, results, None if args.no_plot else Path(args.plot))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="+", default=[t for t in TASKS if t not in SLOW], choices=list(TASKS)
    )
    parser.add_argument("--seeds", type=int, help="seeds per task (default 3; 10 with --fidelity)")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed, first-seed+1, ..."
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        help="cut each run's training at this many seconds (counted as not reaching the threshold)",
    )
    parser.add_argument(
        "--steps", type=int, help="override every task's step budget (a quick check of the script)"
    )
    parser.add_argument(
        "--library",
        choices=("both", "verigym", "sb3"),
        default="both",
        help="run one side only (e.g. the two sides of a slow task on two cores); no ratio is printed",
    )
    parser.add_argument(
        "--threads",
        default="auto",
        help="torch threads of both libraries: 'auto' (verigym's default, the same count for SB3) or N",
    )
    parser.add_argument(
        "--fidelity",
        action="store_true",
        help="issue 41's run: PPO/DQN CartPole and SAC Pendulum, both libraries, eval every 2k steps "
        "(10 episodes), steps-to-threshold median/IQR, time per step, curves plotted to --plot",
    )
    parser.add_argument(
        "--results",
        default="benchmarks/results/fidelity",
        help="--fidelity: folder of the per-run JSON files (kept runs are not rerun)",
    )
    parser.add_argument("--rerun", action="store_true", help="--fidelity: rerun stored runs")
    parser.add_argument("--jobs", type=int, default=1, help="--fidelity: runs in parallel")
    parser.add_argument(
        "--plot", default="docs/images/agents_vs_sb3_fidelity.png", help="--fidelity: the plot"
    )
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--report-only", action="store_true", help="--fidelity: only report the stored runs"
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override verigym config values (experiments; the value is parsed as a Python literal)",
    )
    args = parser.parse_args()
    args.tasks_given = any(a == "--tasks" for a in sys.argv[1:])
    if args.seeds is None:
        args.seeds = 10 if args.fidelity else 3
    global THREADS, MAX_SECONDS, OVERRIDES
    import ast

    for item in args.set:
        key, _, value = item.partition("=")
        try:
            OVERRIDES[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            OVERRIDES[key] = value
    THREADS = None if args.threads == "auto" else int(args.threads)
    MAX_SECONDS = args.max_seconds
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.fidelity:
        if args.report_only:
            tasks = (
                [t for t in args.tasks if t in FIDELITY_TASKS]
                if args.tasks_given
                else list(FIDELITY_TASKS)
            )
            fidelity_report(
                tasks, seeds, Path(args.results), None if args.no_plot else Path(args.plot)
            )
            return 0
        return fidelity(args)
    if args.steps:
        for task in args.tasks:
            TASKS[task] = (
                *TASKS[task][:5],
                args.steps,
                *TASKS[task][6:7],
                min(TASKS[task][7], args.steps),
            )
    print(
        "torch threads: "
        + ", ".join(f"{t} {verigym_threads(t)}" for t in args.tasks)
        + f" (torch's default here: {_TORCH_DEFAULT})"
    )
    if args.library == "both":
        print(
            f"{'task':15} {'seed':>4} {'verigym s':>10} {'SB3 s':>8} {'verigym steps/s':>16} {'SB3 steps/s':>12} {'verigym return':>15} {'SB3 return':>11} {'verigym steps':>14} {'SB3 steps':>10}"
        )
    for task in args.tasks:
        ours, theirs = [], []
        if args.library != "both":
            for seed in seeds:
                r = (run_verigym if args.library == "verigym" else run_sb3)(task, seed)
                print(
                    f"{task:15} {seed:>4} {args.library}: {r[0]:.1f} s{'' if r[2] else '*'}, {r[1]:.0f} steps/s, return {r[3]:.1f}, {r[4]} steps",
                    flush=True,
                )
            continue
        for seed in seeds:
            ours.append(run_verigym(task, seed))
            theirs.append(run_sb3(task, seed))
            flag = lambda r: "" if r[2] else "*"  # noqa: E731
            print(
                f"{task:15} {seed:>4} {ours[-1][0]:>9.1f}{flag(ours[-1])} {theirs[-1][0]:>7.1f}{flag(theirs[-1])} {ours[-1][1]:>16.0f} {theirs[-1][1]:>12.0f} "
                f"{ours[-1][3]:>15.1f} {theirs[-1][3]:>11.1f} {ours[-1][4]:>14} {theirs[-1][4]:>10}",
                flush=True,
            )
            if ours[-1][5] and theirs[-1][5]:
                (ro, uo), (rs, us) = ours[-1][5], theirs[-1][5]
                print(
                    f"{'':15} {seed:>4} rollout steps/s verigym {ro:,.0f} vs SB3 {rs:,.0f} "
                    f"({ro / rs:.2f}x); update steps/s {uo:,.0f} vs {us:,.0f} ({uo / us:.2f}x)",
                    flush=True,
                )
        t_ours, t_sb3 = (
            statistics.median(r[0] for r in ours),
            statistics.median(r[0] for r in theirs),
        )
        s_ours, s_sb3 = (
            statistics.median(r[1] for r in ours),
            statistics.median(r[1] for r in theirs),
        )
        speed = f"steps/s {s_ours:.0f} vs {s_sb3:.0f} (ratio of times {s_sb3 / s_ours:.2f})"
        if TASKS[task][6] is None:
            r_ours, r_sb3 = (
                statistics.median(r[3] for r in ours),
                statistics.median(r[3] for r in theirs),
            )
            print(
                f"{task:15} median final return at {TASKS[task][5]} steps verigym/SB3 = {r_ours:.1f}/{r_sb3:.1f}; "
                f"training time {t_ours:.0f}/{t_sb3:.0f} s = {t_ours / t_sb3:.2f}; {speed}",
                flush=True,
            )
        else:
            print(
                f"{task:15} median time-to-threshold verigym/SB3 = {t_ours:.1f}/{t_sb3:.1f} s = {t_ours / t_sb3:.2f}; {speed}",
                flush=True,
            )
    print("(* = threshold not reached within the budget; its full training time is counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
