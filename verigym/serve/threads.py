"""The threads ``verigym serve-env`` runs env calls on, off the event loop.

A :class:`PinnedThread` runs every call of the sessions pinned to it, in order (Playwright objects
are thread-bound, so a GUI env must see one thread for its whole life); a :class:`PinnedPool`
holds at most ``size`` of them and pins each new session to an idle or the least-loaded one. A
thread whose call overran ``--step-timeout`` is retired: it leaves the pool and exits once the
call returns.

A call whose caller gave up on it (``--step-timeout``, a cancelled session) may still finish: its
:class:`Handoff` then hands the late result to a handler on the thread that computed it (an env
built after its ``make`` timed out is closed there), so nothing it holds leaks.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Handoff", "PinnedPool", "PinnedThread", "quiet"]

logger = logging.getLogger(__name__)


class PinnedThread:
    """One daemon thread that runs every call of the sessions pinned to it, in order."""

    def __init__(self, on_exit: Callable[[PinnedThread], None]):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._on_exit = on_exit
        self.sessions = 0
        self.retired = False
        self._thread = threading.Thread(target=self._main, name="verigym-env-worker", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                loop, future, fn, args = job
                if loop is None:
                    fn()
                    continue
                try:
                    result = fn(*args)
                except BaseException as exc:  # noqa: BLE001 - handed to the event loop
                    loop.call_soon_threadsafe(_settle, future, None, exc)
                else:
                    loop.call_soon_threadsafe(_settle, future, result, None)
        finally:
            _release_thread_browser()
            self._on_exit(self)

    def run(self, fn: Callable, *args: Any) -> asyncio.Future:
        """Queue ``fn(*args)``; the returned future of the running loop settles with its result."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return future

    def later(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` (e.g. ``env.close``) after the pending calls, ignoring its errors."""
        self._jobs.put((None, None, quiet(fn), ()))

    def stop(self) -> None:
        """End the thread after the pending calls."""
        self._jobs.put(None)


def _release_thread_browser() -> None:
    """Close the shared Chromium of this (exiting) thread, where a GUI env ever ran in it."""
    browser = sys.modules.get("verigym.envs.gui.browser")  # loaded only where a GUI env was made
    if browser is not None:
        browser.close_thread_browser()


class PinnedPool:
    """At most ``size`` long-lived worker threads; each blocking session is pinned to one."""

    def __init__(self, size: int):
        self.size = size
        self.workers: list[PinnedThread] = []
        self.retired = 0  # stuck threads still running an abandoned call
        self._lock = threading.Lock()

    def assign(self) -> PinnedThread:
        """Pin one more session: an idle thread, a new one while under ``size``, else the
        least-loaded."""
        with self._lock:
            idle = [w for w in self.workers if w.sessions == 0]
            if idle:
                worker = idle[0]
            elif len(self.workers) < self.size:
                worker = PinnedThread(self._exited)
                self.workers.append(worker)
            else:
                worker = min(self.workers, key=lambda w: w.sessions)
            worker.sessions += 1
            return worker

    def release(self, worker: PinnedThread) -> None:
        """Unpin one session from ``worker``."""
        with self._lock:
            worker.sessions -= 1

    def retire(self, worker: PinnedThread) -> None:
        """Take a stuck worker out of the pool; it exits once its current call returns."""
        with self._lock:
            if worker in self.workers:
                self.workers.remove(worker)
                self.retired += 1
                worker.retired = True
        worker.stop()

    def _exited(self, worker: PinnedThread) -> None:
        with self._lock:
            if worker.retired:
                self.retired -= 1
            elif worker in self.workers:
                self.workers.remove(worker)

    def shutdown(self) -> None:
        """Stop every thread after its pending calls."""
        with self._lock:
            workers, self.workers = list(self.workers), []
        for worker in workers:
            worker.stop()


class Handoff:
    """Hands one call's result either to its caller or, once the caller gave up, to ``late``.

    The call runs ``handoff.wrap(fn)`` on a worker thread; the caller that stops waiting calls
    :meth:`abandon`. Exactly one of the two gets the result: :meth:`abandon` returns ``False``
    when the result was already handed over (the caller must take it: it is on its way), else
    the thread runs ``late(result)`` itself when the call returns (errors logged, never raised).

    Args:
        late: what to do with a result nobody takes (e.g. ``lambda env: env.close()``); ``None``:
            drop it.
    """

    def __init__(self, late: Callable[[Any], Any] | None = None):
        self._late = late
        self._lock = threading.Lock()
        self._state = "pending"  # -> "taken" (the caller gets it) or "abandoned"

    def wrap(self, fn: Callable, *args: Any) -> Callable[[], Any]:
        """``fn(*args)`` as a zero-argument call that hands its result over when it returns."""

        def call() -> Any:
            result = fn(*args)
            with self._lock:
                abandoned = self._state == "abandoned"
                if not abandoned:
                    self._state = "taken"
            if abandoned:
                if self._late is not None:
                    quiet(lambda: self._late(result))()
                return None
            return result

        return call

    def abandon(self) -> bool:
        """The caller stops waiting; ``False`` when the result was handed over already (then the
        caller's future settles with it at once and the caller must take it)."""
        with self._lock:
            if self._state == "taken":
                return False
            self._state = "abandoned"
            return True


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def quiet(fn: Callable[[], Any]) -> Callable[[], None]:
    """``fn`` that logs (at DEBUG) instead of raising: for closing an env that may be broken."""

    def call() -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - closing a broken env
            logger.debug("closing an env raised", exc_info=True)

    return call
