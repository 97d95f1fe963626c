"""Cycles per second of verigym's TicTacToe (and ConnectFour) against PettingZoo's classic envs.

Both envs play full games with uniformly random legal moves through the AEC loop
(``agent_iter`` / ``last`` / ``step``); a cycle is one ``step`` call. PettingZoo's env reads its
mask from the observation dict, verigym's from ``infos[agent]["action_mask"]``. Each measurement is
the median of ``--repeats`` runs of ``--cycles`` cycles; the ratio is verigym / PettingZoo.

Pairs: ``verigym/TicTacToe-v0`` vs ``classic/tictactoe_v3`` (the issue's benchmark) and
``verigym/ConnectFour-v0`` vs ``classic/connect_four_v3``.

Run: python benchmarks/multiagent_tictactoe.py [--cycles 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pettingzoo

import verigym  # noqa: F401  (registers the verigym ids with PettingZoo)


def cycles_per_second(env, cycles: int, seed: int = 0) -> float:
    """Random legal play for ``cycles`` steps (games restart when they end)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    done = 0
    start = time.perf_counter()
    while done < cycles:
        for _agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                action = None
            else:
                mask = (
                    observation["action_mask"]
                    if isinstance(observation, dict)
                    else info["action_mask"]
                )
                action = int(rng.choice(np.flatnonzero(mask)))
            env.step(action)
            done += 1
            if done >= cycles:
                break
        else:
            env.reset()
    return cycles / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    pairs = [
        ("verigym/TicTacToe-v0", "classic/tictactoe_v3"),
        ("verigym/ConnectFour-v0", "classic/connect_four_v3"),
    ]
    for ours_id, peer_id in pairs:
        ours, peer = [], []
        for repeat in range(args.repeats):  # interleaved, so load changes hit both alike
            ours.append(cycles_per_second(pettingzoo.make("aec", ours_id), args.cycles, repeat))
            peer.append(cycles_per_second(pettingzoo.make("aec", peer_id), args.cycles, repeat))
        ours_median, peer_median = statistics.median(ours), statistics.median(peer)
        print(f"{ours_id:32s} {ours_median:10.0f} cycles/s")
        print(f"{peer_id + ' (peer)':32s} {peer_median:10.0f} cycles/s")
        print(f"ratio verigym/peer: {ours_median / peer_median:.2f}")


if __name__ == "__main__":
    main()
