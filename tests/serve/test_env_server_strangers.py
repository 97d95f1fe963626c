"""``verigym serve-env`` under load from other clients (issue 43 items 7 and 9): a short frame
cannot make the server allocate what it declares, a refused action holds no memory, a session's
calls never wait behind (or time out behind) another client's, a client cannot make resets slow
through a generator config, and a segfaulting plugin env ends only its own session."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import weakref

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401
import verigym.remote
import verigym.serve
from tests.serve import run_coroutine
from verigym.core import UnicodeText
from verigym.remote import RemoteEnvError
from verigym.serve.wire import WireError, decode, encode, frame_budget

TEXT = "verigym/GuessNumber-v0"
BOMB = '{"type":"step","data":{"action":{"__ndarray__":["a"],"dtype":"U16000000","shape":[1]}}}'
"""87 bytes that declare a 64 MB array."""


# --- the wire budget --------------------------------------------------------------------------------


def test_a_short_frame_cannot_declare_a_big_array():
    assert len(BOMB) < 100
    action = json.loads(BOMB)["data"]["action"]
    with pytest.raises(WireError, match="declares 64000000 bytes"):
        decode(action, max_bytes=frame_budget(len(BOMB)))
    # more strings than the declared shape is refused before the (declared-size) conversion
    many = {"__ndarray__": ["a"] * 50, "dtype": "U1000", "shape": [1]}
    with pytest.raises(WireError, match="does not match shape"):
        decode(many, max_bytes=frame_budget(len(json.dumps(many))))
    # what encode writes always fits the budget of the frame that carries it
    for value in (
        np.arange(4096, dtype=np.int64),
        np.zeros((300, 300), np.float64),
        np.array(["x" * 500, "y"]),
        np.zeros(7, np.complex128),
    ):
        text = json.dumps(encode(value))
        assert np.array_equal(decode(json.loads(text), max_bytes=frame_budget(len(text))), value)


def _rss_peak_kib(pid: int) -> tuple[int, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def _start_server(*args: str, code: str | None = None) -> tuple[subprocess.Popen, str]:
    command = (
        [sys.executable, "-c", code]
        if code is not None
        else [sys.executable, "-m", "verigym", "serve-env", *args, "--port", "0"]
    )
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    line = process.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
    if not match:
        process.kill()
        raise AssertionError(line + process.stdout.read())
    return process, match.group(1)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@pytest.mark.slow  # a server of its own, to read its peak RSS (about 5 s)
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_twenty_four_concurrent_tiny_frames_cost_the_server_little():
    """Each frame declares 64 MB; each gets a clear error and together they cost < 100 MB (they
    took the server from 53 MB to 1.5 GB when the budget did not follow the frame's length)."""
    from websockets.asyncio.client import connect

    process, url = _start_server(TEXT)
    try:
        ws_url = url.replace("http", "ws", 1) + "/ws"

        async def one() -> list[dict]:
            async with connect(ws_url) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                json.loads(await ws.recv())
                replies = []
                for _ in range(3):  # in sequence on one session too
                    await ws.send(BOMB)
                    replies.append(json.loads(await ws.recv()))
                return replies

        async def warm() -> None:
            async with connect(ws_url) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                await ws.recv()

        run_coroutine(warm())  # the env's imports are not what is measured
        rss, _ = _rss_peak_kib(process.pid)

        async def all_of_them() -> list[list[dict]]:
            return await asyncio.gather(*(one() for _ in range(24)))

        results = run_coroutine(all_of_them())
        _, peak = _rss_peak_kib(process.pid)
        for replies in results:
            for reply in replies:
                assert reply["type"] == "error", reply
                assert reply["data"]["code"] == "VALIDATION_ERROR"
                assert "declares 64000000 bytes" in reply["data"]["message"]
        assert (peak - rss) < 100 * 1024, f"the server grew by {(peak - rss) / 1024:.0f} MiB"
        with urllib.request.urlopen(url + "/health", timeout=10) as answer:
            assert json.load(answer)["status"] == "healthy"
    finally:
        _stop(process)


# --- a refused action holds no memory ------------------------------------------------------------

ACTIONS: list[weakref.ref] = []
REFUSES = "verigym_test/RefusesArrays-v0"


class _RefusesArrays(gym.Env):
    """Test env that keeps a weak reference to each action and refuses it (``ValueError``)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = UnicodeText(16)
        self.action_space = gym.spaces.Box(0, 1, (256, 256))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        ACTIONS.append(weakref.ref(action))
        raise ValueError("this env refuses every action")


if REFUSES not in gym.registry:
    gym.register(REFUSES, entry_point=_RefusesArrays)


def test_a_refused_action_is_freed_at_once_not_at_the_next_cyclic_gc():
    ACTIONS.clear()
    env_id = REFUSES
    with verigym.serve.start(env_id) as server:
        env = verigym.remote.make(env_id, url=server.url)
        env.reset(seed=0)
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                with pytest.raises(ValueError, match="refuses every action"):
                    env.step(np.ones((256, 256), np.float32))
            assert len(ACTIONS) == 3
            alive = [ref for ref in ACTIONS if ref() is not None]
            assert not alive, f"{len(alive)} refused actions still held until the cyclic GC"
        finally:
            gc.enable()
        env.close()


# --- each session's calls queue behind its own only ---------------------------------------------

HOLD = threading.Event()
BUSY = "verigym_test/Busy-v0"
QUICK = "verigym_test/Quick-v0"


class _Busy(gym.Env):
    """Test env: ``step`` blocks for up to 2 s (until HOLD is set), as a long code call does."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = UnicodeText(16)
        self.action_space = UnicodeText(16)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        HOLD.wait(2.0)
        return "done", 0.0, True, False, {}


for _id in (BUSY, QUICK):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_Busy)


