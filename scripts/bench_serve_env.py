"""Per-call cost of ``verigym serve-env``'s session threads and of ``--isolate`` (docs/serving.md).

Serves ``verigym/GuessNumber-v0`` from a server process of its own and times, over one WebSocket
session from this process, ``--calls`` reset+step round trips in process and the same with the env in a
child process of its own (``IsolatedEnv``, what ``--isolate`` gives plugin and MuJoCo ids), and
the isolated session's ``make`` (the child's start). Then, with ``--busy`` other sessions blocked
in long calls (``--workers 1``), how long a new session's make+reset takes.

    python scripts/bench_serve_env.py --calls 500
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import threading
import time

import gymnasium as gym

import verigym.remote

TEXT = "verigym/GuessNumber-v0"
ISOLATED = "verigym_bench/GuessNumber-v0"
BUSY = "verigym_bench/Busy-v0"

SERVER = f"""
import sys, time, threading
import gymnasium as gym
import verigym, verigym.serve
from verigym.core import UnicodeText

class Busy(gym.Env):
    metadata = {{"render_modes": []}}
    def __init__(self):
        self.observation_space = UnicodeText(8)
        self.action_space = UnicodeText(8)
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {{}}
    def step(self, action):
        time.sleep(30)
        return "done", 0.0, True, False, {{}}

spec = gym.spec("{TEXT}")
gym.register("{ISOLATED}", entry_point=spec.entry_point, kwargs=spec.kwargs)
gym.register("{BUSY}", entry_point=Busy)
server = verigym.serve.start("{TEXT}", "{ISOLATED}", "{BUSY}", workers=1, step_timeout=120)
state = server.app.state.server
if hasattr(state, "plugin_ids"):
    state.plugin_ids.add("{ISOLATED}")  # isolated as a plugin id is
print("serving at", server.url, flush=True)
while True:
    time.sleep(1)
"""


def _quiet_step(env: gym.Env) -> None:
    try:
        env.step("x")
    except Exception:  # noqa: BLE001 - the server is stopped under it
        pass


def _per_call_ms(env: gym.Env, calls: int) -> float:
    times = []
    for seed in range(calls):
        started = time.perf_counter()
        env.reset(seed=seed)
        env.step("50")
        times.append((time.perf_counter() - started) / 2)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--busy", type=int, default=8)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"(http://\S+)", server.stdout.readline()).group(1)
        plain = verigym.remote.make(TEXT, url=url)
        _per_call_ms(plain, 20)  # warm
        print(f"in process: {_per_call_ms(plain, args.calls):.2f} ms per call (median)")
        started = time.perf_counter()
        isolated = verigym.remote.make(ISOLATED, url=url)
        print(f"isolated: make (the child's start) {time.perf_counter() - started:.2f} s")
        _per_call_ms(isolated, 20)
        print(f"isolated: {_per_call_ms(isolated, args.calls):.2f} ms per call (median)")
        isolated.close()
        busy = [verigym.remote.make(BUSY, url=url) for _ in range(args.busy)]
        for env in busy:
            env.reset(seed=0)
        threads = [threading.Thread(target=_quiet_step, args=(env,), daemon=True) for env in busy]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        started = time.perf_counter()
        victim = verigym.remote.make(TEXT, url=url)
        victim.reset(seed=0)
        took = time.perf_counter() - started
        print(f"a new session's make+reset with {args.busy} others blocked: {took * 1000:.1f} ms")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
