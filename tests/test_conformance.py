"""Registry-driven conformance: every registered id is checked, with no test edit per env.

Gymnasium ids run ``verigym check`` (all checks; the fresh-interpreter rollouts of all ids run in
a few parallel child processes, started in the background when collection finishes; under
pytest-xdist each worker rolls out its share of the ids and the workers share the results). PettingZoo ids run PettingZoo's own API tests with warnings as errors.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import verigym
from tests.envs.tool.support import WORKSPACE_VARIANT_IDS
from verigym.checker import _fresh_trajectories, check_env

FAMILY_MARKS = {"gui": pytest.mark.gui, "mujoco": pytest.mark.mujoco}
STEPS = 120
# Rollout length per family (check_env's ``steps``: the determinism and fresh-interpreter rollouts,
# and the other play before reset_leak's replay): 120 where steps are cheap array updates (grid
# worlds, MuJoCo: their episodes are long); 30 where a step or a reset is a task generator, a
# verifier, a sandbox or a browser call (still several episodes of every text/tool/GUI task, 30 of
# a single-turn one; the checker's own default is 200, its other play 60 steps)
CHEAP_STEP_FAMILIES = {"grid", "mujoco"}
ITEM_STEPS = 10
"""Rollout length of a reasoning-gym id (``RG-*``): each step is a whole episode, a newly generated
item and its scorer, so 10 steps are 10 tasks (the 104 ids share one env class; 30 steps made them
the default run's largest cost)."""


def steps_for(env_id: str) -> int:
    """The rollout length ``check_env`` is given for ``env_id`` (see ``STEPS``)."""
    from verigym.registration import row

    item = row(env_id)
    if item.family in CHEAP_STEP_FAMILIES:
        return STEPS
    return ITEM_STEPS if item.entry_point.endswith(":ReasoningGymEnv") else STEPS // 4


# Variants checked in the slow run only: each costs 15-50 s of sandboxed or browser episodes, and
# its class is checked in the default run through an id that draws from the same code paths
# (RepoFix-v0 and Terminal-v0 from every repository, level and template; GUI_DEFAULT_IDS through
# the one GUI env class, whose every page is played by its oracle and seeded twice in
# tests/envs/gui/test_gui.py; the -Hard rows only enlarge their pages)
GUI_DEFAULT_IDS = {"verigym/ClickButton-v0"}


def _rg_default_datasets() -> frozenset[str]:
    """The reasoning-gym datasets whose ids are checked in the default run: every dataset with a
    code path of its own in ``ReasoningGymEnv`` (scored by sympy, by eval or linearly, seeded by
    hash, reseeded, scored where generated) and the first of each reasoning-gym category (its
    module: algebra, arithmetic, games, ...). The other ~70 ids share those paths; the slow run
    checks them."""
    from reasoning_gym.factory import DATASETS

    from verigym.envs.text import reasoning_gym_env as rg

    own_paths = (
        rg.SYMPY_SCORED
        | rg.EVAL_SCORED
        | rg.LINEAR_SCORED
        | rg.HASH_SEEDED_DATASETS
        | rg.RESEED_DATASETS
        | rg.SCORED_WHERE_GENERATED
    )
    first: dict[str, str] = {}
    for name in sorted(DATASETS):
        first.setdefault(DATASETS[name][0].__module__.split(".")[1], name)
    return frozenset(own_paths | set(first.values()))


RG_DEFAULT_DATASETS = _rg_default_datasets()
SLOW_CHECK_IDS = {
    *WORKSPACE_VARIANT_IDS,
    *(
        r.id
        for r in verigym.rows("gui")
        if ".miniwob." not in r.entry_point and r.id not in GUI_DEFAULT_IDS
    ),
    # the world family (issue 39): a Crafter check costs ~10 s of CPU (world generation, many
    # resets); verigym/Crafter-v0 stays in the default run (its text view through
    # LanguageWrapper included), the text class and the goal rows share its code
    *(r.id for r in verigym.rows("world") if r.id != "verigym/Crafter-v0"),
    # the reasoning-gym ids but those of RG_DEFAULT_DATASETS (see there)
    *(
        r.id
        for r in verigym.rows("text")
        if r.entry_point.endswith(":ReasoningGymEnv")
        and r.kwargs.get("dataset") not in RG_DEFAULT_DATASETS
    ),
    # the MiniWoB++ ids (issue 38): a check costs 1-2 min of page loads (60 s for ClickButton), over
    # the default run's budget, so the full check is slow; the default run makes each and checks
    # its family (test_miniwob_id_makes_in_its_family, no page opened), and
    # tests/envs/gui/test_miniwob.py covers their one env class (verdict, seeding, typed code,
    # drags, server lifetime)
    *(r.id for r in verigym.rows("gui") if ".miniwob." in r.entry_point),
}
MINIWOB_IDS = sorted(r.id for r in verigym.rows("gui") if ".miniwob." in r.entry_point)
MINIWOB_CHEAP_CHECKS = ("family",)
"""The checks every MiniWoB++ id gets in the default run: ``make`` (the env is built; no page is
opened before ``reset``) and ``family``; ~7 ms an id."""


def _params(api: str) -> list:
    selected = [r for r in verigym.rows() if (r.api == "gymnasium") == (api == "gymnasium")]
    return [
        pytest.param(
            r.id,
            id=r.id,
            marks=([FAMILY_MARKS[r.family]] if r.family in FAMILY_MARKS else [])
            + ([pytest.mark.slow] if r.id in SLOW_CHECK_IDS else []),
        )
        for r in selected
    ]


def _xdist_share() -> tuple[int, int]:
    """(this worker's index, worker count) under pytest-xdist; ``(0, 1)`` in a plain run."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return (int(name[2:]), count) if name.startswith("gw") and count > 1 else (0, 1)


class FreshRollouts:
    """The fresh-interpreter rollouts of the collected ids, shared between xdist workers.

    Every worker collects the same ids. In a plain run one background thread rolls out all of
    them (in parallel children). Under xdist, worker ``k`` of ``n`` rolls out ``ids[k::n]`` in one
    child and publishes the result as a pickle in ``shared_dir`` (the workers' common temporary
    directory); a conformance test of an id from another worker's share reads that file, waiting
    for it. If it never appears (that worker died), the test's worker rolls the id out itself.

    Args:
        ids: the collected gymnasium ids, in collection order (identical on every worker).
        shared_dir: directory common to all workers (``None`` in a plain run).
    """

    def __init__(self, ids: list[str], shared_dir: pathlib.Path | None) -> None:
        self._index, self._count = _xdist_share() if shared_dir is not None else (0, 1)
        self._owner = {env_id: i % self._count for i, env_id in enumerate(ids)}
        self._shared_dir = shared_dir
        self.shared = self._count > 1
        """Whether other xdist workers read this worker's share."""
        self._loaded: dict[int, dict] = {}
        own = [env_id for env_id in ids if self._owner[env_id] == self._index]
        requests = {env_id: _request(env_id) for env_id in own}
        executor = ThreadPoolExecutor(1, thread_name_prefix="fresh-rollouts")
        self.future: Future = executor.submit(self._run_and_publish, requests)
        executor.shutdown(wait=False)

    def _path(self, index: int) -> pathlib.Path:
        assert self._shared_dir is not None
        return self._shared_dir / f"fresh-rollouts-{index}-of-{self._count}.pickle"

    def _run_and_publish(self, requests: dict) -> dict:
        try:
            result = (
                _fresh_trajectories(requests, workers=1 if self._count > 1 else None)
                if requests
                else {}
            )
        except Exception as error:  # published too, so the other workers do not wait for it
            result = {
                env_id: ("error", f"the fresh rollouts failed: {error!r}") for env_id in requests
            }
        if self._shared_dir is not None:
            partial = self._path(self._index).with_suffix(".partial")
            partial.write_bytes(pickle.dumps(result))
            partial.replace(self._path(self._index))  # atomic: readers never see half a file
        return result

    def get(self, env_id: str, timeout: float = 1200.0):
        """The rollout of ``env_id`` (``("ok", trajectory)`` or ``("error", message)``), or ``None``
        for an id that was not collected."""
        owner = self._owner.get(env_id)
        if owner is None:
            return None
        if owner == self._index:
            return self.future.result().get(env_id)
        if owner not in self._loaded:
            path = self._path(owner)
            deadline = time.monotonic() + timeout
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            if not path.exists():
                return _fresh_trajectories({env_id: _request(env_id)}, workers=1)[env_id]
            self._loaded[owner] = pickle.loads(path.read_bytes())
        return self._loaded[owner].get(env_id)


def _request(env_id: str) -> tuple[str, dict, int, int, bool]:
    """The fresh-rollout request of ``env_id``: exact comparison unless the env declares a tolerance."""
    import gymnasium as gym

    env = gym.make(env_id, disable_env_checker=True)
    exact = float(env.unwrapped.metadata.get("determinism_atol", 0.0)) == 0.0
    env.close()
    return (env_id, {}, 0, steps_for(env_id), exact)


def start_fresh_rollouts(ids: list[str], shared_dir: pathlib.Path | None = None) -> FreshRollouts:
    """Start the fresh-interpreter rollouts of ``ids`` in a background thread (the children do the
    work); ``tests/conftest.py`` calls this when collection finishes. ``shared_dir``: the xdist
    workers' common directory, to split the ids between workers (``None``: roll out all here)."""
    return FreshRollouts(ids, shared_dir)


@pytest.fixture(scope="session")
def fresh_rollouts(request) -> FreshRollouts:
    """Fresh-interpreter rollouts of the collected gymnasium ids (started at collection)."""
    from tests.conftest import FRESH_ROLLOUTS

    rollouts = request.config.stash.get(FRESH_ROLLOUTS, None)
    if rollouts is None:  # collected without the conftest hook
        ids = [
            item.callspec.params["env_id"]
            for item in request.session.items
            if item.originalname == "test_verigym_check"
        ]
        rollouts = start_fresh_rollouts(ids)
    return rollouts


@pytest.fixture(scope="module", autouse=True)
def _gui_browser_held():
    """The GUI ids' envs share one Chromium, held across this module's many envs (launched once,
    on the first GUI env; stopped at the end of the module)."""
    from verigym.envs.gui.browser import held

    with held():
        yield


@pytest.mark.parametrize("env_id", _params("gymnasium"))
def test_verigym_check(env_id, fresh_rollouts):
    report = check_env(env_id, steps=steps_for(env_id), _fresh=fresh_rollouts.get(env_id))
    assert report.passed, report.format()


@pytest.mark.gui
@pytest.mark.parametrize("env_id", MINIWOB_IDS)
def test_miniwob_id_makes_in_its_family(env_id):
    """The default run's share of ``verigym check`` on each MiniWoB++ id (the rest is
    ``test_verigym_check``'s, slow)."""
    pytest.importorskip("miniwob")
    report = check_env(env_id, checks=MINIWOB_CHEAP_CHECKS)
    assert report.passed and [r.name for r in report.results] == ["family"], report.format()


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
            assert verigym.rows(family), (
                f"envs/{family}/table.py registers no id of family {family}"
            )


def test_xdist_workers_split_and_share_the_fresh_rollouts(tmp_path, monkeypatch):
    """Each worker rolls out only its share and publishes it; a worker reads another's share from
    the common directory, and rolls the id out itself when no worker ever publishes it."""
    from verigym.checker import _first_difference

    ids = ["verigym/GuessNumber-v0", "verigym/Hangman-Easy-v0"]
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    shares = []
    for name in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", name)
        shares.append(start_fresh_rollouts(ids, tmp_path))
    first, second = shares
    assert (
        first.shared
        and set(first.future.result()) == {ids[0]}
        and set(second.future.result()) == {ids[1]}
    )
    status, published = first.get(ids[1])  # read from gw1's file
    assert status == "ok" and sorted(p.name for p in tmp_path.iterdir()) == [
        f"fresh-rollouts-{i}-of-2.pickle" for i in (0, 1)
    ]
    assert first.get("verigym/not-collected-v0") is None

    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")  # owns no id; gw1 of 3 never publishes
    (tmp_path / "silent").mkdir()
    lonely = start_fresh_rollouts(ids, tmp_path / "silent")
    assert lonely.future.result() == {}
    status, own = lonely.get(ids[1], timeout=0.5)
    assert status == "ok" and _first_difference(own, published, 0.0) is None
