"""Per-call cost of ``verigym serve-env``'s session threads and of ``--isolate`` (docs/serving.md).

Serves ``verigym/GuessNumber-v0`` from a background thread of this process and times, over one
WebSocket session, ``--calls`` reset+step round trips in process and the same with the env in a
child process of its own (``IsolatedEnv``, what ``--isolate`` gives plugin and MuJoCo ids), and
the isolated session's ``make`` (the child's start). Then, with ``--busy`` other sessions blocked
in long calls, how long a new session's make+reset takes.

    python scripts/bench_serve_env.py --calls 500
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import gymnasium as gym

import verigym  # noqa: F401
import verigym.remote
import verigym.serve
from verigym.core import UnicodeText

TEXT = "verigym/GuessNumber-v0"
ISOLATED = "verigym_bench/GuessNumber-v0"
BUSY = "verigym_bench/Busy-v0"
RELEASE = threading.Event()


class _Busy(gym.Env):
    """``step`` blocks until RELEASE is set (a long code call of another client)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = UnicodeText(8)
        self.action_space = UnicodeText(8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        RELEASE.wait(60)
        return "done", 0.0, True, False, {}


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
    gym.register(ISOLATED, entry_point=gym.spec(TEXT).entry_point, kwargs=gym.spec(TEXT).kwargs)
    gym.register(BUSY, entry_point=_Busy)
    with verigym.serve.start(TEXT, ISOLATED, BUSY, workers=1, step_timeout=120) as server:
        server.app.state.server.plugin_ids.add(ISOLATED)  # isolated as a plugin id is
        plain = verigym.remote.make(TEXT, url=server.url)
        print(f"in process: {_per_call_ms(plain, args.calls):.2f} ms per call (median)")
        started = time.perf_counter()
        isolated = verigym.remote.make(ISOLATED, url=server.url)
        print(f"isolated: make (the child's start) {time.perf_counter() - started:.2f} s")
        print(f"isolated: {_per_call_ms(isolated, args.calls):.2f} ms per call (median)")
        isolated.close()
        busy = [verigym.remote.make(BUSY, url=server.url) for _ in range(args.busy)]
        for env in busy:
            env.reset(seed=0)
        threads = [threading.Thread(target=env.step, args=("x",)) for env in busy]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        started = time.perf_counter()
        victim = verigym.remote.make(TEXT, url=server.url)
        victim.reset(seed=0)
        took = time.perf_counter() - started
        print(f"a new session's make+reset with {args.busy} others blocked: {took * 1000:.1f} ms")
        RELEASE.set()
        for thread in threads:
            thread.join()
        for env in (plain, victim, *busy):
            env.close()


if __name__ == "__main__":
    main()