def test_a_session_is_neither_slowed_nor_timed_out_by_other_clients_calls():
    """Two clients' calls block past ``--step-timeout`` with ``--workers 1``: a new session of a
    text id (once: the shared pool) and of another family (once: pinned to a busy thread) still
    makes and resets at once, and never gets ``STEP_TIMEOUT``."""
    HOLD.clear()
    with verigym.serve.start(BUSY, QUICK, TEXT, workers=1, step_timeout=1.0) as server:
        state = server.app.state.server
        state.families[BUSY] = "text"
        state.families[QUICK] = "tool"
        busy = [verigym.remote.make(BUSY, url=server.url) for _ in range(2)]
        for env in busy:
            env.reset(seed=0)
        errors: list[str] = []

        def block(env) -> None:
            try:
                env.step("x")
            except RemoteEnvError as exc:
                errors.append(exc.code)

        threads = [threading.Thread(target=block, args=(env,)) for env in busy]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.3)  # both blocking calls are running
            for env_id in (TEXT, QUICK):
                started = time.monotonic()
                victim = verigym.remote.make(env_id, url=server.url)
                victim.reset(seed=0)
                took = time.monotonic() - started
                assert took < 1.0, f"{env_id}: make+reset waited {took:.2f} s behind others"
                victim.close()
        finally:
            for thread in threads:
                thread.join(10)
            HOLD.set()
        assert errors == ["STEP_TIMEOUT", "STEP_TIMEOUT"]  # the slow calls' own sessions ended


def test_the_step_timeout_starts_when_the_call_starts():
    """A session whose call waits behind its own previous work (its env's close) is timed from
    the moment its call runs, and a thread with work queued is never handed to a new session."""
    from verigym.serve.threads import PinnedPool

    pool = PinnedPool(1)
    first = pool.assign()
    gate = threading.Event()
    first.later(lambda: gate.wait(5))  # the first session's env closing slowly
    pool.release(first)
    second = pool.assign()
    assert second is not first  # the closing thread is busy: a new session gets its own
    gate.set()
    deadline = time.monotonic() + 5
    while not first.idle() and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.release(second)
    third = pool.assign()
    assert third in (first, second)  # idle threads are reused (a GUI thread keeps its Chromium)
    pool.shutdown()


