"""Red-team round 5: ``--max-sessions`` bounds every env ``verigym serve-env`` holds, the envs of
HTTP ``/reset`` and ``/schema`` requests included (with ``--max-sessions 2``, forty concurrent
``/reset`` requests built forty envs at once)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import gymnasium as gym
import pytest

import verigym.serve
from verigym.core import UnicodeText

websockets_sync = pytest.importorskip("websockets.sync.client")

HELD = "verigym_test/HeldMake-v0"
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


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_http_envs_count_against_max_sessions():
    BUILDING.clear()
    RELEASE.clear()
    with verigym.serve.start(HELD, max_sessions=1) as server:
        server.app.state.server.families[HELD] = "text"  # in process, as a text env
        first: list = []
        thread = threading.Thread(target=lambda: first.append(_post(server.url + "/reset", {})))
        thread.start()
        try:
            assert BUILDING.wait(30), "the first /reset never started building its env"
            code, body = _post(server.url + "/reset", {"seed": 1})
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
        code, body = _post(server.url + "/reset", {"seed": 2})
        assert code == 200, body
