"""``verigym serve-env`` against in-process envs and against OpenEnv's own server, side by side.

Run::

    python benchmarks/serve_env.py                 # about a minute on 2 cores
    python benchmarks/serve_env.py --steps 500 --seconds 2 --sessions 1 16

What it measures (servers in their own processes on 127.0.0.1, clients in this process):

1. Per-step latency of one session, sequential steps: ``verigym/GuessNumber-v0`` (text) and
   ``verigym/DoorKey-5x5-v0`` (grid) in process vs through ``verigym.remote``; OpenEnv's reference
   echo env (the env of its ``openenv init`` template) in process vs served by OpenEnv's
   ``create_fastapi_app``; and both servers driven by the same client, OpenEnv's
   ``GenericEnvClient``. Overhead = remote p50 - in-process p50.
2. Aggregate steps/s with 1, 16, 64, 256 concurrent sessions (one asyncio client process):
   verigym's text env through :class:`verigym.remote.AsyncRemoteEnv` vs OpenEnv's echo env
   through its async ``GenericEnvClient``.

Targets (issue 17): text overhead p50 <= 1 ms per step; at least OpenEnv's own steps/s;
>= 5,000 aggregate text steps/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time

import numpy as np

TEXT, GRID = "verigym/GuessNumber-v0", "verigym/DoorKey-5x5-v0"


# --- OpenEnv's reference env, served by OpenEnv ---------------------------------------------------------


def _openenv_echo_classes():
    from uuid import uuid4

    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class EchoAction(Action):
        message: str

    class EchoObservation(Observation):
        echoed_message: str = ""
        message_length: int = 0

    class EchoEnvironment(Environment):
        """OpenEnv's template env (``openenv init``): echo the message, reward 0.1 per character."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            self._state = State(episode_id=str(uuid4()), step_count=0)

        def reset(self, seed=None, episode_id=None, **kwargs):
            self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
            return EchoObservation(echoed_message="ready", message_length=0, done=False, reward=0.0)

        def step(self, action, timeout_s=None, **kwargs):
            self._state.step_count += 1
            return EchoObservation(
                echoed_message=action.message,
                message_length=len(action.message),
                done=False,
                reward=0.1 * len(action.message),
                metadata={"step": self._state.step_count},
            )

        @property
        def state(self):
            return self._state

    return EchoEnvironment, EchoAction, EchoObservation


def _serve_openenv(port: int) -> None:
    import socket

    import uvicorn
    from openenv.core.env_server.http_server import create_fastapi_app

    env_cls, action_cls, observation_cls = _openenv_echo_classes()
    app = create_fastapi_app(env_cls, action_cls, observation_cls, max_concurrent_envs=1024)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"serving at http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=1 << 24)).run(
        sockets=[sock]
    )


def _start(command: list[str]) -> tuple[subprocess.Popen, str]:
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", prefix="serve_env_bench_", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = open(log.name).read()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", text)
        if match:
            return process, match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server did not start (log {log.name}): {open(log.name).read()}")


# --- measurements ------------------------------------------------------------------------------------------


def _gym_latencies(env, steps: int, action_fn) -> np.ndarray:
    env.reset(seed=0)
    times, episode = [], 0
    for _ in range(steps):
        action = action_fn(env)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        times.append(time.perf_counter() - start)
        if terminated or truncated:
            episode += 1
            env.reset(seed=episode)
    return np.array(times)


def _text_action(env) -> str:
    return "50"


def _grid_action(env) -> int:
    return 2  # forward: DoorKey episodes run to their step limit


def _openenv_client_latencies(url: str, steps: int, reset_kwargs: dict, action: dict) -> np.ndarray:
    from openenv.core import GenericEnvClient

    times = []
    with GenericEnvClient(
        base_url=url, connect_timeout_s=120, message_timeout_s=120
    ).sync() as client:
        result = client.reset(**reset_kwargs)
        episode = 0
        for _ in range(steps):
            start = time.perf_counter()
            result = client.step(action)
            times.append(time.perf_counter() - start)
            if result.done:
                episode += 1
                client.reset(**{**reset_kwargs, "seed": episode})
    return np.array(times)


def _openenv_in_process(steps: int) -> np.ndarray:
    env_cls, action_cls, _ = _openenv_echo_classes()
    env = env_cls()
    env.reset()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        env.step(action_cls(message="50"))
        times.append(time.perf_counter() - start)
    return np.array(times)


