"""Red-team round 5: what one client's frames cost ``verigym serve-env``'s event loop.

A frame is never inflated by the server (no permessage-deflate: a 16 KB compressed frame was 16 MB of
JSON), and a large frame is parsed and decoded on the server's parser thread, not on the event loop
(twenty 16 MB frames held ``/health`` and every other session for 19 s).
"""

from __future__ import annotations

import json
import threading

import pytest

import verigym.serve
import verigym.serve.session as serve_session
from verigym.serve.session import INLINE_FRAME_BYTES

websockets_sync = pytest.importorskip("websockets.sync.client")

TEXT = "verigym/GuessNumber-v0"


def _ws_url(handle) -> str:
    return handle.url.replace("http", "ws", 1) + "/ws"


def test_the_env_server_does_not_negotiate_permessage_deflate():
    with verigym.serve.start(TEXT) as server:
        with websockets_sync.connect(_ws_url(server), compression="deflate") as ws:
            assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv())["type"] == "observation"


def test_a_large_frame_is_parsed_and_decoded_off_the_event_loop(monkeypatch):
    threads: list[tuple[int, str]] = []
    real_loads, real_decode = serve_session.loads_json, serve_session.ServedEnvs.decode

    def loads(text):
        threads.append((len(text), threading.current_thread().name))
        return real_loads(text)

    def decode(self, value, frame_bytes=None):
        threads.append((-1, threading.current_thread().name))
        return real_decode(self, value, frame_bytes)

    monkeypatch.setattr(serve_session, "loads_json", loads)
    monkeypatch.setattr(serve_session.ServedEnvs, "decode", decode)
    with verigym.serve.start(TEXT) as server:
        with websockets_sync.connect(_ws_url(server), compression=None) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv())["type"] == "observation"
            small = [name for _, name in threads]
            threads.clear()
            guess = "5" + " " * INLINE_FRAME_BYTES  # a frame over the inline bound
            ws.send(json.dumps({"type": "step", "data": {"action": guess}}))
            reply = json.loads(ws.recv())
            assert reply["type"] == "observation", reply
    assert small and not any(name.startswith("verigym-parse") for name in small), small
    assert len(threads) == 2 and all(name.startswith("verigym-parse") for _, name in threads), (
        threads
    )
