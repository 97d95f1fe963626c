"""Training never sees an evaluation task: the split is made on the task's content hash, not its seed.

Seeds that draw the same task as an evaluation seed were found once by scanning the training range
(``reset_task_hash`` over ``range(n)`` against ``HeldOutTasks().hashes(id)``); the tests export a few
seeds around them so each filter has something to drop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import verigym  # noqa: F401 - registers the ids
from verigym.leaderboards.demonstrations import EVALUATION_TASK, play_demonstrations
from verigym.leaderboards.heldout import HeldOutTasks, reset_task_hash, task_hashes
from verigym.leaderboards.suite import Suite, Task, load_suite
from verigym.registration import make
from verigym.task_split import canonical, plain_state, task_hash


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIGYM_CACHE", str(tmp_path / "cache"))


def _only(suite: Suite, env_id: str) -> Suite:
    return Suite(name=suite.name, tasks=tuple(t for t in suite if t.env_id == env_id))


def _hash(env_id: str, seed: int, **kwargs) -> str:
    env = make(env_id, **kwargs)
    try:
        return reset_task_hash(env, seed)
    finally:
        env.close()


def test_same_task_same_hash_different_task_different_hash():
    env = make("verigym/GuessNumber-v0")
    by_secret: dict[int, set[str]] = {}
    for seed in range(300):
        digest = reset_task_hash(env, seed)
        by_secret.setdefault(env.unwrapped._secret, set()).add(digest)
    env.close()
    # one hash per secret, and a different one for each secret
    assert all(len(hashes) == 1 for hashes in by_secret.values())
    assert len({next(iter(h)) for h in by_secret.values()}) == len(by_secret) > 80
    # the same secret under other rules (GuessNumber-Hard: 1..1000) is another task
    assert _hash("verigym/GuessNumber-v0", 0) != _hash("verigym/GuessNumber-v0", 0, max_number=99)


def test_hidden_target_is_hashed():
    """Two tasks that show the same observation but hide different targets hash differently."""
    env = make("verigym/GuessNumber-v0")
    observation, info = env.unwrapped.reset(seed=1)
    first = task_hash(env, observation, info)
    env.unwrapped._secret += 1
    assert task_hash(env, observation, info) != first
    # volatile info (a seed, a time) is not part of the task
    assert task_hash(env, observation, {**info, "item_seed": 7, "tool_time_s": 0.3}) == task_hash(
        env, observation, info
    )
    env.close()


def test_hash_is_stable_across_processes():
    """No PYTHONHASHSEED, object id or process state in the hash."""
    code = (
        "import verigym; from verigym.leaderboards.heldout import reset_task_hash;"
        "from verigym.registration import make;"
        "print(*[reset_task_hash(make(i), s) for i, s in "
        "[('verigym/GuessNumber-v0', 5), ('verigym/FunctionCalling-v0', 3), ('verigym/Treasure-7x7-v0', 2)]])"
    )
    # this process hashes strings with a random PYTHONHASHSEED (or its own); the child with 12345
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    here = [
        _hash("verigym/GuessNumber-v0", 5),
        _hash("verigym/FunctionCalling-v0", 3),
        _hash("verigym/Treasure-7x7-v0", 2),
    ]
    assert done.stdout.split()[-3:] == here and len(set(here)) == 3


def test_canonical_and_plain_state_are_plain():
    class Holder:
        pass

    holder = Holder()
    holder.secret, holder._np_random_seed, holder.conn = 3, 9, object()
    holder.words = {"b": [1.5, (2,)], "a": {3}}
    assert plain_state(holder) == {
        "secret": 3,
        "words": {"map": [["a", {"set": [3]}], ["b", ["1.5", [2]]]]},
    }
    assert "0x" not in json.dumps(canonical(object()))


@pytest.mark.parametrize(
    ("env_id", "seeds"),
    [
        ("verigym/GuessNumber-v0", range(0, 40)),
        ("verigym/FunctionCalling-v0", [31, 32, 33, 59, 67]),
        # reasoning-gym's import alone takes 3 to 10 s
        pytest.param("verigym/RG-ChainSum-v0", [899, 900, 955], marks=pytest.mark.slow),
    ],
)
def test_sft_export_holds_no_evaluation_task(env_id, seeds):
    """Every suite's evaluation tasks are dropped from the demonstrations of a training range."""
    # RG: the text suite's ChainSum task alone (every RG id shares one class, so the shipped
    # suites would hash 200 RG evaluation tasks); the others: every shipped suite
    held = (
        HeldOutTasks([_only(load_suite("text"), env_id)])
        if env_id.startswith("verigym/RG-")
        else HeldOutTasks()
    )
    evaluation = held.hashes(env_id)
    assert evaluation
    refused: list[str] = []
    records = list(play_demonstrations([env_id], seeds, refused=refused, held_out=held))
    env = make(env_id)
    exported = {reset_task_hash(env, r["seed"]) for r in records}
    env.close()
    assert records and not exported & evaluation
    dropped = [r for r in refused if r.endswith(EVALUATION_TASK)]
    assert dropped and held.dropped[env_id] == len(dropped)