async def _aggregate_verigym(url: str, sessions: int, seconds: float) -> float:
    import verigym.remote

    envs = [await verigym.remote.make_async(TEXT, url=url, timeout=120) for _ in range(sessions)]
    count = 0
    deadline = 0.0

    async def run(env, index):
        nonlocal count
        await env.reset(seed=index)
        episode = 0
        while time.perf_counter() < deadline:
            _, _, terminated, truncated, _ = await env.step("50")
            count += 1
            if terminated or truncated:
                episode += 1
                await env.reset(seed=index * 1000 + episode)

    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    await asyncio.gather(*(run(env, i) for i, env in enumerate(envs)))
    elapsed = time.perf_counter() - start
    for env in envs:
        await env.close()
    return count / elapsed


async def _aggregate_openenv(url: str, sessions: int, seconds: float) -> float:
    from openenv.core import GenericEnvClient

    clients = [
        GenericEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=120)
        for _ in range(sessions)
    ]
    for client in clients:
        await client.connect()
    count = 0
    deadline = 0.0

    async def run(client):
        nonlocal count
        await client.reset()
        while time.perf_counter() < deadline:
            await client.step({"message": "50"})
            count += 1

    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - start
    for client in clients:
        await client.close()
    return count / elapsed


def _ms(times: np.ndarray, q: float = 50) -> float:
    return float(np.percentile(times, q) * 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=2000, help="sequential steps per latency measurement"
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="duration of each aggregate measurement"
    )
    parser.add_argument(
        "--sessions",
        type=int,
        nargs="+",
        default=[1, 16, 64, 256],
        help="concurrent sessions to measure",
    )
    parser.add_argument(
        "--serve-openenv", type=int, default=None, help=argparse.SUPPRESS
    )  # internal: run OpenEnv's server
    args = parser.parse_args(argv)
    if args.serve_openenv is not None:
        _serve_openenv(args.serve_openenv)
        return 0

    import gymnasium as gym

    import verigym  # noqa: F401
    import verigym.remote

    ours, our_url = _start(
        [
            sys.executable,
            "-m",
            "verigym",
            "serve-env",
            TEXT,
            GRID,
            "--port",
            "0",
            "--max-sessions",
            "4096",
        ]
    )
    theirs, their_url = _start([sys.executable, __file__, "--serve-openenv", "0"])
    try:
        rows = []
        for env_id, action_fn in ((TEXT, _text_action), (GRID, _grid_action)):
            local = _gym_latencies(gym.make(env_id), args.steps, action_fn)
            remote_env = verigym.remote.make(env_id, url=our_url)
            remote = _gym_latencies(remote_env, args.steps, action_fn)
            remote_env.close()
            rows.append((f"{env_id} (verigym.remote)", local, remote))
        echo_local = _openenv_in_process(args.steps)
        echo_remote = _openenv_client_latencies(their_url, args.steps, {}, {"message": "50"})
        rows.append(("OpenEnv echo env (OpenEnv server)", echo_local, echo_remote))
        ours_generic = _openenv_client_latencies(
            our_url, args.steps, {"env_id": TEXT, "seed": 0}, {"action": "50"}
        )
        rows.append((f"{TEXT} (OpenEnv GenericEnvClient)", rows[0][1], ours_generic))

        print(f"\nper-step latency, one session, {args.steps} sequential steps (ms)")
        print(
            f"{'env (client)':46s} {'in-proc p50':>11s} {'remote p50':>10s} {'p90':>7s} {'overhead p50':>12s} {'steps/s':>8s}"
        )
        for name, local, remote in rows:
            print(
                f"{name:46s} {_ms(local):11.4f} {_ms(remote):10.3f} {_ms(remote, 90):7.3f} {_ms(remote) - _ms(local):12.3f} {1 / remote.mean():8.0f}"
            )
        text_sps, echo_sps, generic_sps = (
            1 / rows[0][2].mean(),
            1 / rows[2][2].mean(),
            1 / rows[3][2].mean(),
        )
        print(
            f"ratio: verigym text env via verigym.remote / OpenEnv echo via its client, steps/s = {text_sps / echo_sps:.2f}x"
        )
        print(
            f"ratio: same client (GenericEnvClient), verigym server (text env) / OpenEnv server (echo env), steps/s = {generic_sps / echo_sps:.2f}x"
        )

        print(
            f"\naggregate steps/s, concurrent sessions for {args.seconds:g} s each (one asyncio client process)"
        )
        print(f"{'sessions':>8s} {'verigym text':>13s} {'OpenEnv echo':>13s} {'ratio':>7s}")
        for sessions in args.sessions:
            ours_sps = asyncio.run(_aggregate_verigym(our_url, sessions, args.seconds))
            theirs_sps = asyncio.run(_aggregate_openenv(their_url, sessions, args.seconds))
            print(
                f"{sessions:8d} {ours_sps:13.0f} {theirs_sps:13.0f} {ours_sps / theirs_sps:6.2f}x",
                flush=True,
            )
    finally:
        for process in (ours, theirs):
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
