"""The one thread that runs the model server's model work, in arrival order.

:class:`Batcher` takes what the server's event loop queues: jobs (:class:`Job`, ``n`` replies to
one prompt) are sampled together, up to ``max_batch_size`` rows, grouped by sampling options (one
left-padded ``TransformersPolicy.generate`` call per group), and :meth:`Batcher.call` runs any
other model work (the ``tool_choice="required"`` choosing pass) between batches. The event loop
awaits an ``asyncio`` future per item, settled from this thread with ``call_soon_threadsafe``, so
it never blocks on torch: ``/health`` and new requests are answered while a batch runs. A request
whose client left (or that outlived its timeout) is abandoned: skipped if it has not started, its
rows stopped at the next decoding step if it has (``generate(stop_rows=...)``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verigym.agents.llm.policy import Generation, TransformersPolicy

__all__ = ["Batcher", "ClientGone", "Job", "Sampling"]

logger = logging.getLogger(__name__)


class ClientGone(Exception):
    """The client closed its connection before its answer (nobody reads the reply)."""


@dataclass(frozen=True)
class Sampling:
    """How replies are sampled (``TransformersPolicy.generate``'s options); jobs with equal
    options are sampled together.

    Attributes:
        max_tokens: tokens a reply may have (0 only before the server picks the default).
        temperature: >= 0 (0: greedy).
        top_p: in (0, 1].
        stop: strings that end a reply.
        top_logprobs: most likely tokens reported per sampled token (0: none).
    """

    max_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...] = ()
    top_logprobs: int = 0


@dataclass
class Job:
    """``n`` replies to one prompt, sampled on the batcher thread."""

    prompt: list[int]
    n: int
    sampling: Sampling
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future | None = None
    abandoned: bool = False
    """the client stopped waiting (it left, or its timeout): the job is skipped if it has not
    started, and its rows stop at the next decoding step if it has"""


@dataclass
class _Call:
    """Any other model work (the ``"required"`` choosing pass), run on the batcher thread."""

    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future | None = None
    abandoned: bool = False


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _deliver(item: Job | _Call, result: Any, error: BaseException | None = None) -> None:
    """Hand a result from the batcher thread to the waiting request's event loop."""
    if item.loop is None or item.future is None:
        return
    try:
        item.loop.call_soon_threadsafe(_settle, item.future, result, error)
    except RuntimeError:  # the loop is closed: the server stopped, nobody waits
        pass


def _abandon(items: Sequence[Job | _Call]) -> None:
    """Mark ``items`` abandoned (skipped, or stopped at the next decoding step) and cancel their
    futures; a plain cancelled future logs nothing when it is collected."""
    for item in items:
        item.abandoned = True
        if item.future is not None:
            item.future.cancel()


class Batcher:
    """One worker thread that runs all model work: queued requests sampled together (grouped by
    sampling options, at most ``max_batch_size`` rows), and :meth:`call` work between batches.

    Args:
        policy: the model; only this thread calls it.
        max_batch_size: rows (choices) sampled together at most (a larger job runs alone).
    """

    def __init__(self, policy: TransformersPolicy, max_batch_size: int):
        self.policy = policy
        self.max_batch_size = max_batch_size
        self.jobs: queue.Queue[Job | _Call | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="verigym-serve-batcher", daemon=True)
        self.thread.start()

    async def run(
        self, jobs: Sequence[Job], gone: asyncio.Event, timeout: float
    ) -> list[list[Generation]]:
        """Queue ``jobs`` and wait for their replies (one list of ``n`` per job, in order).

        Raises:
            ClientGone: ``gone`` was set (the client left); the jobs are abandoned.
            TimeoutError: ``timeout`` seconds passed; the jobs are abandoned.
            RuntimeError: the generation failed.
        """
        return await self._wait(list(jobs), gone, timeout)

    async def call(self, fn: Callable[[], Any], gone: asyncio.Event, timeout: float) -> Any:
        """Run ``fn()`` on the batcher thread (between batches) and return its result."""
        (result,) = await self._wait([_Call(fn)], gone, timeout)
        return result

    async def _wait(self, items: list[Any], gone: asyncio.Event, timeout: float) -> list[Any]:
        """Queue ``items`` and await each one's future (no ``asyncio.gather``: a gather cancelled
        when its client left holds a ``CancelledError`` nobody retrieves, which asyncio logs at
        ERROR once per abandoned request when it is collected)."""
        if gone.is_set():
            raise ClientGone("the client left before its request was queued")
        loop = asyncio.get_running_loop()
        for item in items:
            item.loop, item.future = loop, loop.create_future()
        for item in items:
            self.jobs.put(item)
        futures = [item.future for item in items]
        watcher = asyncio.ensure_future(gone.wait())
        deadline = loop.time() + timeout
        pending = set(futures)
        try:
            while pending and not watcher.done():
                left = deadline - loop.time()
                if left <= 0:
                    break
                done, pending = await asyncio.wait(
                    pending | {watcher}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(watcher)
                failed = [
                    f
                    for f in done
                    if f is not watcher and not f.cancelled() and f.exception() is not None
                ]
                if failed:  # the first failure is the request's (as gather raised it)
                    _abandon(items)
                    raise failed[0].exception()
        except asyncio.CancelledError:  # the request's task was cancelled (the server stops)
            _abandon(items)
            raise
        finally:
            watcher.cancel()
        if not pending:
            return [f.result() for f in futures]
        _abandon(items)
        if gone.is_set():
            raise ClientGone("the client left before its answer")
        raise TimeoutError(f"generation did not finish within {timeout:.0f} s (request_timeout)")

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                return
            batch: list[Job] = []
            calls: list[_Call] = []
            rows = 0
            while True:
                if isinstance(item, _Call):
                    calls.append(item)
                else:
                    batch.append(item)
                    rows += item.n
                if rows >= self.max_batch_size:
                    break
                try:
                    item = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self.jobs.put(None)
                    break
            self._sample(batch)
            for call in calls:
                if call.abandoned:
                    continue
                try:
                    _deliver(call, call.fn())
                except Exception as exc:  # report to the waiting client, keep serving
                    logger.exception("model call failed")
                    _deliver(call, None, RuntimeError(f"model call failed: {exc}"))

    def _sample(self, batch: list[Job]) -> None:
        groups: dict[Sampling, list[Job]] = {}
        for job in batch:
            if job.abandoned:  # nobody waits for it: do not spend the batch's time on it
                continue
            groups.setdefault(job.sampling, []).append(job)
        for sampling, jobs in groups.items():
            prompts = [job.prompt for job in jobs for _ in range(job.n)]

            def gone(jobs: list[Job] = jobs) -> list[bool]:
                return [job.abandoned for job in jobs for _ in range(job.n)]

            try:
                out = self.policy.generate(
                    prompts,
                    max_new_tokens=sampling.max_tokens,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    stop=sampling.stop,
                    top_logprobs=sampling.top_logprobs,
                    stop_rows=gone,
                )
            except Exception as exc:  # report to the waiting clients, keep serving
                logger.exception("generation failed")
                for job in jobs:
                    _deliver(job, None, RuntimeError(f"generation failed: {exc}"))
                continue
            for job in jobs:
                result, out = out[: job.n], out[job.n :]
                _deliver(job, result)
