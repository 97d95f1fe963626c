"""The model server's batcher, continuous against static, on one request trace (no HTTP, no envs).

``python benchmarks/serve_batching.py [--model smollm2] [--rounds 2]`` replays a trace shaped like
the main job's served SmolLM2 row through :class:`verigym.serve.model.batcher.Batcher` twice per
round, alternating: once with the policy's continuous decoder, once through ``generate`` in static
batches (what the server did before: a batch runs to its longest reply, new requests wait for it).
The trace: ``--long`` clients with tool-task prompts (~960 tokens) whose replies run to
``max_tokens`` 48 (the base model's filler), ``--short`` clients with ~250-token prompts and
8-token replies (GuessNumber), each ``--turns`` turns; a turn's prompt is the previous one plus its
reply and 40 new tokens (a conversation, so the prefix cache is used as in the server). All clients
start together. Printed per mode: wall seconds, process CPU seconds (load-independent work) and
the request latencies (median, max), with the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import time


class _Static:
    """The policy without ``decoder()``: the batcher samples it in static ``generate`` batches."""

    def __init__(self, policy):
        self.policy = policy

    def generate(self, *args, **kwargs):
        return self.policy.generate(*args, **kwargs)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _client(batcher, Job, Sampling, prompt, max_tokens, turns, rng, latencies, vocab):
    for _ in range(turns):
        started = time.perf_counter()
        [[reply]] = await batcher.run(
            [Job(list(prompt), 1, Sampling(max_tokens, 0.0, 1.0))], asyncio.Event(), 3600
        )
        latencies.append(time.perf_counter() - started)
        prompt = prompt + list(reply.token_ids) + [rng.randrange(10, vocab) for _ in range(40)]


def _replay(policy, continuous, args, seed):
    from verigym.serve.model.batcher import Batcher, Job, Sampling

    rng = random.Random(seed)
    vocab = min(int(policy.model.config.vocab_size), 40000)
    clients = [(960 + rng.randrange(-40, 40), 48) for _ in range(args.long)]
    clients += [(250 + rng.randrange(-20, 20), 8) for _ in range(args.short)]
    prompts = [[rng.randrange(10, vocab) for _ in range(n)] for n, _ in clients]
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()
    batcher = Batcher(policy if continuous else _Static(policy), 32)
    latencies: list[float] = []

    async def run_all():
        await asyncio.gather(
            *(
                _client(
                    batcher, Job, Sampling, p, m, args.turns, random.Random(i), latencies, vocab
                )
                for i, (p, (_, m)) in enumerate(zip(prompts, clients))
            )
        )

    wall, cpu = time.perf_counter(), _cpu()
    try:
        asyncio.run(run_all())
    finally:
        batcher.stop()
    return time.perf_counter() - wall, _cpu() - cpu, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--long", type=int, default=6)
    parser.add_argument("--short", type=int, default=6)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(
        args.model, device="cpu", prefix_cache_bytes=1 << 30
    )
    policy.eos_token_ids = frozenset()  # every reply runs to its max_tokens, as the base model's
    for r in range(args.rounds):
        for continuous in (True, False) if r % 2 == 0 else (False, True):
            load = os.getloadavg()[0]
            wall, cpu, lat = _replay(policy, continuous, args, seed=r)
            print(
                f"round {r} {'continuous' if continuous else 'static':10s} wall {wall:6.1f} s  "
                f"cpu {cpu:6.1f} s  latency median {statistics.median(lat):5.1f} s "
                f"max {max(lat):5.1f} s  ({len(lat)} requests; load {load:.1f} -> "
                f"{os.getloadavg()[0]:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
