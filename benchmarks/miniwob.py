"""Median step and reset time of verigym's MiniWoB++ envs against the ``miniwob`` package's own
Selenium envs, on the same 10 tasks, side by side in one run (issue 38).

Each episode: one ``reset`` (timed), then ``--steps`` presses of Tab (timed; a step that changes
the focus and returns a full observation). On these 10 tasks focusing an element ends no episode; a
step that ends one anyway is left out of the step medians (upstream answers a final step with an
empty observation, so the two sides' final steps are not the same work) and counted in the last
column. Both sides use the system Chromium, headless, with a 160x210 task area:

* verigym: ``verigym/MiniWoB-<Task>-v0`` (Playwright, the pages served from 127.0.0.1; observation
  = screenshot + element list + utterance; each reset shows a newly loaded page, loaded in a second
  page while the episode before it was played); its reset is also timed with
  ``MiniWoBEnv.preload = False`` (the page loaded at the reset: column ``no preload``);
* miniwob: ``miniwob/<task>-v1`` (Selenium + chromium-driver; observation = screenshot + DOM
  element list + utterance; a reset restarts the episode in the loaded page).

Without chromium-driver or selenium, verigym is timed alone (and the script says so). Needs
``pip install -e .[miniwob]`` (and ``apt-get install -y chromium-driver`` for the Selenium side).

Usage::

    python benchmarks/miniwob.py [--episodes 5] [--steps 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# run as a script, this file's folder comes first on sys.path, where "miniwob" would be this file
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import gymnasium as gym  # noqa: E402

import verigym  # noqa: E402, F401  (registers the verigym ids)
from verigym.envs.gui.miniwob.catalog import env_name  # noqa: E402

TASKS = (
    "click-button",
    "click-checkboxes",
    "enter-text",
    "login-user",
    "choose-list",
    "click-link",
    "click-dialog",
    "click-tab",
    "enter-password",
    "use-autocomplete",
)
"""Tasks on which pressing Tab ends no episode (``focus-text`` is not one: focusing its input is its
task)."""


def time_ours(
    task: str, episodes: int, steps: int, preload: bool = True
) -> tuple[list[float], list[float], int]:
    from verigym.envs.gui.miniwob.env import mw_action

    env = gym.make(f"verigym/{env_name(task)}-v0")
    env.unwrapped.preload = preload
    resets, stepped, ended = [], [], 0
    try:
        env.reset(seed=0)  # warm: the browser and the server start
        for episode in range(episodes):
            start = time.perf_counter()
            env.reset(seed=episode + 1)
            resets.append(time.perf_counter() - start)
            for _ in range(steps):
                start = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(mw_action("press", key="Tab"))
                elapsed = time.perf_counter() - start
                if terminated or truncated:
                    ended += 1
                    break
                stepped.append(elapsed)
    finally:
        env.close()
    return resets, stepped, ended


def peer_available() -> str | None:
    """Why the Selenium side cannot run, or None."""
    try:
        import miniwob  # noqa: F401
        import selenium  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed"
    if not (os.environ.get("MINIWOB_CHROMEDRIVER") or shutil.which("chromedriver")):
        return "chromium-driver is not installed (apt-get install -y chromium-driver)"
    return None


def time_peer(task: str, episodes: int, steps: int) -> tuple[list[float], list[float], int]:
    os.environ.setdefault("MINIWOB_CHROME_BINARY", shutil.which("chromium") or "/usr/bin/chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", shutil.which("chromedriver") or "")
    import miniwob
    from miniwob.action import ActionTypes

    gym.register_envs(miniwob)
    env = gym.make(f"miniwob/{task}-v1")
    resets, stepped, ended = [], [], 0
    try:
        env.reset(seed=0)
        tab: Any = env.unwrapped.create_action(ActionTypes.PRESS_KEY, key=5)  # "<Tab>"
        for episode in range(episodes):
            start = time.perf_counter()
            env.reset(seed=episode + 1)
            resets.append(time.perf_counter() - start)
            for _ in range(steps):
                start = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(tab)
                elapsed = time.perf_counter() - start
                if terminated or truncated:
                    ended += 1
                    break
                stepped.append(elapsed)
    finally:
        env.close()
    return resets, stepped, ended


STEP_TARGET_MS = 25.0
RESET_TARGET_MS = 300.0
"""Issue 38's targets: verigym's median step and reset, and at least as fast as ``miniwob``."""


def _ms(values: list[float]) -> float:
    """Median in milliseconds (NaN for no values: every step of the task ended an episode)."""
    return 1000 * statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    missing = peer_available()
    if missing:
        print(f"miniwob (Selenium) side skipped: {missing}; timing verigym alone")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    header = f"{'task':<18} {'verigym step':>13} {'reset':>8} {'no preload':>11}"
    if not missing:
        header += f" {'miniwob step':>13} {'reset':>8}"
    print(header + "   (median ms)   ended episodes (verigym/miniwob)")
    ours: dict[str, list[float]] = {"reset": [], "step": [], "plain": []}
    peer: dict[str, list[float]] = {"reset": [], "step": []}
    for task in TASKS:
        resets, stepped, ended = time_ours(task, args.episodes, args.steps)
        plain, _, _ = time_ours(task, args.episodes, args.steps, preload=False)
        ours["reset"] += resets
        ours["step"] += stepped
        ours["plain"] += plain
        line = f"{task:<18} {_ms(stepped):>13.1f} {_ms(resets):>8.1f} {_ms(plain):>11.1f}"
        ends = str(ended)
        if not missing:
            resets, stepped, ended = time_peer(task, args.episodes, args.steps)
            peer["reset"] += resets
            peer["step"] += stepped
            line += f" {_ms(stepped):>13.1f} {_ms(resets):>8.1f}"
            ends += f"/{ended}"
        print(f"{line}   {ends:>14}")
    line = f"{'all':<18} {_ms(ours['step']):>13.1f} {_ms(ours['reset']):>8.1f} {_ms(ours['plain']):>11.1f}"
    if not missing:
        line += f" {_ms(peer['step']):>13.1f} {_ms(peer['reset']):>8.1f}"
    print(line)
    step, reset = _ms(ours["step"]), _ms(ours["reset"])
    verdicts = [
        f"step {step:.1f} <= {STEP_TARGET_MS:g} ms: {'yes' if step <= STEP_TARGET_MS else 'no'}",
        f"reset {reset:.1f} <= {RESET_TARGET_MS:g} ms: {'yes' if reset <= RESET_TARGET_MS else 'no'}",
    ]
    if not missing:
        faster = step <= _ms(peer["step"]) and reset <= _ms(peer["reset"])
        verdicts.append(f"step and reset at most miniwob's: {'yes' if faster else 'no'}")
    print("targets: " + "; ".join(verdicts))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