# --- client-settable generator configs ------------------------------------------------------------


def test_a_client_cannot_set_a_reasoning_gym_generator_config_or_level():
    """A client-set ``config`` made a reset cost 0.5 s (9 ms by default), RG-Bf's top ``level``
    1.2 s (4 ms by default), slowing every other session: both are operator-only now, and
    ``--allow-kwargs level,config`` lets them through, still bounded."""
    from verigym.registration import KwargsRefused, untrusted_kwargs

    for env_id, kwargs in (
        ("verigym/RG-BasicArithmetic-v0", {"config": {"max_terms": 10}}),
        ("verigym/RG-Bf-v0", {"level": 2}),
    ):
        name = next(iter(kwargs))
        with pytest.raises(KwargsRefused) as refused:
            untrusted_kwargs(env_id, kwargs)
        assert refused.value.param == name and "--allow-kwargs" in str(refused.value)
        assert untrusted_kwargs(env_id, kwargs, allow=(name,))[name] == kwargs[name]
        with pytest.raises(KwargsRefused):
            untrusted_kwargs(env_id, {"level": 10**6, "config": {"size": 10**9}}, allow=(name,))


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("verigym/Coverage-10x10-v0", {"size": 20, "obstacle_density": 0.3}),
        ("verigym/IceLake-8x8-v0", {"size": 20}),
        ("verigym/SearchQA-3Hop-v0", {"corpus_size": 200}),
        ("verigym/Sokoban-6x6-B1-v0", {"size": 8, "num_boxes": 3}),
    ],
)
def test_generator_sizes_that_cost_a_reset_over_50_ms_are_operator_only(env_id, kwargs):
    """Measured at their bounds (2 loaded cores): Coverage 0.3 s, IceLake 0.4 s, SearchQA 0.2 s,
    Sokoban 0.5 s a reset, against 3-25 ms by default; the operator may still allow them."""
    from verigym.registration import KwargsRefused, untrusted_kwargs

    for name, value in kwargs.items():
        with pytest.raises(KwargsRefused, match="--allow-kwargs"):
            untrusted_kwargs(env_id, {name: value})
        assert untrusted_kwargs(env_id, {name: value}, allow=(name,)) == {name: value}


# --- a segfaulting plugin env ---------------------------------------------------------------------

_SEGFAULT_SERVER = """
import gymnasium as gym, time, verigym.serve
SEGV = "brokentest/Segfault-v0"
gym.register(SEGV, entry_point="tests.broken_envs:SegfaultEnv")
server = verigym.serve.start(SEGV, "verigym/GuessNumber-v0", isolate={isolate})
server.app.state.server.plugin_ids.add(SEGV)  # as a plugin's table registers it
print("serving at", server.url, flush=True)
while True:
    time.sleep(1)
"""


@pytest.mark.slow  # a server of its own (it must survive the crash) and a child (about 7 s)
def test_a_segfaulting_plugin_env_ends_only_its_own_session():
    process, url = _start_server(code=_SEGFAULT_SERVER.format(isolate=None))
    try:
        other = verigym.remote.make(TEXT, url=url)
        other.reset(seed=0)
        crashing = verigym.remote.make("brokentest/Segfault-v0", url=url)
        _, info = crashing.reset(seed=0)
        assert info["pid"] != process.pid  # built in a child of its own
        with pytest.raises(ValueError, match="no 'bad' action"):
            crashing.step("bad")  # the env's own error, class and message, session goes on
        with pytest.raises(RemoteEnvError) as caught:
            crashing.step("segfault")
        assert caught.value.code == "ENV_CRASHED" and "died" in str(caught.value)
        assert process.poll() is None, "the server died with the env"
        with urllib.request.urlopen(url + "/health", timeout=10) as answer:
            assert json.load(answer)["status"] == "healthy"
        assert other.step("50")[4] is not None  # the other session never noticed
        again = verigym.remote.make("brokentest/Segfault-v0", url=url)
        again.reset(seed=1)
        assert again.step("ok")[2] is True
        again.close()
        other.close()
    finally:
        _stop(process)
