"""The threads ``verigym serve-env`` runs env calls on, off the event loop: one per session.

Every session (a WebSocket, or one stateless HTTP ``/reset`` or ``/schema``) gets a
:class:`PinnedThread` of its own from :class:`PinnedPool` and runs all its calls there, in order,
so a session's calls queue only behind its own: no other client's call can delay it or count
against its ``--step-timeout`` (which :meth:`verigym.serve.session.Session.call` measures from
the moment the call starts running). A thread is also what Playwright objects are bound to, so a GUI
env sees one thread for its whole life. A thread whose session ended goes back to the pool and is
handed to a new session only once it has nothing left to run (at most ``keep`` idle threads are
kept, each with its Chromium, so GUI sessions do not start a browser each); the others exit. A
thread whose call overran ``--step-timeout`` is retired: it is never reused and exits once the
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
    """One daemon thread that runs every call of the session pinned to it, in order.

    Attributes:
        sessions: sessions pinned to it now (0 or 1).
        pending: jobs queued or running (a thread is handed to a new session only at 0).
        retired: it overran a call and exits once that call returns.
    """

    def __init__(self, on_exit: Callable[[PinnedThread], None]):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self.sessions = 0
        self.pending = 0
        self.retired = False
        self._thread = threading.Thread(target=self._main, name="verigym-env-session", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                loop, future, fn, args = job
                job = None  # the queue entry holds no argument (an action) past its call
                try:
                    if loop is None:
                        fn()
                        continue
                    try:
                        result = fn(*args)
                    except BaseException as exc:  # noqa: BLE001 - handed to the event loop
                        loop.call_soon_threadsafe(_settle, future, None, exc)
                        del exc
                    else:
                        loop.call_soon_threadsafe(_settle, future, result, None)
                        del result
                finally:
                    fn = args = future = None
                    with self._lock:
                        self.pending -= 1
        finally:
            _release_thread_browser()
            self._on_exit(self)

    def _put(self, job: Any) -> None:
        with self._lock:
            self.pending += 1
        self._jobs.put(job)

    def run(self, fn: Callable, *args: Any) -> asyncio.Future:
        """Queue ``fn(*args)``; the returned future of the running loop settles with its result."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._put((loop, future, fn, args))
        return future

    def later(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` (e.g. ``env.close``) after the pending calls, ignoring its errors."""
        self._put((None, None, quiet(fn), ()))

    def idle(self) -> bool:
        """Whether no session is pinned to it and it has nothing queued or running."""
        with self._lock:
            return self.sessions == 0 and self.pending == 0 and not self.retired

    def stop(self) -> None:
        """End the thread after the pending calls."""
        self._jobs.put(None)


def _release_thread_browser() -> None:
    """Close the shared Chromium of this (exiting) thread, where a GUI env ever ran in it."""
    browser = sys.modules.get("verigym.envs.gui.browser")  # loaded only where a GUI env was made
    if browser is not None:
        browser.close_thread_browser()


class PinnedPool:
    """The threads of one server: one per session, idle ones kept for reuse.

    Args:
        keep: idle threads kept for the next sessions (``--workers``); more exit. It bounds no
            session: a new session always gets a thread with nothing queued.

    Attributes:
        workers: every live, non-retired thread (pinned or idle).
        retired: stuck threads still running an abandoned call.
    """

    def __init__(self, keep: int):
        self.size = self.keep = keep
        self.workers: list[PinnedThread] = []
        self.retired = 0
        self._lock = threading.Lock()

    def assign(self) -> PinnedThread:
        """Pin one new session to a thread of its own: an idle one with nothing queued, else a new
        one."""
        with self._lock:
            worker = next((w for w in self.workers if w.idle()), None)
            if worker is None:
                worker = PinnedThread(self._exited)
                self.workers.append(worker)
            worker.sessions += 1
            return worker

    def release(self, worker: PinnedThread) -> None:
        """Unpin the session from ``worker``; the thread is kept for reuse while fewer than
        ``keep`` others are, else it exits after its pending jobs (its env's ``close``)."""
        with self._lock:
            worker.sessions -= 1
            if worker.retired or worker.sessions:
                return
            spare = sum(1 for w in self.workers if w.sessions == 0 and w is not worker)
            if spare >= self.keep and worker in self.workers:
                self.workers.remove(worker)
                worker.stop()

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
