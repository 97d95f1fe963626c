"""Parameter-shared PPO on a PettingZoo parallel game: verigym's ``ippo`` against Stable-Baselines3
over SuperSuit's vector wrappers (the usual way SB3 users share one policy across agents), side by
side in one run.

Both train one shared policy on 2-agent ``verigym/Spread-v0`` (25 steps an episode) with the same
PPO settings and seeds: 8 copies of the game (16 agent slots), 32 steps a rollout, minibatch 256,
10 epochs, lr 3e-3, gamma 0.95, initial log-std -0.5, 64x64 tanh actor and critic. Printed: the
training wall-clock time and transitions/s of each, their ratio (< 1 means verigym is faster), and
the mean team return of the trained policy over 20 held-out episodes (random play scores about
-16.7, the scripted assignment team about -4.0).

Usage::

    pip install -e '.[bench]'
    python benchmarks/ippo_vs_sb3_supersuit.py [--steps 60000] [--seeds 3]

Both run single-threaded (``torch.set_num_threads(1)``). SB3's games are unseeded: SuperSuit's
concatenated vector env has no ``seed()``, which SB3's ``seed=`` needs; torch is seeded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch

ENV_ID = "verigym/Spread-v0"
ENV_KWARGS = {"num_agents": 2, "max_cycles": 25}
COPIES = 8
PPO = {
    "num_steps": 32,
    "batch_size": 256,
    "num_epochs": 10,
    "learning_rate": 3e-3,
    "gamma": 0.95,
    "gae_lambda": 0.95,
    "log_std_init": -0.5,
}


def _env():
    from verigym.registration import make

    return make(ENV_ID, **ENV_KWARGS)


def _team_return(act, episodes: int = 20, seed: int = 10_000) -> float:
    """Mean over episodes of the agents' mean return; ``act({agent: obs}) -> {agent: action}``."""
    env = _env()
    totals = []
    for episode in range(episodes):
        observations, _ = env.reset(seed=seed + episode)
        total = 0.0
        while env.agents:
            observations, rewards, _, _, _ = env.step(act({a: observations[a] for a in env.agents}))
            total += float(np.mean(list(rewards.values())))
        totals.append(total)
    return float(np.mean(totals))


def run_verigym(steps: int, seed: int) -> tuple[float, float]:
    import verigym.agents as agents

    agent = agents.make("ippo", _env(), seed=seed, num_envs=COPIES, **PPO)
    start = time.perf_counter()
    agent.learn(_env(), steps)
    seconds = time.perf_counter() - start
    return seconds, _team_return(lambda obs: agent.act(obs, deterministic=True))


def run_sb3(steps: int, seed: int) -> tuple[float, float]:
    import stable_baselines3 as sb3
    import supersuit as ss

    vec = ss.pettingzoo_env_to_vec_env_v1(_env())
    vec = ss.concat_vec_envs_v1(vec, COPIES, num_cpus=0, base_class="stable_baselines3")
    torch.manual_seed(
        seed
    )  # SuperSuit's concatenated vec env has no seed(), which SB3's seed= calls
    model = sb3.PPO(
        "MlpPolicy",
        vec,
        n_steps=PPO["num_steps"],
        batch_size=PPO["batch_size"],
        n_epochs=PPO["num_epochs"],
        learning_rate=PPO["learning_rate"],
        gamma=PPO["gamma"],
        gae_lambda=PPO["gae_lambda"],
        policy_kwargs={"log_std_init": PPO["log_std_init"]},
        device="cpu",
    )
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start

    def act(observations):
        names = list(observations)
        actions, _ = model.predict(np.stack([observations[a] for a in names]), deterministic=True)
        return dict(zip(names, actions))

    return seconds, _team_return(act)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60_000, help="agent transitions per run")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{'seed':>4} {'verigym s':>10} {'SB3+SuperSuit s':>16} {'verigym return':>15} {'SB3 return':>11}"
    )
    ours, theirs = [], []
    for seed in range(args.seeds):
        ours.append(run_verigym(args.steps, seed))
        theirs.append(run_sb3(args.steps, seed))
        print(
            f"{seed:>4} {ours[-1][0]:>10.1f} {theirs[-1][0]:>16.1f} {ours[-1][1]:>15.2f} {theirs[-1][1]:>11.2f}",
            flush=True,
        )
    t_ours, t_sb3 = statistics.median(r[0] for r in ours), statistics.median(r[0] for r in theirs)
    print(
        f"median training time verigym/SB3+SuperSuit = {t_ours:.1f}/{t_sb3:.1f} s = {t_ours / t_sb3:.2f}; "
        f"transitions/s {args.steps / t_ours:.0f} vs {args.steps / t_sb3:.0f}; "
        f"median team return {statistics.median(r[1] for r in ours):.2f} vs {statistics.median(r[1] for r in theirs):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
