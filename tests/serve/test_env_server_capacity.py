"""Red-team round 5: what holds a slot of ``verigym serve-env``. ``--max-sessions`` bounds every
env it holds, the envs of HTTP ``/reset`` and ``/schema`` requests included (with ``--max-sessions
2``, forty concurrent ``/reset`` requests built forty envs at once), and a client that never reads
its replies is reaped like any idle one without holding up anyone else's reaping."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import gymnasium as gym
import pytest

import verigym.serve
import verigym.serve.app as serve_app
from tests.serve import post_json
from verigym.core import UnicodeText

websockets_sync = pytest.importorskip("websockets.sync.client")

HELD = "verigym_test/HeldMake-v0"
TEXT = "verigym/GuessNumber-v0"
BUILDING = threading.Event()
RELEASE = threading.Event()


class _HeldMake(gym.Env):
    """A text env whose construction waits until the test releases it."""

    metadata = {"render_modes": []}

    def __init__(self):
        BUILDING.set()
        RELEASE.wait(60)
        self.observation_space = UnicodeText(8)
        self.action_space = UnicodeText(8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        return "done", 0.0, True, False, {}


if HELD not in gym.registry:
    gym.register(HELD, entry_point=_HeldMake)


def test_http_envs_count_against_max_sessions():
    BUILDING.clear()
    RELEASE.clear()
    with verigym.serve.start(HELD, max_sessions=1) as server:
        server.app.state.server.families[HELD] = "text"  # in process, as a text env
        first: list = []
        thread = threading.Thread(target=lambda: first.append(post_json(server.url + "/reset", {})))
        thread.start()
        try:
            assert BUILDING.wait(30), "the first /reset never started building its env"
            code, body = post_json(server.url + "/reset", {"seed": 1})
            assert code == 503 and body["code"] == "CAPACITY_REACHED", body
            with urllib.request.urlopen(server.url + "/health", timeout=30) as response:
                assert json.loads(response.read())["status"] == "healthy"
            ws_url = server.url.replace("http", "ws", 1) + "/ws"
            with pytest.raises(Exception, match="503"):
                with websockets_sync.connect(ws_url):
                    pass
        finally:
            RELEASE.set()
            thread.join(60)
        assert first and first[0][0] == 200, first
        code, body = post_json(server.url + "/reset", {"seed": 2})
        assert code == 200, body


def _handshake(sock) -> None:
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )


def _masked_frame(text: str) -> bytes:
    data, mask = text.encode(), os.urandom(4)
    assert len(data) < 126
    return (
        bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    )


def test_a_client_that_never_reads_holds_up_no_reaping(monkeypatch):
    # before: the reaper awaited the silent reader's IDLE_TIMEOUT frame forever, so no session
    # was ever reaped again (and the reader kept its slot)
    monkeypatch.setattr(serve_app, "REAP_SEND_TIMEOUT_S", 0.5)
    with verigym.serve.start(TEXT, idle_timeout=0.5) as server:
        host, port = server.url.rsplit("//", 1)[1].rsplit(":", 1)
        reader = socket.create_connection((host, int(port)))
        try:
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            _handshake(reader)
            reader.sendall(_masked_frame(json.dumps({"type": "reset", "data": {"seed": 1}})))
            burst = _masked_frame(json.dumps({"type": "make", "data": {}})) * 1000
            reader.settimeout(0.5)
            with pytest.raises(OSError):  # the server stops reading it: its replies fill up
                for _ in range(10_000):
                    reader.sendall(burst)
            ws_url = server.url.replace("http", "ws", 1) + "/ws"
            with websockets_sync.connect(ws_url) as idle:
                idle.send(json.dumps({"type": "reset", "data": {"seed": 2}}))
                assert json.loads(idle.recv(timeout=30))["type"] == "observation"
                reply = json.loads(idle.recv(timeout=30))
            assert reply["data"]["code"] == "IDLE_TIMEOUT", reply
            sessions = server.app.state.server.sessions
            deadline = time.monotonic() + 30
            while sessions and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not sessions, "the silent reader's session was never ended"
        finally:
            reader.close()
