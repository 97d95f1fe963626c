"""The model server's batcher: a request abandoned by its client (it left, or its timeout ran
out) leaves no ERROR record in the log (issue 42 §3: asyncio logged ``_GatheringFuture exception
was never retrieved ... CancelledError`` once per abandoned request)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import threading

import pytest

from tests.serve import run_coroutine
from verigym.serve.model.batcher import Batcher, ClientGone, Job, Sampling


class HeldPolicy:
    """Stands in for ``TransformersPolicy``: its decoder's step waits until released, then answers
    every row (with ``fail`` set, the step raises ``ValueError(fail)``)."""

    def __init__(self, fail: str | None = None) -> None:
        self.release = threading.Event()
        self.fail = fail

    def decoder(self) -> _HeldDecoder:
        return _HeldDecoder(self)


class _HeldDecoder:
    """The :class:`~verigym.agents.llm.decoding.Decoder` interface the batcher uses."""

    joinable = False

    def __init__(self, policy: HeldPolicy) -> None:
        self.policy, self.rows, self.keys = policy, {}, itertools.count()

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, prompts, **sampling) -> list[int]:
        keys = [next(self.keys) for _ in prompts]
        self.rows.update(zip(keys, prompts))
        return keys

    def drop(self, keys) -> list:
        for key in keys:
            self.rows.pop(key, None)
        return []

    def step(self) -> list:
        if self.policy.fail:
            raise ValueError(self.policy.fail)
        self.policy.release.wait(10)
        done, self.rows = [(key, f"reply {len(p)}") for key, p in self.rows.items()], {}
        return done


def _job() -> Job:
    return Job([1, 2, 3], 1, Sampling(4, 0.0, 1.0))


@pytest.fixture
def held():
    policy = HeldPolicy()
    batcher = Batcher(policy, 4)
    yield policy, batcher
    policy.release.set()
    batcher.stop()


def test_abandoned_requests_log_no_error(held, caplog):
    policy, batcher = held

    async def scenario():
        with pytest.raises(TimeoutError):  # the request's timeout runs out
            await batcher.run([_job(), _job()], asyncio.Event(), 0.2)
        gone = asyncio.Event()  # the client leaves while its request waits
        jobs = [_job(), _job()]
        task = asyncio.ensure_future(batcher.run(jobs, gone, 30))
        await asyncio.sleep(0.05)
        gone.set()
        with pytest.raises(ClientGone):
            await task
        assert all(job.abandoned for job in jobs)
        task = asyncio.ensure_future(batcher.run([_job()], asyncio.Event(), 30))
        await asyncio.sleep(0.05)
        task.cancel()  # the server stops the request's task
        with pytest.raises(asyncio.CancelledError):
            await task
        gc.collect()  # asyncio reports an unretrieved exception when its future is collected
        await asyncio.sleep(0)
        policy.release.set()  # the batcher goes on serving the next request
        assert await batcher.run([_job()], asyncio.Event(), 30) == [["reply 3"]]
        gc.collect()
        await asyncio.sleep(0)

    with caplog.at_level(logging.DEBUG):
        run_coroutine(scenario())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_a_failed_generation_is_the_requests_error_and_logs_once(caplog):
    batcher = Batcher(HeldPolicy(fail="boom"), 4)
    try:
        with caplog.at_level(logging.DEBUG):
            with pytest.raises(RuntimeError, match="generation failed: boom"):
                run_coroutine(batcher.run([_job(), _job()], asyncio.Event(), 30))
            gc.collect()
    finally:
        batcher.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["generation failed"], errors
