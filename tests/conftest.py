"""Shared pytest setup: headless rendering defaults, the conformance module's fresh-interpreter
rollouts started in the background at collection, and a session-end check that no child process
outlives the tests."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

FRESH_ROLLOUTS = pytest.StashKey[object]()
"""Config stash key of the conformance rollouts (``tests.test_conformance.FreshRollouts``)."""

LIFETIME_WORKERS = (
    "from verigym.workers import _spawned_main",
    "from multiprocessing.resource_tracker import main",
)
"""Command-line marks of process-lifetime workers, which end with the interpreter: module-level
pools reaped at exit (``tests/test_processes.py`` checks that they are) and multiprocessing's
resource tracker (it exits when its pipe from this process closes)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the fresh-interpreter rollouts of the collected conformance ids now: their children run
    beside the tests collected before ``test_conformance.py`` (on 2 cores, one is otherwise idle).
    Under pytest-xdist every worker collects the same ids and rolls out its share of them."""
    ids = [
        item.callspec.params["env_id"]
        for item in session.items
        if getattr(item, "originalname", None) == "test_verigym_check"
    ]
    if ids and not session.config.option.collectonly:
        from tests.test_conformance import start_fresh_rollouts

        shared_dir = None
        if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' basetemps share a parent directory
            shared_dir = session.config._tmp_path_factory.getbasetemp().parent
        session.config.stash[FRESH_ROLLOUTS] = start_fresh_rollouts(ids, shared_dir)


def _stop_fresh_rollouts(session: pytest.Session) -> None:
    """Kill the rollout children if the run ended before the conformance tests used them. Under
    xdist a worker's share may still be read by another worker's tests: unless the run is being
    stopped, the worker waits for its share to be published instead."""
    from tests.processes import descendants

    rollouts = session.config.stash.get(FRESH_ROLLOUTS, None)
    future = None if rollouts is None else rollouts.future
    if future is None or future.done():
        return
    if rollouts.shared and not (session.shouldstop or session.shouldfail):
        future.result(timeout=1200)
        return
    for pid, command in descendants().items():
        if "verigym.checker import _child_main" in command:
            os.kill(pid, signal.SIGKILL)
    future.result(timeout=60)


def _lifetime_pids() -> set[int]:
    """Process-lifetime workers and their descendants (multiprocessing's daemon workers included)."""
    import multiprocessing

    from tests.processes import descendants

    roots = {p.pid for p in multiprocessing.active_children() if p.daemon}
    roots |= {
        pid
        for pid, command in descendants().items()
        if any(mark in command for mark in LIFETIME_WORKERS)
    }
    return roots | {child for root in roots for child in descendants(root)}


@pytest.fixture(autouse=True, scope="session")
def _no_child_process_survives(request: pytest.FixtureRequest):
    """After the last test: every subprocess a test or an env started has ended (the shared
    Chromium is shut down first; process-lifetime workers are checked by test_processes.py)."""
    yield
    from tests.processes import descendants

    _stop_fresh_rollouts(request.session)
    if "verigym.envs.gui.browser" in sys.modules:
        sys.modules["verigym.envs.gui.browser"].close_shared_browser()
    deadline = time.monotonic() + 15
    while True:
        left = {
            pid: command for pid, command in descendants().items() if pid not in _lifetime_pids()
        }
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"child processes outlived the test session: {left}"


@pytest.fixture(scope="session")
def one_torch_thread():
    """torch on one thread for the rest of the session (the model tests share two cores)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, one_torch_thread):
    """A 2-layer character-level model with a ChatML chat template (the LLM agents' and the model
    server's tests, tests/agents/llm and tests/serve)."""
    from verigym.agents.llm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-chatml"))