def test_sql_export_holds_no_evaluation_task():
    """SQL: seeds 83 and 87 pose the tool suite's evaluation tasks (same question, same answer)."""
    held = HeldOutTasks([load_suite("tool")])
    refused: list[str] = []
    records = list(
        play_demonstrations(["verigym/SQL-v0"], [82, 83, 87], refused=refused, held_out=held)
    )
    env = make("verigym/SQL-v0")
    exported = {reset_task_hash(env, r["seed"]) for r in records}
    env.close()
    assert records and not exported & held.hashes("verigym/SQL-v0")
    assert held.dropped == {"verigym/SQL-v0": 2} and len(refused) == 2


def test_a_suite_seed_that_repeats_a_training_task_is_held_out():
    """A suite given by path counts too: its evaluation tasks leave the export, whatever the seed."""
    evaluation_seed = 1_000_000
    env = make("verigym/GuessNumber-v0")
    target = reset_task_hash(env, evaluation_seed)
    same = [s for s in range(300) if reset_task_hash(env, s) == target]
    env.close()
    assert same  # 100 secrets: some training seed draws the evaluation seed's task
    suite = Suite(name="mine", tasks=(Task("verigym/GuessNumber-v0", episodes=1),))
    held = HeldOutTasks([suite])
    assert held.hashes("verigym/GuessNumber-v0") == {target}
    refused: list[str] = []
    records = list(
        play_demonstrations(["verigym/GuessNumber-v0"], same[:2], refused=refused, held_out=held)
    )
    assert not records and len(refused) == len(same[:2])


