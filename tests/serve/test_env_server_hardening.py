"""``verigym serve-env`` under load and attack: the event loop never runs an env call, the wire
decoder refuses oversized arrays before allocating, a step timeout kills the work behind it,
tokens travel only in ``Authorization``, wrong tokens are rate-limited, ``/schema`` is bounded."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym
import pytest

import verigym  # noqa: F401
import verigym.remote
import verigym.serve
import verigym.serve.app as serve_app
import verigym.serve.auth as serve_auth
from tests.processes import descendants
from verigym.core import UnicodeText, episode_end
from verigym.remote import RemoteEnvError
from verigym.serve.wire import WireError, decode

TEXT = "verigym/GuessNumber-v0"
SLOW = "verigym_test/SlowText-v0"
STEPPING = threading.Event()


class _SlowText(gym.Env):
    """Text-family test env whose step takes ``seconds`` of wall clock (as a bounded verifier does
    while its worker process computes)."""

    metadata = {"render_modes": []}

    def __init__(self, seconds: float = 3.0):
        self.seconds = seconds
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        STEPPING.set()
        time.sleep(self.seconds)
        return "done", 1.0, True, False, episode_end({}, success=True, score=1.0)


if SLOW not in gym.registry:
    gym.register(SLOW, entry_point=_SlowText)


def _slow_text_server(**settings):
    handle = verigym.serve.start(SLOW, TEXT, **settings)
    handle.app.state.server.families[SLOW] = "text"  # served as a text env: the inline path
    return handle


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}"), error.headers


# --- the event loop never waits on an env call ------------------------------------------------


def test_health_answers_while_a_text_session_computes():
    STEPPING.clear()
    with _slow_text_server() as server:
        env = verigym.remote.make(SLOW, url=server.url)
        env.reset(seed=0)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            stepping = pool.submit(env.step, "go")
            assert STEPPING.wait(10)
            started = time.monotonic()
            status, body, _ = _get(server.url + "/health")
            waited = time.monotonic() - started
            assert status == 200 and body["status"] == "healthy"
            assert waited < 1.0, (
                f"/health waited {waited:.2f} s behind a 3 s step"
            )  # liveness, not speed
            assert not stepping.done()
            assert stepping.result(30)[2] is True
        env.close()


def test_a_text_step_past_the_step_timeout_ends_its_session_and_is_counted_until_it_returns():
    STEPPING.clear()
    with _slow_text_server(step_timeout=0.5) as server:
        env, other = (
            verigym.remote.make(SLOW, url=server.url),
            verigym.remote.make(TEXT, url=server.url),
        )
        env.reset(seed=0)
        other.reset(seed=0)
        with pytest.raises(RemoteEnvError) as caught:
            env.step("go")
        assert caught.value.code == "STEP_TIMEOUT"
        assert _get(server.url + "/health")[1]["stuck_workers"] == 1
        assert other.step("50")  # another text session goes on
        deadline = time.monotonic() + 10
        while _get(server.url + "/health")[1]["stuck_workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _get(server.url + "/health")[1]["stuck_workers"] == 0
        other.close()


# --- the wire decoder's byte budget -------------------------------------------------------------


def test_a_short_payload_declaring_a_huge_array_is_refused_before_allocating():
    payload = {"__ndarray__": ["a"], "dtype": "U200000000", "shape": [1]}  # 800 MB of str
    frame = json.dumps({"type": "step", "data": {"action": payload}})
    assert len(frame) <= 97
    tracemalloc.start()
    try:
        with pytest.raises(WireError, match="declares 800000000 bytes"):
            decode(json.loads(frame)["data"]["action"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    # the budget covers a whole payload: many arrays under it one by one are refused together
    many = [{"__ndarray__": [1], "dtype": "U4000000", "shape": [1]} for _ in range(8)]  # 8 x 16 MB
    with pytest.raises(WireError, match="at most"):
        decode(many, max_bytes=64 << 20)
    assert len(decode(many[:3], max_bytes=64 << 20)) == 3
    # base64 data is charged too, and a shape whose product overflows int64 is no way around it
    with pytest.raises(WireError):
        decode({"__ndarray__": "", "dtype": "uint8", "shape": [2**32, 2**32]})


def test_the_server_answers_a_huge_declared_array_with_a_validation_error_and_goes_on():
    import websockets.sync.client as ws_client

    with verigym.serve.start(TEXT) as server:
        with ws_client.connect(server.url.replace("http", "ws", 1) + "/ws") as socket:
            socket.send(json.dumps({"type": "reset", "data": {"seed": 0, "env_id": TEXT}}))
            assert json.loads(socket.recv(timeout=30))["type"] == "observation"
            socket.send(
                json.dumps(
                    {
                        "type": "step",
                        "data": {
                            "action": {"__ndarray__": ["a"], "dtype": "U200000000", "shape": [1]}
                        },
                    }
                )
            )
            error = json.loads(socket.recv(timeout=30))
            assert (
                error["type"] == "error"
                and error["data"]["code"] == "VALIDATION_ERROR"
                and "bytes" in error["data"]["message"]
            )
            socket.send(json.dumps({"type": "step", "data": {"action": "50"}}))
            assert json.loads(socket.recv(timeout=30))["type"] == "observation"


# --- a step timeout kills the work behind it ------------------------------------------------------


def _sandbox_processes() -> set[int]:
    return {
        pid
        for pid, command in descendants().items()
        if "bwrap" in command or " -I -S -c " in command
    }


def test_a_step_timeout_kills_the_sandbox_process_tree():
    from verigym.sandbox import SandboxError, check_available

    try:
        check_available()
    except SandboxError as exc:
        pytest.skip(f"no usable sandbox here: {exc}")
    before = _sandbox_processes()
    with verigym.serve.start("verigym/PythonMath-v0", step_timeout=1.0) as server:
        env = verigym.remote.make("verigym/PythonMath-v0", url=server.url)
        env.reset(seed=0)
        call = '<tool_call>{"name": "python", "arguments": {"code": "import time\\ntime.sleep(60)"}}</tool_call>'
        with pytest.raises(RemoteEnvError) as caught:
            env.step(call)
        assert caught.value.code == "STEP_TIMEOUT"
        # the sandbox's own deadline is 10 s; the session's end must not wait for it
        deadline = time.monotonic() + 5
        while (
            _sandbox_processes() - before or _get(server.url + "/health")[1]["stuck_workers"]
        ) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _sandbox_processes() - before == set()
        assert _get(server.url + "/health")[1]["stuck_workers"] == 0


# --- tokens ------------------------------------------------------------------------------------------


def test_a_token_counts_only_in_one_authorization_header():
    with verigym.serve.start(TEXT, token="s3cret") as server:
        assert _get(server.url + "/health?token=s3cret")[0] == 401
        assert _get(server.url + "/health", {"Authorization": "Bearer s3cret"})[0] == 200
        assert _get(server.url + "/health", {"Authorization": "Token s3cret"})[0] == 401
        parts = urlsplit(server.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        connection.putrequest("GET", "/health")
        connection.putheader("Authorization", "Bearer wrong")
        connection.putheader("Authorization", "Bearer s3cret")  # two credentials: neither counts
        connection.endheaders()
        assert connection.getresponse().status == 401
        connection.close()
        with pytest.raises(RemoteEnvError):
            verigym.remote.make(TEXT, url=server.url + "/?token=s3cret", token="")
        env = verigym.remote.make(
            TEXT, url=server.url.replace("http://", "http://user:s3cret@")
        )  # URL userinfo
        env.reset(seed=0)
        env.close()


def test_repeated_wrong_tokens_get_429_from_that_address_but_the_right_token_goes_through():
    with verigym.serve.start(TEXT, token="s3cret") as server:
        for _ in range(serve_auth.AUTH_FAILURE_LIMIT):
            assert _get(server.url + "/health", {"Authorization": "Bearer guess"})[0] == 401
        status, body, headers = _get(server.url + "/health", {"Authorization": "Bearer guess"})
        assert status == 429 and int(headers["Retry-After"]) > 0 and "too many" in body["detail"]
        # the rightful holder on the same address is never locked out by someone else's guesses
        assert _get(server.url + "/health", {"Authorization": "Bearer s3cret"})[0] == 200
        env = verigym.remote.make(TEXT, url=server.url, token="s3cret")
        env.reset(seed=0)
        env.close()


def _get_from(source: str, url: str, token: str) -> int:
    """The status of ``GET url`` sent from the local address ``source`` (any of 127.0.0.0/8)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=30, source_address=(source, 0)
    )
    try:
        connection.request("GET", parts.path or "/", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_wrong_tokens_from_rotating_addresses_are_limited_per_network():
    sources = [f"127.0.0.{n}" for n in range(2, 14)]  # 12 addresses of one /24, 10 guesses each
    with verigym.serve.start(TEXT, token="s3cret") as server:
        statuses = [
            _get_from(source, server.url + "/health", "guess")
            for source in sources
            for _ in range(serve_auth.AUTH_FAILURE_LIMIT)
        ]
        assert statuses.count(401) == serve_auth.AUTH_NETWORK_FAILURE_LIMIT
        assert statuses[serve_auth.AUTH_NETWORK_FAILURE_LIMIT :] == [429] * (
            len(statuses) - serve_auth.AUTH_NETWORK_FAILURE_LIMIT
        )
        assert _get_from("127.0.0.20", server.url + "/health", "s3cret") == 200


def test_networks_are_slash_24_and_slash_64():
    assert serve_auth.network_of("10.1.2.3") == serve_auth.network_of("10.1.2.250") == "10.1.2.0/24"
    assert serve_auth.network_of("::ffff:10.1.2.3") == "10.1.2.0/24"
    assert serve_auth.network_of("2001:db8:0:1::5") == "2001:db8:0:1::/64"
    assert serve_auth.network_of("2001:db8:0:1:ffff::9") == "2001:db8:0:1::/64"
    assert serve_auth.network_of("unknown") == "unknown"


def test_a_weak_token_is_refused_off_loopback_and_warned_about_on_it(caplog):
    import secrets

    weak = verigym.serve.ServeConfig(env_ids=(TEXT,), token="s3cret")
    with pytest.raises(ValueError, match="weak token.*under 128"):
        verigym.serve.check_exposure(weak, "0.0.0.0")
    with caplog.at_level("WARNING", logger="verigym.serve.auth"):
        verigym.serve.check_exposure(weak, "127.0.0.1")
    assert "under 128" in caplog.text
    assert serve_auth.token_weakness("0123456789abcdef" * 2) is None  # 128 bits of hex
    assert serve_auth.token_weakness(("0123456789abcdef" * 2)[:31]) is not None  # 124 bits
    assert serve_auth.token_weakness(secrets.token_urlsafe(32)) is None
    strong = verigym.serve.ServeConfig(env_ids=(TEXT,), token=secrets.token_hex(16))
    assert verigym.serve.check_exposure(strong, "0.0.0.0").token == strong.token


def test_the_failure_limiter_forgets_old_windows_and_holds_a_bounded_number_of_addresses():
    limiter = serve_auth.FailureLimiter(limit=3, window=1, capacity=5)
    for _ in range(3):
        assert limiter.blocked("10.0.0.1") == 0.0
        limiter.fail("10.0.0.1")
    assert 0.0 < limiter.blocked("10.0.0.1") <= 1.0
    time.sleep(1.1)  # the window (1 s from the first failure) is over: the count starts again
    assert limiter.blocked("10.0.0.1") == 0.0
    for _ in range(3):
        limiter.fail("10.0.2.1")
    assert limiter.blocked("10.0.2.1") > 0.0
    for n in range(100):
        limiter.fail(f"10.0.1.{n}")
    assert len(limiter) == 5  # the 5 most recent addresses; the others' counts are gone
    assert limiter.blocked("10.0.2.1") == 0.0


# --- /schema cache -------------------------------------------------------------------------------------


def test_schema_cache_keeps_the_most_recent_answers_only(monkeypatch):
    monkeypatch.setattr(serve_app, "SCHEMA_CACHE_SIZE", 2)
    ids = (TEXT, "verigym/DoorKey-5x5-v0", "verigym/TicTacToe-Random-v0")
    with verigym.serve.start(*ids) as server:
        for env_id in ids + (TEXT,):
            assert _get(f"{server.url}/schema?env_id={env_id}")[0] == 200
        cache = server.app.state.server.schema_cache
        assert len(cache) == 2
        assert [key[0] for key in cache] == [ids[2], TEXT]


def test_closing_a_sandbox_from_another_thread_kills_the_running_call_and_refuses_later_ones():
    from verigym.sandbox import Limits, PythonSandbox, SandboxError, check_available

    try:
        check_available()
    except SandboxError as exc:
        pytest.skip(f"no usable sandbox here: {exc}")
    sandbox = PythonSandbox(Limits(timeout_s=60))
    assert sandbox.run("1").ok
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(sandbox.run, "import time\ntime.sleep(60)")
        time.sleep(0.5)
        tree = {sandbox.worker_pid, sandbox.notebook_pid}
        sandbox.close()
        result = running.result(timeout=15)  # not the 60 s of the sandbox's own deadline
    assert not result.ok and result.killed == "died"
    assert not tree & set(descendants())
    with pytest.raises(SandboxError, match="closed"):
        sandbox.run("1")


# --- the front door (verigym.serve.front, shared by both servers) -----------------------------------


def test_a_connection_that_trickles_its_headers_is_closed_after_the_header_timeout(monkeypatch):
    import socket

    import verigym.serve.front as front

    monkeypatch.setattr(front, "HEADER_TIMEOUT_S", 0.5)
    with verigym.serve.start(TEXT) as server:
        parts = urlsplit(server.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            deadline = time.monotonic() + 5
            closed = False
            while time.monotonic() < deadline and not closed:
                try:
                    sock.sendall(
                        b"X-Slow: 1\r\n"
                    )  # a byte now and then never completes the headers
                    sock.settimeout(0.2)
                    closed = sock.recv(1024) == b""
                except TimeoutError:
                    continue
                except OSError:  # reset by the server
                    closed = True
            assert closed, "the server kept a connection that never completed its headers"
        # a connection that sends its request in time is served, and kept alive past the timeout
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(1024).startswith(b"HTTP/1.1 200")


def test_over_deep_json_and_over_large_bodies_are_client_errors_on_the_env_server():
    with verigym.serve.start(TEXT, max_message_bytes=4096) as server:
        deep = b"[" * 200_000 + b"]" * 200_000
        for body, status in ((deep[:4000], 400), (b'{"env_id": "' + b"x" * 8192 + b'"}', 413)):
            request = urllib.request.Request(server.url + "/reset", data=body, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    got = response.status
            except urllib.error.HTTPError as error:
                got = error.code
            assert got == status
        request = urllib.request.Request(
            server.url + "/reset", data=b"[" * 2000 + b"]" * 2000, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as caught:  # over the recursion limit
            urllib.request.urlopen(request, timeout=30)
        assert caught.value.code == 400
