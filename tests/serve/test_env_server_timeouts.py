"""``verigym serve-env`` (issue 28 leftovers): an env whose construction overruns ``--step-timeout``
ends the session, and the env the worker finishes building afterwards is closed when it arrives
(a late result never leaks a sandbox or a browser context), for every family (each session runs on
a thread of its own), through ``make``, ``reset`` and the stateless ``POST /reset``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import gymnasium as gym
import pytest

import verigym  # noqa: F401
import verigym.remote
import verigym.serve
from tests.serve import run_coroutine
from verigym.core import UnicodeText
from verigym.remote import RemoteEnvError

SLOW_MAKE = "verigym_test/SlowMake-v0"
BUILT: list[int] = []
CLOSED: list[int] = []
_LOCK = threading.Lock()


class _SlowMake(gym.Env):
    """Test env whose constructor takes ``seconds`` of wall clock (as a sandbox or a browser
    context does while it starts); ``BUILT`` and ``CLOSED`` count constructions and closes."""

    metadata = {"render_modes": []}

    def __init__(self, seconds: float = 1.5):
        time.sleep(seconds)
        self.observation_space = UnicodeText(16)
        self.action_space = UnicodeText(16)
        with _LOCK:
            BUILT.append(id(self))
        self._closed = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        return "done", 0.0, True, False, {}

    def close(self):
        if not self._closed:
            self._closed = True
            with _LOCK:
                CLOSED.append(id(self))


if SLOW_MAKE not in gym.registry:
    gym.register(SLOW_MAKE, entry_point=_SlowMake)


def _wait_for_closes(count: int, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (len(BUILT) < count or len(CLOSED) < len(BUILT)):
        time.sleep(0.05)


@pytest.mark.parametrize("family", ["text", "tool"])
def test_an_env_built_after_its_make_timed_out_is_closed_when_it_arrives(family):
    """Both ways a session builds its env: the ``make`` message and a ``reset`` naming the id; and
    the stateless ``POST /reset``. Each overruns the 0.3 s timeout; every env built late is closed."""
    BUILT.clear()
    CLOSED.clear()
    with verigym.serve.start(SLOW_MAKE, step_timeout=0.3) as server:
        state = server.app.state.server
        state.families[SLOW_MAKE] = (
            family  # once: text ran on a shared pool, tool on a pinned thread
        )
        with pytest.raises(RemoteEnvError) as caught:
            verigym.remote.make(SLOW_MAKE, url=server.url)
        assert caught.value.code == "STEP_TIMEOUT"
        request = urllib.request.Request(
            server.url + "/reset",
            data=json.dumps({"env_id": SLOW_MAKE, "seed": 0}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=30)
        _wait_for_closes(2)
        assert len(BUILT) == 2, BUILT
        assert sorted(CLOSED) == sorted(BUILT), "an env built after its call timed out leaked"
        deadline = time.monotonic() + 10
        while state.stuck_calls() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state.stuck_calls() == 0  # the late calls are over once their env is closed


def test_handoff_gives_the_result_to_exactly_one_of_caller_and_late_handler():
    from verigym.serve.threads import Handoff

    late: list = []
    taken = Handoff(late.append)
    assert taken.wrap(lambda x: x + 1, 1)() == 2  # returned before anyone gave up
    assert taken.abandon() is False and late == []  # the caller must take it
    given_up = Handoff(late.append)
    call = given_up.wrap(lambda: "env")
    assert given_up.abandon() is True
    assert call() is None and late == ["env"]  # the thread handed it to the late handler
    failing = Handoff(lambda _: 1 / 0)  # a failing late handler is logged, not raised
    call = failing.wrap(lambda: "env")
    failing.abandon()
    assert call() is None


def test_a_result_that_arrives_after_the_sessions_task_was_cancelled_goes_to_the_late_handler():
    """Server shutdown cancels a session's task mid-``make``: the env built afterwards is closed."""
    import asyncio
    from types import SimpleNamespace

    from verigym.serve.session import Session
    from verigym.serve.threads import PinnedPool

    late: list[str] = []
    started = threading.Event()

    def build() -> str:
        started.set()
        time.sleep(0.5)
        return "env"

    async def scenario() -> None:
        pool = PinnedPool(1)
        server = SimpleNamespace(config=SimpleNamespace(step_timeout=0), pool=pool)
        session = Session(server)  # type: ignore[arg-type]
        task = asyncio.get_running_loop().create_task(session.call(build, late=late.append))
        deadline = time.monotonic() + 10
        while not started.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        worker = session.worker
        pool.shutdown()
        worker._thread.join(10)  # the thread finished build: it handed "env" to the late handler

    run_coroutine(scenario())
    assert late == ["env"]
