"""Step latency and episodes/s of ``verigym/ClickButton-v0`` against MiniWoB++'s ``click-button-v1``.

Both are one headless system Chromium each, played by the same scripted policy in one run,
alternating repeats: each episode presses Tab once (a step that changes the page and returns a full
observation) and then clicks the button the instruction names, by element reference (the step that
ends the episode). Resets are included in episodes/s.

* verigym: Playwright, offline page, observation = screenshot + accessibility tree (viewport set to
  MiniWoB's 160x210 so both take the same screenshot size);
* MiniWoB++: the ``miniwob`` package (Selenium + chromium-driver), observation = screenshot + DOM
  element list.

Prints the median latency (ms) of the Tab step and of the final click, episodes/s and the ratios
verigym vs MiniWoB++; the target of issue 7 is verigym faster. Note that on the final click MiniWoB++
returns an empty observation (no screenshot) while verigym returns the final page, so the Tab step
is the like-for-like latency. Needs ``pip install -e .[bench,gui]`` and
``apt-get install -y chromium chromium-driver``.

Usage::

    python benchmarks/gui_click_button.py [--episodes 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import verigym  # noqa: F401  (registers the verigym ids)

OURS, PEER = "verigym/ClickButton-v0", "miniwob/click-button-v1"
QUIET_FLAGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)


Policy = Callable[[Any, gym.Env], Any]


def make_ours() -> tuple[gym.Env, Policy, Policy]:
    from verigym.envs.gui.tasks import make_action

    env = gym.make(OURS, viewport_width=160, viewport_height=210)

    def policy(observation: Any, env: gym.Env) -> Any:
        return env.unwrapped.oracle_action()

    return env, lambda observation, env: make_action("press", key="Tab"), policy


def make_peer() -> tuple[gym.Env, Policy, Policy]:
    os.environ.setdefault("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    import miniwob
    from miniwob.action import ActionTypes
    from selenium import webdriver

    base = webdriver.ChromeOptions
    if not getattr(base, "_verigym_quiet", False):

        class QuietOptions(base):  # the closed network here: keep Chromium's background traffic off
            _verigym_quiet = True

            def __init__(self) -> None:
                super().__init__()
                for flag in QUIET_FLAGS:
                    self.add_argument(flag)

        webdriver.ChromeOptions = QuietOptions
    gym.register_envs(miniwob)
    env = gym.make(PEER)

    def policy(observation: Any, env: gym.Env) -> Any:
        target = dict(observation["fields"])["target"]
        ref = next(
            (
                e["ref"]
                for e in observation["dom_elements"]
                if e["tag"] == "button" and e["text"] == target
            ),
            0,
        )
        return env.unwrapped.create_action(ActionTypes.CLICK_ELEMENT, ref=int(ref))

    def tab(observation: Any, env: gym.Env) -> Any:
        return env.unwrapped.create_action(
            ActionTypes.PRESS_KEY, key=5
        )  # "<Tab>" in MiniWoB's key list

    return env, tab, policy


def run(
    make: Callable[[], tuple[gym.Env, Policy, Policy]], episodes: int, seed: int
) -> dict[str, float]:
    """Median Tab-step and final-click latencies (s), episodes/s (resets included), success rate."""
    env, tab, policy = make()
    env.reset(seed=seed)  # warm-up: browser launch not timed
    tabs, clicks, wins = [], [], 0.0
    start = time.perf_counter()
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode + 1)
        tick = time.perf_counter()
        observation, *_ = env.step(tab(observation, env))
        tabs.append(time.perf_counter() - tick)
        for _ in range(10):
            action = policy(observation, env)
            tick = time.perf_counter()
            observation, reward, terminated, truncated, info = env.step(action)
            clicks.append(time.perf_counter() - tick)
            if terminated or truncated:
                wins += float(reward > 0)
                break
    elapsed = time.perf_counter() - start
    env.close()
    return {
        "tab": statistics.median(tabs),
        "click": statistics.median(clicks),
        "eps": episodes / elapsed,
        "success": wins / episodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"verigym": [], "miniwob": []}
    for repeat in range(args.repeats):
        for name, make in (("verigym", make_ours), ("miniwob", make_peer)):
            results[name].append(run(make, args.episodes, seed=1000 * repeat))
    print(
        f"{'':8s} {'Tab step ms':>12s} {'final click ms':>15s} {'episodes/s':>11s} {'success':>8s}   ({args.episodes} episodes x {args.repeats} repeats, medians)"
    )
    summary = {}
    for name, runs in results.items():
        summary[name] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        row = summary[name]
        print(
            f"{name:8s} {1000 * row['tab']:12.1f} {1000 * row['click']:15.1f} {row['eps']:11.2f} {row['success']:8.2f}"
        )
    ours, peer = summary["verigym"], summary["miniwob"]
    print(
        f"ratio    Tab-step latency miniwob/verigym = {peer['tab'] / ours['tab']:.2f}x   "
        f"episodes/s verigym/miniwob = {ours['eps'] / peer['eps']:.2f}x   (> 1: verigym faster)"
    )


if __name__ == "__main__":
    main()
