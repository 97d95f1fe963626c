"""``verigym serve-env`` and ``verigym.remote``: the OpenEnv wire protocol, driven by verigym's
clients and by OpenEnv's own ``GenericEnvClient``; errors, limits, tokens, restarts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import verigym  # noqa: F401
import verigym.remote
import verigym.serve
from tests.processes import descendants
from tests.serve import run_coroutine
from verigym.checker import check_env, same_values
from verigym.core import UnicodeText, episode_end
from verigym.remote import RemoteEnvError
from verigym.serve.wire import WireError, decode, encode, space_from_json, space_to_json

TEXT, TOOL, GRID, SEAT, MUJOCO = (
    "verigym/GuessNumber-v0",
    "verigym/Calculator-v0",
    "verigym/DoorKey-5x5-v0",
    "verigym/TicTacToe-Random-v0",
    "verigym/Reach-2Link-v0",
)
RELEASE = threading.Event()
CLOSED: list[str] = []


class _Probe(gym.Env):
    """Test env: ``"hang"`` blocks until RELEASE is set, ``"crash"`` raises ZeroDivisionError,
    ``"bad"`` raises ValueError, anything else ends the episode; ``close`` is recorded."""

    metadata = {"render_modes": [], "family": "tool"}

    def __init__(self, tag: str = "probe"):
        self.tag = tag
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        if action == "hang":
            RELEASE.wait(30)
        if action == "crash":
            _ = 1 / 0
        if action == "bad":
            raise ValueError("probe takes no 'bad' action")
        return "done", 1.0, True, False, episode_end({}, success=True, score=1.0)

    def close(self):
        CLOSED.append(self.tag)


PROBE = "verigym_test/Probe-v0"
if PROBE not in gym.registry:
    gym.register(PROBE, entry_point=_Probe)


@pytest.fixture(scope="module")
def server():
    with verigym.serve.start(TEXT, TOOL, GRID, SEAT, MUJOCO, PROBE) as handle:
        yield handle


# --- wire format ----------------------------------------------------------------------------------


def test_values_round_trip_with_types():
    value = {
        "image": np.arange(7 * 7 * 3, dtype=np.uint8).reshape(7, 7, 3),
        "big": np.linspace(0, 1, 5000, dtype=np.float32).reshape(50, 100),
        "mask": np.array([True, False]),
        "scalar": np.int64(3),
        "f": np.float32(0.5),
        "tuple": (1, "a", (2.5, None)),
        "int_keys": {1: "one", 2: [np.int8(-1)]},
        "__tuple__": "a key that looks like a tag",
        "nan": float("nan"),
        "bytes": b"\x00\xff",
        "text": "\ud800 lone surrogate",
    }
    back = decode(json.loads(json.dumps(encode(value))))
    assert back.keys() == value.keys()
    assert (
        back["image"].dtype == np.uint8
        and back["image"].shape == (7, 7, 3)
        and np.array_equal(back["image"], value["image"])
    )
    assert back["big"].dtype == np.float32 and np.array_equal(back["big"], value["big"])
    assert isinstance(
        json.loads(json.dumps(encode(value)))["big"]["__ndarray__"], str
    )  # base64 above the inline limit
    assert type(back["scalar"]) is np.int64 and type(back["f"]) is np.float32
    assert back["tuple"] == (1, "a", (2.5, None)) and isinstance(back["tuple"][2], tuple)
    assert back["int_keys"][1] == "one" and type(back["int_keys"][2][0]) is np.int8
    assert (
        back["__tuple__"] == value["__tuple__"]
        and back["bytes"] == b"\x00\xff"
        and back["text"] == value["text"]
    )
    assert np.isnan(back["nan"])


def test_an_integer_json_cannot_write_travels_as_its_size_so_the_env_judges_it():
    # json.dumps raises past sys.get_int_max_str_digits() digits: the sender's step would raise
    sent = json.loads(json.dumps(encode([10**5000, 10**1200, -7])))
    assert sent[0] == {"__repr__": "<an integer of 16610 bits>"}
    assert decode(sent) == ["<an integer of 16610 bits>", 10**1200, -7]


@pytest.mark.parametrize(
    "bad",
    [
        {"__ndarray__": "AAAA", "dtype": "float64", "shape": [4]},  # 3 bytes for 32
        {"__ndarray__": [1, 2, 3], "dtype": "int64", "shape": [2]},
        {"__ndarray__": [1], "dtype": "no-such-type", "shape": [1]},
        {"__ndarray__": [1], "dtype": "int64", "shape": [-1]},
        {"__bytes__": "not base64!"},
    ],
)
def test_malformed_wire_values_raise_wire_error(bad):
    with pytest.raises(WireError):
        decode(bad)


def test_spaces_round_trip_keep_their_class():
    from verigym.envs.text.base import ReplySpace

    for space in (
        spaces.Box(-1.0, np.array([1.0, 2.0], dtype=np.float32), dtype=np.float32),
        spaces.Discrete(5, start=-2),
        spaces.MultiDiscrete([3, 4], start=[1, 0]),
        spaces.MultiBinary(4),
        spaces.Text(10, charset="ab"),
        spaces.Dict({"image": spaces.Box(0, 255, (3, 3), np.uint8), "mission": UnicodeText(20)}),
        spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (2,)))),
        ReplySpace(300),
    ):
        back = space_from_json(json.loads(json.dumps(space_to_json(space))))
        assert back == space and type(back) is type(space), (space, back)


# --- remote client against in-process envs ------------------------------------------------------------


@pytest.mark.parametrize(
    "env_id", [TEXT, TOOL, GRID, SEAT, pytest.param(MUJOCO, marks=pytest.mark.mujoco)]
)
def test_conformance_checker_passes_through_the_remote_client(server, env_id):
    report = check_env(lambda: verigym.remote.make(env_id, url=server.url), steps=40)
    assert report.passed, report.format()


@pytest.mark.gui
@pytest.mark.slow
def test_conformance_checker_passes_for_a_gui_env_through_the_remote_client():
    with verigym.serve.start("verigym/ClickButton-v0") as handle:
        report = check_env(
            lambda: verigym.remote.make("verigym/ClickButton-v0", url=handle.url), steps=20
        )
        assert report.passed, report.format()
        env = verigym.remote.make("verigym/ClickButton-v0", url=handle.url)
        observation, _ = env.reset(seed=0)
        assert env.observation_space.contains(observation)
        env.close()


@pytest.mark.parametrize("env_id", [TEXT, GRID, TOOL])
def test_same_seeds_and_actions_give_the_in_process_episode_with_the_whole_info(server, env_id):
    local, remote = gym.make(env_id), verigym.remote.make(env_id, url=server.url)
    try:
        assert (
            remote.observation_space == local.observation_space
            and remote.action_space == local.action_space
        )
        assert remote.metadata["family"] == local.unwrapped.metadata["family"]
        sampler = remote.action_space
        sampler.seed(1)
        for seed in (0, 1):
            a, b = local.reset(seed=seed), remote.reset(seed=seed)
            assert same_values(a[0], b[0]) and same_values(a[1], b[1])
            for _ in range(40):
                action = (
                    local.unwrapped.oracle_action()
                    if hasattr(local.unwrapped, "oracle_action") and seed
                    else sampler.sample()
                )
                x, y = local.step(action), remote.step(action)
                timeless = [
                    {k: v for k, v in i.items() if not k.endswith("_time_s")} for i in (x[4], y[4])
                ]  # wall clock
                same = same_values(x[0], y[0]) and same_values(*timeless)
                assert same and x[1:4] == y[1:4], (x, y)
                if x[2] or x[3]:
                    assert "success" in y[4] and "score" in y[4]
                    break
    finally:
        local.close()
        remote.close()


def test_programmer_errors_are_raised_again_and_the_session_goes_on(server):
    env = verigym.remote.make(TEXT, url=server.url)
    with pytest.raises(RemoteEnvError) as caught:
        env.step("50")
    assert caught.value.code == "NOT_RESET"
    env.reset(seed=0)
    with pytest.raises(TypeError, match="str"):
        env.step(123)
    _, _, _, _, info = env.step("")
    assert info["action_error"]
    env.close()
    with pytest.raises(RemoteEnvError):
        verigym.remote.make("verigym/NoSuchEnv-v0", url=server.url)


def test_a_crashed_env_ends_only_its_own_session(server):
    crashing, other = (
        verigym.remote.make(PROBE, url=server.url),
        verigym.remote.make(TEXT, url=server.url),
    )
    crashing.reset(seed=0)
    other.reset(seed=0)
    with pytest.raises(ValueError, match="no 'bad' action"):
        crashing.step("bad")
    with pytest.raises(RemoteEnvError) as caught:
        crashing.step("crash")
    assert caught.value.code == "ENV_CRASHED"
    with pytest.raises(RemoteEnvError):
        crashing.step("ok")
    assert other.step("50")[4] is not None
    other.close()


def test_a_hanging_env_times_out_alone_and_its_worker_is_released():
    RELEASE.clear()
    with verigym.serve.start(PROBE, TEXT, step_timeout=1.0) as server:
        _hang(server)


def _hang(server):
    hanging, other = (
        verigym.remote.make(PROBE, url=server.url),
        verigym.remote.make(TEXT, url=server.url),
    )
    hanging.reset(seed=0)
    other.reset(seed=0)
    started = time.monotonic()
    with pytest.raises(RemoteEnvError) as caught:
        hanging.step("hang")
    assert caught.value.code == "STEP_TIMEOUT" and time.monotonic() - started < 10
    assert other.step("50")  # the text session never noticed
    pool = server.app.state.server.pool
    assert pool.retired == 1  # the stuck thread left the pool
    again = verigym.remote.make(PROBE, url=server.url)  # a fresh pool thread serves new sessions
    again.reset(seed=0)
    assert again.step("ok")[2] is True
    RELEASE.set()  # the abandoned call returns; the retired thread closes the env and exits
    deadline = time.monotonic() + 10
    while pool.retired and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.retired == 0
    other.close()
    again.close()


def test_pickle_and_deepcopy_replay_the_episode_in_a_new_session(server):
    import copy
    import pickle

    env = verigym.remote.make(GRID, url=server.url)
    env.reset(seed=4)
    for action in (0, 2, 2):
        env.step(action)
    clone, twin = pickle.loads(pickle.dumps(env)), copy.deepcopy(env)
    expected = env.step(1)
    for other in (clone, twin):
        got = other.step(1)
        assert same_values(got[0], expected[0]) and got[1:4] == expected[1:4]
        other.close()
    env.close()


GUESSES = ("50", "25", "75", "12")


def test_two_hundred_concurrent_sessions_do_not_cross_talk(server):
    seeds = range(200)
    expected = {}
    local = gym.make(TEXT)
    for seed in seeds:
        local.reset(seed=seed)
        expected[seed] = []
        for guess in GUESSES:
            observation, _, terminated, truncated, _ = local.step(guess)
            expected[seed].append(observation)
            if terminated or truncated:
                break

    async def play(seed: int) -> list[str]:
        env = await verigym.remote.make_async(TEXT, url=server.url)
        try:
            await env.reset(seed=seed)
            out = []
            for guess in GUESSES:
                observation, _, terminated, truncated, _ = await env.step(guess)
                out.append(observation)
                if terminated or truncated:
                    break
                await asyncio.sleep(0)
            return out
        finally:
            await env.close()

    async def main():
        return await asyncio.gather(*(play(seed) for seed in seeds))

    got = run_coroutine(main())
    assert [g for g in got] == [expected[seed] for seed in seeds]
    assert len({tuple(g) for g in got}) >= 5  # different seeds, different games


# --- OpenEnv's own client -----------------------------------------------------------------------------


@pytest.mark.parametrize("env_id, action", [(TEXT, "50"), (TOOL, "calc: 2+2"), (GRID, 2)])
def test_openenv_generic_client_plays_unmodified(server, env_id, action):
    from openenv.core import GenericEnvClient

    local = gym.make(env_id)
    local_obs, local_info = local.reset(seed=7)
    with GenericEnvClient(base_url=server.url).sync() as client:
        result = client.reset(seed=7, env_id=env_id)
        assert result.done is False and result.reward is None
        assert same_values(decode(result.observation["observation"]), local_obs)
        assert same_values(decode(result.observation["info"]), local_info)
        steps = 0
        while not result.done and steps < 60:
            result = client.step({"action": action})
            expected = local.step(action)
            assert result.reward == pytest.approx(expected[1]) and result.done == (
                expected[2] or expected[3]
            )
            steps += 1
        if result.done:
            assert {"success", "score"} <= set(result.observation["info"])
        state = client.state()
        assert state["step_count"] == steps and state["env_id"] == env_id
    with (
        GenericEnvClient(base_url=server.url).sync() as client,
        pytest.raises(RuntimeError, match="NOT_RESET"),
    ):
        client.step({"action": action})


# --- the protocol's error paths -----------------------------------------------------------------------


def _raw(url: str, **kwargs):
    from websockets.sync.client import connect

    return connect(url.replace("http", "ws", 1) + "/ws", **kwargs).__enter__()


def _ask(ws, message) -> dict:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def test_garbage_frames_get_protocol_errors_and_the_session_survives(server):
    with _raw(server.url) as ws:
        assert _ask(ws, "{not json")["data"]["code"] == "INVALID_JSON"
        assert _ask(ws, "[1, 2]")["data"]["code"] == "VALIDATION_ERROR"
        assert _ask(ws, {"type": "dance"})["data"]["code"] == "UNKNOWN_TYPE"
        assert _ask(ws, {"type": "step", "data": {"action": "50"}})["data"]["code"] == "NOT_RESET"
        assert (
            _ask(ws, {"type": "reset", "data": {"env_id": "verigym/Nope-v0"}})["data"]["code"]
            == "UNKNOWN_ENV"
        )
        assert (
            _ask(ws, {"type": "reset", "data": {}})["data"]["code"] == "VALIDATION_ERROR"
        )  # several ids served
        assert (
            _ask(ws, {"type": "reset", "data": {"env_id": TEXT, "seed": -3}})["data"]["code"]
            == "VALIDATION_ERROR"
        )
        assert (
            _ask(ws, {"type": "reset", "data": {"env_id": TEXT, "kwargs": {"no_such_kwarg": 1}}})[
                "data"
            ]["code"]
            == "INVALID_KWARGS"
        )
        assert (
            _ask(ws, {"type": "reset", "data": {"env_id": TEXT, "seed": 1}})["type"]
            == "observation"
        )
        assert _ask(ws, {"type": "step", "data": {}})["data"]["code"] == "VALIDATION_ERROR"
        bad_array = {"__ndarray__": "!!", "dtype": "int64", "shape": [3]}
        assert (
            _ask(ws, {"type": "step", "data": {"action": bad_array}})["data"]["code"]
            == "VALIDATION_ERROR"
        )
        assert _ask(ws, "[" * 100000 + "]" * 100000)["type"] == "error"
        reply = _ask(ws, {"type": "step", "data": {"action": "50"}})
        assert reply["type"] == "observation" and reply["data"]["done"] is False


def test_oversized_messages_and_http_endpoints():
    with verigym.serve.start(TEXT, max_message_bytes=4096) as handle:
        with _raw(handle.url) as ws:
            assert (
                _ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
            )  # one id: env_id optional
            assert (
                _ask(ws, {"type": "step", "data": {"action": "9" * 10000}})["data"]["code"]
                == "MESSAGE_TOO_LARGE"
            )
            assert _ask(ws, {"type": "step", "data": {"action": "50"}})["type"] == "observation"

        def get(path, body=None):
            request = urllib.request.Request(
                handle.url + path,
                data=None if body is None else json.dumps(body).encode(),
                method="GET" if body is None else "POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        assert get("/health") == (
            200,
            {
                "status": "healthy",
                "sessions": 0,
                "max_sessions": 1024,
                "workers": 0,
                "stuck_workers": 0,
                "steps": 1,
            },
        )
        status, schema = get("/schema")
        assert (
            status == 200
            and space_from_json(schema["action"]["x-gymnasium-space"])
            == gym.make(TEXT).action_space
        )
        assert schema["action"]["properties"]["action"]["type"] == "string"
        assert get("/metadata")[1]["env_ids"] == [TEXT]
        status, reset = get("/reset", {"seed": 3})
        assert status == 200 and reset["done"] is False and "observation" in reset["observation"]
        assert get("/step", {"action": "50"})[0] == 409
        assert get("/schema?env_id=verigym/Nope-v0")[0] == 404


def test_max_sessions_gives_server_full_until_one_closes():
    with verigym.serve.start(TEXT, max_sessions=2) as handle:
        first, second = (
            verigym.remote.make(TEXT, url=handle.url),
            verigym.remote.make(TEXT, url=handle.url),
        )
        with pytest.raises(RemoteEnvError) as caught:
            verigym.remote.make(TEXT, url=handle.url)
        assert caught.value.code == "CAPACITY_REACHED" and "server full" in str(caught.value)
        first.close()
        deadline = time.monotonic() + 5
        while len(handle.app.state.server.sessions) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        third = verigym.remote.make(TEXT, url=handle.url)
        third.reset(seed=0)
        third.close()
        second.close()


def test_idle_sessions_are_reaped_and_disconnects_close_the_env():
    with verigym.serve.start(PROBE, idle_timeout=0.3, allow_kwargs=("tag",)) as handle:
        env = verigym.remote.make(PROBE, url=handle.url, tag="idle")
        env.reset(seed=0)
        time.sleep(1.5)
        assert len(handle.app.state.server.sessions) == 0 and "idle" in CLOSED
        with pytest.raises(RemoteEnvError) as caught:
            env.step("x")
        assert caught.value.code in ("IDLE_TIMEOUT", "CONNECTION")
        ws = _raw(handle.url)
        _ask(ws, {"type": "reset", "data": {"kwargs": {"tag": "dropped"}}})
        ws.socket.close()  # the client vanishes without a close frame
        deadline = time.monotonic() + 10
        while "dropped" not in CLOSED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "dropped" in CLOSED


def test_token_is_required_on_every_request_and_upgrade():
    from openenv.core import GenericEnvClient

    with pytest.raises(ValueError, match="without a token"):
        verigym.serve.start(TEXT, host="0.0.0.0")
    with verigym.serve.start(TEXT, token="s3cret") as handle:
        for token in (None, "wrong"):
            with pytest.raises(RemoteEnvError) as caught:
                verigym.remote.make(TEXT, url=handle.url, token=token)
            assert caught.value.code == "CONNECTION" and "token" in str(caught.value)
        with pytest.raises(urllib.error.HTTPError) as http:
            urllib.request.urlopen(handle.url + "/health", timeout=10)
        assert http.value.code == 401
        request = urllib.request.Request(
            handle.url + "/health", headers={"Authorization": "Bearer s3cret"}
        )
        assert json.loads(urllib.request.urlopen(request, timeout=10).read())["status"] == "healthy"
        env = verigym.remote.make(TEXT, url=handle.url, token="s3cret")
        env.reset(seed=0)
        env.close()
        with GenericEnvClient(
            base_url=handle.url.replace("http://", "http://user:s3cret@")
        ).sync() as client:
            assert client.reset(seed=0).done is False


def test_cli_check_url(server, capsys):
    from verigym.cli import main

    assert main(["check", GRID, "--url", server.url, "--steps", "20"]) == 0
    assert f"{GRID} at {server.url}: PASS" in capsys.readouterr().out


# --- the real command: restart, shutdown, nothing left behind ------------------------------------------


def _start_cli(port: int = 0) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "verigym", "serve-env", TEXT, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    line = process.stdout.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
    assert match, line + (process.stdout.read() if process.poll() is not None else "")
    return process, match.group(1)


def test_server_restart_gives_a_connection_error_then_works_again_and_leaves_nothing_behind():
    process, url = _start_cli()
    try:
        env = verigym.remote.make(TEXT, url=url)
        env.reset(seed=0)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        with pytest.raises(RemoteEnvError) as caught:
            env.step("50")
        assert caught.value.code == "CONNECTION"
        port = int(url.rsplit(":", 1)[1])
        process, url = _start_cli(port)
        env = verigym.remote.make(TEXT, url=url)
        assert env.reset(seed=0)[0]
        env.close()
    finally:
        process.terminate()
        process.wait(30)
    assert process.pid not in descendants()
    assert not [cmd for cmd in descendants().values() if "serve-env" in cmd]


def test_eval_env_url_plays_the_episodes_on_the_server(server, tmp_path):
    before = server.app.state.server.steps
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "verigym",
            "eval",
            "--agent",
            "random",
            "--env",
            TEXT,
            "--episodes",
            "2",
            "--env-url",
            server.url,
            "--out",
            str(tmp_path),
            "--workers",
            "1",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0 and "ran 2 episodes (2 ok)" in done.stdout, (
        done.stdout + done.stderr
    )
    assert server.app.state.server.steps > before  # the steps were taken by the served env


@pytest.mark.slow
def test_ray_serve_replicas_keep_each_session_on_one_replica():
    pytest.importorskip("ray.serve")
    from openenv.core import GenericEnvClient

    from verigym.serve.ray_serve import deploy, shutdown

    url = deploy(verigym.serve.ServeConfig(env_ids=(TEXT,)), port=18811, replicas=2)
    try:
        local = gym.make(TEXT)
        envs = [verigym.remote.make(TEXT, url=url) for _ in range(4)]
        for seed, env in enumerate(
            envs
        ):  # sessions interleaved across replicas, each on its own env
            assert env.reset(seed=seed)[0] == local.reset(seed=seed)[0]
        for seed, env in enumerate(envs):
            local.reset(seed=seed)
            assert env.step("50")[0] == local.step("50")[0]
        counts = []
        for _ in range(
            20
        ):  # the proxy spreads /health over both replicas: their session counts add up
            counts.append(
                json.loads(urllib.request.urlopen(url + "/health", timeout=30).read())["sessions"]
            )
        assert max(counts) < 4 and min(counts) > 0
        with GenericEnvClient(base_url=url).sync() as client:
            assert client.reset(seed=0).observation["observation"] == local.reset(seed=0)[0]
        for env in envs:
            env.close()
    finally:
        shutdown()
