"""Registry-driven conformance: every registered id is checked, with no test edit per env.

Gymnasium ids run ``verigym check`` (all checks; the fresh-interpreter rollouts of all ids run in
a few parallel child processes, started in the background when collection finishes). PettingZoo ids run PettingZoo's own API tests with warnings as errors.
"""

from __future__ import annotations

import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import verigym
from verigym.checker import _fresh_trajectories, check_env

FAMILY_MARKS = {"gui": pytest.mark.gui, "mujoco": pytest.mark.mujoco}
STEPS = 120


def _params(api: str) -> list:
    selected = [r for r in verigym.rows() if (r.api == "gymnasium") == (api == "gymnasium")]
    return [pytest.param(r.id, id=r.id, marks=[FAMILY_MARKS[r.family]] if r.family in FAMILY_MARKS else []) for r in selected]


def start_fresh_rollouts(ids: list[str]) -> Future:
    """Start the fresh-interpreter rollouts of ``ids`` in a background thread (the children do the
    work, in parallel); ``tests/conftest.py`` calls this when collection finishes."""
    import gymnasium as gym

    requests = {}
    for env_id in ids:
        env = gym.make(env_id, disable_env_checker=True)
        exact = float(env.unwrapped.metadata.get("determinism_atol", 0.0)) == 0.0
        env.close()
        requests[env_id] = (env_id, {}, 0, STEPS, exact)
    executor = ThreadPoolExecutor(1, thread_name_prefix="fresh-rollouts")
    future = executor.submit(_fresh_trajectories, requests)
    executor.shutdown(wait=False)
    return future


@pytest.fixture(scope="session")
def fresh_rollouts(request) -> dict:
    """Fresh-interpreter rollouts of the collected gymnasium ids (started at collection)."""
    from tests.conftest import FRESH_ROLLOUTS

    future = request.config.stash.get(FRESH_ROLLOUTS, None)
    if future is None:  # collected without the conftest hook
        ids = [item.callspec.params["env_id"] for item in request.session.items if item.originalname == "test_verigym_check"]
        future = start_fresh_rollouts(ids)
    return future.result()


@pytest.mark.parametrize("env_id", _params("gymnasium"))
def test_verigym_check(env_id, fresh_rollouts):
    report = check_env(env_id, steps=STEPS, _fresh=fresh_rollouts.get(env_id))
    assert report.passed, report.format()


@pytest.mark.parametrize("env_id", _params("pettingzoo"))
def test_pettingzoo_api(env_id):
    from pettingzoo.test import (
        api_test,
        parallel_api_test,
        parallel_seed_test,
        render_test,
        seed_test,
    )
    from pettingzoo.utils.conversions import parallel_to_aec

    from verigym.registration import make, row

    item = row(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if item.api == "aec":
            api_test(make(env_id), num_cycles=200)
            seed_test(lambda **kw: make(env_id, **kw), num_cycles=50)
            as_aec = make
        else:
            parallel_api_test(make(env_id), num_cycles=200)
            parallel_seed_test(lambda **kw: make(env_id, **kw), num_cycles=50)
            as_aec = lambda env_id, **kw: parallel_to_aec(make(env_id, **kw))  # noqa: E731
        if make(env_id).metadata.get("render_modes"):
            render_test(lambda **kw: as_aec(env_id, **kw))


def test_every_family_folder_is_registered():
    """Each family folder with a table contributes at least one id of its family."""
    import pathlib

    import verigym.envs

    for family in verigym.FAMILIES:
        if (pathlib.Path(verigym.envs.__file__).parent / family / "table.py").exists():
            assert verigym.rows(family), f"envs/{family}/table.py registers no id of family {family}"