def test_hash_sets_are_cached(tmp_path):
    first = task_hashes("verigym/GuessNumber-v0", range(1_000_000, 1_000_005))
    files = list((tmp_path / "cache" / "heldout").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == first
    assert task_hashes("verigym/GuessNumber-v0", range(1_000_000, 1_000_005)) == first


def test_sft_training_leaves_out_evaluation_records():
    """``verigym train sft`` data made before the split (the shipped adapter's) loses its evaluation tasks."""
    from verigym.leaderboards.heldout import drop_evaluation_records

    env = make("verigym/GuessNumber-v0")
    target = reset_task_hash(env, 1_000_000)
    hashes = {s: reset_task_hash(env, s) for s in range(300)}
    env.close()
    same = next(s for s, h in hashes.items() if h == target)
    other = next(s for s, h in hashes.items() if h != target)
    suite = Suite(name="mine", tasks=(Task("verigym/GuessNumber-v0", episodes=1),))
    records = [
        {"env_id": "verigym/GuessNumber-v0", "seed": same, "messages": []},
        {"env_id": "verigym/GuessNumber-v0", "seed": other, "messages": []},
        {"messages": []},
        {"env_id": "verigym/GuessNumber-v0", "seed": True},
    ]
    kept, dropped, unchecked = drop_evaluation_records(records, HeldOutTasks([suite]))
    assert dropped == {"verigym/GuessNumber-v0": 1}
    assert kept == records[1:] and unchecked == 2


def test_standings_mark_small_task_spaces(tmp_path):
    """GuessNumber's 100 secrets are marked in the standings; Treasure's layouts are not."""
    from tests.leaderboards.rows import TWO_TASKS, scored_row
    from verigym.leaderboards.heldout import task_spaces
    from verigym.leaderboards.standings import compute_standings, render_markdown
    from verigym.leaderboards.store import ResultsStore

    assert task_spaces()["verigym/GuessNumber-v0"]["distinct_tasks"] == "100"
    with ResultsStore(tmp_path / "results") as store:
        for task in TWO_TASKS:
            for seed in task.seeds:
                store.add(scored_row("oracle", task.env_id, seed, 1.0))
        standings = compute_standings(store, TWO_TASKS)
    marked = [n for n in standings.notes if n.startswith("†")]
    assert len(marked) == 1 and "GuessNumber-v0 (100)" in marked[0]
    assert "Treasure" not in marked[0] and "† Small task spaces" in render_markdown(standings)


def test_task_space_counts_match_the_env():
    """The shipped table is what count_tasks finds (GuessNumber: exact; Treasure: no repeat)."""
    from verigym.leaderboards.heldout import count_tasks, task_spaces

    table = task_spaces()
    assert count_tasks("verigym/GuessNumber-v0", 1000) == table["verigym/GuessNumber-v0"]
    assert count_tasks("verigym/Treasure-7x7-v0", 200)["distinct_tasks"] == ">= 200"


def test_stored_episodes_on_an_evaluation_task_are_not_exported():
    """``verigym export --format sft`` from the store: a training-seed row whose task an
    evaluation seed poses (GuessNumber seed 0) is refused; seed 6's is exported."""
    from types import SimpleNamespace

    from verigym.leaderboards.demonstrations import stored_demonstrations
    from verigym.leaderboards.episode import make_env, run_episode
    from verigym.leaderboards.store import trajectory_digest
    from verigym.leaderboards.trajectories import Recorder

    env_id = "verigym/GuessNumber-v0"
    held = HeldOutTasks()
    probe = make(env_id)
    assert reset_task_hash(probe, 0) in held.hashes(env_id)
    assert reset_task_hash(probe, 6) not in held.hashes(env_id)
    probe.close()
    blobs, rows = {}, []
    for seed in (6, 0):
        env = make_env(env_id, {}, False)
        agent = SimpleNamespace(
            act=lambda obs, info, deterministic=True, env=env: env.unwrapped.oracle_action()
        )
        recorder = Recorder(env, agent, env_id=env_id, env_kwargs={}, seed=seed, text_view=False)
        result = run_episode(agent, env, seed, recorder=recorder)
        env.close()
        row = SimpleNamespace(
            env_id=env_id,
            seed=seed,
            status="ok",
            success=result["success"],
            score=1.0,
            agent_spec="oracle",
            env_version=0,
            config_hash="c",
            env_kwargs="{}",
        )
        blobs[seed] = recorder.finish()[0]
        row.trajectory_digest = trajectory_digest(row, blobs[seed])
        rows.append(row)
    store = SimpleNamespace(trajectory=lambda row: blobs[row.seed])
    refused: list = []
    records = list(stored_demonstrations(store, rows, refused, held_out=held))
    assert [r["seed"] for r in records] == [6]
    assert len(refused) == 1 and refused[0][1].endswith(EVALUATION_TASK)


@pytest.mark.slow  # the datasets import alone takes 5 to 15 s
def test_trl_dataset_leaves_out_evaluation_tasks():
    pytest.importorskip("datasets")
    from verigym.agents.llm.trl_adapter import SEED_COLUMN, verigym_dataset

    data = verigym_dataset(["verigym/GuessNumber-v0"], seeds=range(10))
    held = HeldOutTasks().hashes("verigym/GuessNumber-v0")
    env = make("verigym/GuessNumber-v0")
    clean = [s for s in range(10) if reset_task_hash(env, s) not in held]
    env.close()
    assert 0 < len(clean) < 10 and list(data[SEED_COLUMN]) == clean
