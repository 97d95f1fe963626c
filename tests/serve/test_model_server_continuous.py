"""The model server's batcher is continuous: a request that arrives while a long reply decodes joins
the running batch at the next step and is answered when its own reply is done, with the tokens it
gets alone (issue 42: short replies waited for whole 48-step batches, and clients timed out)."""

from __future__ import annotations

import asyncio
import threading

from tests.serve import run_coroutine
from verigym.serve.model.batcher import Batcher, Job, Sampling


def test_a_short_request_joins_a_long_running_batch_and_leaves_first(tiny_model_dir):
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    short_prompt = policy.encode_messages([{"role": "user", "content": "a much longer prompt"}])
    alone = policy.generate([short_prompt], max_new_tokens=3, temperature=0)[0]
    policy.eos_token_ids = frozenset()  # the long reply runs to its budget
    steps, queued = threading.Event(), threading.Event()
    forwards: list[int] = []

    def count(*_):
        forwards.append(1)
        if len(forwards) == 3:  # the long reply is decoding: hold it until the short one is queued
            steps.set()
            queued.wait(30)

    policy.model.register_forward_hook(count)
    batcher = Batcher(policy, 8)
    try:

        async def scenario():
            long_job = Job([5, 6, 7], 1, Sampling(1000, 0.0, 1.0))
            long_task = asyncio.ensure_future(batcher.run([long_job], asyncio.Event(), 120))
            for _ in range(3000):
                if steps.is_set() or long_task.done():
                    break
                await asyncio.sleep(0.01)
            assert steps.is_set(), long_task
            short_task = asyncio.ensure_future(
                batcher.run([Job(short_prompt, 1, Sampling(3, 0.0, 1.0))], asyncio.Event(), 120)
            )
            await asyncio.sleep(0)  # run() queues the job before it first waits
            queued.set()
            short = await short_task
            assert not long_task.done()  # answered while the long reply still decodes
            long_job.abandoned = True  # its client leaves: its row is dropped at the next step
            long_task.cancel()
            await asyncio.gather(long_task, return_exceptions=True)
            return short[0][0]

        short = run_coroutine(scenario())
    finally:
        batcher.stop()
    assert short.token_ids == alone.token_ids and short.text == alone.text
    assert len(forwards) < 900  # the abandoned long reply stopped well before its 1000 tokens
