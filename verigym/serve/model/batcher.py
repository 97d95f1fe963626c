"""The one thread that runs the model server's model work: continuous (iteration-level) batching.

:class:`Batcher` takes what the server's event loop queues. Jobs (:class:`Job`, ``n`` replies to
one prompt) join the running batch between decoding steps, up to ``max_batch_size`` rows, and
leave it as soon as their replies are done (EOS, a stop string, ``max_tokens``) or their client is
gone: one :class:`~verigym.agents.llm.decoding.Decoder` (the decoding step
``TransformersPolicy.generate`` uses too) samples every row of every job in one forward pass per
token, each row with its own options, so a short reply never waits for a long batch to end.
:meth:`Batcher.call` runs any other model work (the ``tool_choice="required"`` choosing pass)
between steps. The event loop awaits an ``asyncio`` future per item, settled from this thread with
``call_soon_threadsafe``, so it never blocks on torch: ``/health`` and new requests are answered
while the batch decodes. A request whose client left (or that outlived its timeout) is abandoned:
skipped if it has not joined, its rows dropped at the next step if it has.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    adapter: str | None = None
    """the served LoRA adapter its rows sample under (``None``: the base model); rows of every
    adapter share the running batch"""
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future | None = None
    abandoned: bool = False
    """the client stopped waiting (it left, or its timeout): the job is skipped if it has not
    started, and its rows stop at the next decoding step if it has"""
    keys: list[int] = field(default_factory=list)
    """its rows' keys in the running batch, once it has joined"""
    replies: dict[int, Generation] = field(default_factory=dict)
    """its finished rows' replies, by key"""


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
    """One worker thread that runs all model work: jobs join and leave one running batch between
    decoding steps (at most ``max_batch_size`` rows), and :meth:`call` work runs between steps.

    Args:
        policy: the model; only this thread calls it. Its ``decoder()`` gives the running batch.
        max_batch_size: rows (choices) sampled together at most (a larger job runs alone).
    """

    def __init__(self, policy: TransformersPolicy, max_batch_size: int):
        self.policy = policy
        self.max_batch_size = max_batch_size
        self.jobs: queue.Queue[Job | _Call | None] = queue.Queue()
        self._owner: dict[int, Job] = {}  # row key -> its job, for the rows in the batch
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
        """Run ``fn()`` on the batcher thread (between decoding steps) and return its result."""
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

    # -- the batcher thread ------------------------------------------------------------------------------
    def _new_decoder(self) -> Any:
        return self.policy.decoder()

    def _loop(self) -> None:
        decoder = self._new_decoder()
        running: list[Job] = []
        waiting: deque[Job] = deque()
        while True:
            # new work: wait for it when nothing runs, else take what came during the last step
            items: list[Job | _Call | None] = []
            if not running and not waiting:
                items.append(self.jobs.get())
            while True:
                try:
                    items.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            if None in items:
                return
            for item in items:
                if isinstance(item, _Call):
                    self._run_call(item)
                elif item is not None:
                    waiting.append(item)
            # leave: the rows of jobs nobody waits for any more
            gone = [job for job in running if job.abandoned]
            if gone:
                decoder.drop([key for job in gone for key in job.keys])
                for job in gone:
                    self._forget(job)
                running = [job for job in running if not job.abandoned]
            # join: waiting jobs in arrival order while their rows fit (a larger job runs alone)
            decoding = len(decoder) > 0
            while waiting:
                job = waiting[0]
                if job.abandoned:
                    waiting.popleft()
                    continue
                if (decoding and not decoder.joinable) or (
                    len(decoder) and len(decoder) + job.n > self.max_batch_size
                ):
                    break
                waiting.popleft()
                try:
                    self._join(decoder, job)
                except Exception as exc:  # the job's prompt failed to prefill: its error only
                    logger.exception("generation failed")
                    _deliver(job, None, RuntimeError(f"generation failed: {exc}"))
                    continue
                running.append(job)
            if not running:
                continue
            # one decoding step for every row
            try:
                finished = decoder.step()
            except Exception as exc:  # report to the waiting clients, keep serving
                logger.exception("generation failed")
                for job in running:
                    self._forget(job)
                    _deliver(job, None, RuntimeError(f"generation failed: {exc}"))
                running = []
                decoder = self._new_decoder()
                continue
            for key, reply in finished:
                job = self._owner.get(key)
                if job is not None:
                    job.replies[key] = reply
            still: list[Job] = []
            for job in running:
                if len(job.replies) == len(job.keys):
                    self._forget(job)
                    if not job.abandoned:
                        _deliver(job, [job.replies[key] for key in job.keys])
                else:
                    still.append(job)
            running = still

    def _join(self, decoder: Any, job: Job) -> None:
        """Prefill ``job``'s ``n`` rows into the running batch."""
        sampling = job.sampling
        job.keys = decoder.add(
            [job.prompt] * job.n,
            max_new_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop=sampling.stop,
            top_logprobs=sampling.top_logprobs,
            adapter=job.adapter,
        )
        job.replies = {}
        for key in job.keys:
            self._owner[key] = job

    def _forget(self, job: Job) -> None:
        for key in job.keys:
            self._owner.pop(key, None)

    def _run_call(self, call: _Call) -> None:
        if call.abandoned:
            return
        try:
            _deliver(call, call.fn())
        except Exception as exc:  # report to the waiting client, keep serving
            logger.exception("model call failed")
            _deliver(call, None, RuntimeError(f"model call failed: {exc}"))
