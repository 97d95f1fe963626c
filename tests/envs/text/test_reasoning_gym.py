"""The reasoning-gym adapter: the static dataset list, seeding, curriculum levels, safe scoring."""

from __future__ import annotations

import os
import pickle
import re

import gymnasium as gym
import pytest

import verigym
from verigym.envs.text.table import REASONING_GYM_DATASETS, REASONING_GYM_EXCLUDED, rg_env_id

NAMES = [name for name, _ in REASONING_GYM_DATASETS]
# Datasets without a single reference answer whose scorer needs a search/plan the oracle lacks.
NO_ORACLE = {"boxnet", "rush_hour"}
# Items without a scoring answer among 200 seeds: propositional_logic items whose premises are one
# informative formula plus tautologies (every valid conclusion restates it, which verigym refuses)
# or only tautologies, and items whose example answer is invalid (seeds 5, 43, 100, 109, 113).
MIN_ORACLE_WINS = {"propositional_logic": 195}


def test_static_list_equals_installed_registry():
    """An upgrade of reasoning-gym that adds or removes datasets fails here: regenerate the list."""
    import reasoning_gym.factory

    assert NAMES == sorted(NAMES)
    assert set(NAMES) | set(REASONING_GYM_EXCLUDED) == set(reasoning_gym.factory.DATASETS)
    assert not set(NAMES) & set(REASONING_GYM_EXCLUDED)


def test_every_dataset_is_registered_in_the_text_family():
    ids = {row.id for row in verigym.rows("text")}
    assert {rg_env_id(name) for name in NAMES} <= ids
    assert len(ids) >= 110
    assert rg_env_id("basic_arithmetic") == "verigym/RG-BasicArithmetic-v0"


def test_same_seed_same_item_and_different_seeds_differ():
    env = gym.make("verigym/RG-BasicArithmetic-v0")
    first, _ = env.reset(seed=3)
    env.reset(seed=4)
    again, _ = env.reset(seed=3)
    other, _ = env.reset(seed=5)
    assert first == again != other


def test_curriculum_level_changes_the_task_and_is_validated():
    env = gym.make("verigym/RG-BasicArithmetic-v0", level=0).unwrapped
    assert env.levels >= 2
    hard = gym.make("verigym/RG-BasicArithmetic-v0", level=env.levels - 1)
    assert len(hard.reset(seed=1)[0]) >= len(env.reset(seed=1)[0]) - 40
    with pytest.raises(ValueError, match="level"):
        gym.make("verigym/RG-BasicArithmetic-v0", level=env.levels)
    with pytest.raises(ValueError, match="unknown reasoning-gym dataset"):
        gym.make("verigym/RG-BasicArithmetic-v0", dataset="nope")


def test_eval_scored_dataset_never_runs_agent_code(tmp_path):
    target = tmp_path / "pwned"
    env = gym.make("verigym/RG-NQueens-v0")
    env.reset(seed=0)
    _, reward, *_, info = env.step(f"<answer>__import__('os').system('touch {target}')</answer>")
    assert reward == 0.0 and not info["success"]
    assert not target.exists()
    env = gym.make("verigym/RG-SimpleIntegration-v0")
    env.reset(seed=0)
    _, reward, *_ = env.step(f"<answer>__import__('os').system('touch {target}')</answer>")
    assert reward == 0.0 and not target.exists()


def test_env_pickles_mid_episode():
    env = gym.make("verigym/RG-WordLadder-v0")
    obs, _ = env.reset(seed=2)
    clone = pickle.loads(pickle.dumps(env))
    assert (
        clone.step(clone.unwrapped.oracle_action())[1] == env.step(env.unwrapped.oracle_action())[1]
    )


@pytest.mark.parametrize("name", [n for n in NAMES if n not in NO_ORACLE])
def test_oracle_answer_scores_one(name):
    env = gym.make(rg_env_id(name))
    for seed in range(2):
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.unwrapped.oracle_action())
        assert terminated and info["success"], (name, seed, info)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n not in NO_ORACLE])
def test_oracle_success_over_200_seeds(name):
    env = gym.make(rg_env_id(name))
    wins = 0
    for seed in range(200):
        env.reset(seed=seed)
        wins += env.step(env.unwrapped.oracle_action())[4]["success"]
    assert wins >= MIN_ORACLE_WINS.get(name, 198), f"{name}: {wins}/200"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_items_do_not_depend_on_the_hash_seed(name):
    """Two interpreters with different PYTHONHASHSEED give the same items (fresh-interpreter check)."""
    import subprocess
    import sys

    code = (
        "import gymnasium as gym, verigym, hashlib;"
        f"e = gym.make({rg_env_id(name)!r});"
        "print(hashlib.sha256(''.join(e.reset(seed=s)[0] for s in range(5)).encode()).hexdigest())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": h},
            check=True,
        ).stdout
        for h in ("1", "2")
    }
    assert len(outputs) == 1


def test_every_scorer_is_bounded_in_process_or_in_the_worker():
    """Linear scorers (reasoning-gym's base scorer, the audited LINEAR_SCORED) run in process; every
    other dataset runs in the bounded verifier worker (issue 16, section 2)."""
    import reasoning_gym.factory as factory
    from reasoning_gym.dataset import ProceduralDataset

    from verigym.envs.text.reasoning_gym_env import LINEAR_SCORED, SYMPY_SCORED, scored_in_process

    assert LINEAR_SCORED <= set(NAMES)
    for name in NAMES:
        base = factory.DATASETS[name][0].score_answer is ProceduralDataset.score_answer
        assert scored_in_process(name) == (
            (base or name in LINEAR_SCORED) and name not in SYMPY_SCORED
        ), name


@pytest.mark.parametrize(
    ("env_id", "answer"),
    [
        ("verigym/RG-PropositionalLogic-v0", " ∧ ".join(f"(x{i} ∨ ¬x{i + 1})" for i in range(300))),
        ("verigym/RG-PropositionalLogic-v0", "(" * 2000 + "P" + ")" * 2000),
        ("verigym/RG-Puzzle24-v0", "9**9**9**9"),
        ("verigym/RG-CoinFlip-v0", "1e999999999"),
        ("verigym/RG-IntermediateIntegration-v0", "(a + b)**999999"),
        ("verigym/RG-ArcAgi-v0", "9" * 60_000),
    ],
    ids=[
        "logic-300-variables",
        "logic-2000-deep",
        "power-tower",
        "huge-exponent",
        "huge-power",
        "60k-digits",
    ],
)
def test_exponential_replies_score_zero_within_the_bound(env_id, answer):
    import time

    env = gym.make(env_id)
    env.reset(seed=0)
    env.step(env.unwrapped.oracle_action())  # warm: the worker and the dataset are ready
    env.reset(seed=0)
    start = time.perf_counter()
    _, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
    assert terminated and reward == 0.0 and not info["success"]
    # stopped at SCORE_SECONDS of the worker's CPU time, or at its wall-clock backstop on a machine
    # that starves the worker, plus the work in this process
    from verigym.envs.text.reasoning_gym_env import SCORE_SECONDS
    from verigym.workers import WALL_CLOCK_FACTOR

    assert time.perf_counter() - start < SCORE_SECONDS * WALL_CLOCK_FACTOR + 2.0


def test_reference_plus_text_never_succeeds_even_at_a_raw_score_of_one():
    """Datasets whose own scorers give 1.0 to the reference plus other text (fraction_simplification,
    gsm_symbolic, knights_knaves, kakurasu, quantum_lock, sokoban, survo, polynomial_equations)."""
    from verigym.envs.text.reasoning_gym_env import oracle_answer

    for name in (
        "fraction_simplification",
        "gsm_symbolic",
        "knights_knaves",
        "kakurasu",
        "quantum_lock",
        "sokoban",
        "survo",
    ):
        env = gym.make(rg_env_id(name))
        for seed in range(2):
            env.reset(seed=seed)
            reference = oracle_answer(name, env.unwrapped._entry)
            for reply in (f"{reference} x", f"x {reference}", f"{reference}\n{reference}"):
                env.reset(seed=seed)
                assert not env.step(f"<answer>{reply}</answer>")[4]["success"], (name, seed, reply)
    env = gym.make("verigym/RG-ChainSum-v0")
    env.reset(seed=0)
    reference = env.unwrapped._entry["answer"]
    assert env.step(f"<answer>{reference}.0</answer>")[4]["success"]  # equal in value: still right


@pytest.mark.parametrize(
    "env_id, replies",
    [
        # min(1, exp(-|nan - z|)) is 1: "nan" scored 1 on every item
        ("verigym/RG-ComplexArithmetic-v0", ["nan", "NaN", "nanj", "n a n", "nan+nanj"]),
        # only "makes 24 with four numbers in range" was checked: 1*2*3*4 scored 1 on every item
        ("verigym/RG-Puzzle24-v0", ["1*2*3*4", "(1+2+3)*4", "8*3*1*1"]),
        # absolute 1e-4 and digit-prefix credit: "0" scored 1 on most items
        ("verigym/RG-CoinFlip-v0", ["0", "0.0", "-0", "0.00003"]),
    ],
)
def test_question_independent_answers_that_scored_one_score_zero(env_id, replies):
    env = gym.make(env_id)
    for seed in range(3):
        for reply in replies:
            env.reset(seed=seed)
            if reply == env.unwrapped._reference_answer():
                continue
            _, reward, *_, info = env.step(f"<answer>{reply}</answer>")
            assert reward == 0.0 and not info["success"], (seed, reply)
        env.reset(seed=seed)
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0, seed
    env.close()


def test_answers_of_the_right_form_only_earn_no_partial_credit():
    env = gym.make("verigym/RG-GameOfLife-v0")
    env.reset(seed=5)
    reference = env.unwrapped._reference_answer()
    dead = reference.replace("1", "0")
    assert reference.count("1") == 6
    assert env.step(f"<answer>{dead}</answer>")[1] == 0.0  # an all-dead board earned 0.94
    env.reset(seed=5)
    one_wrong = reference.replace("1", "0", 1)
    assert 0.0 < env.step(f"<answer>{one_wrong}</answer>")[1] < 1.0  # closer than the form: kept
    env = gym.make("verigym/RG-TimeIntervals-v0")
    for seed in range(6):
        env.reset(seed=seed)
        zeros = re.sub(r"\d", "0", env.unwrapped._reference_answer())
        for reply in (zeros, zeros[:-1] + "1"):  # 00:00:00 earned 0.6-0.94 on most items
            env.reset(seed=seed)
            assert env.step(f"<answer>{reply}</answer>")[1] == 0.0, (seed, reply)
        env.reset(seed=seed)
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0
    env.close()


@pytest.mark.parametrize("env_id", ["verigym/RG-MiniSudoku-v0", "verigym/RG-Sudoku-v0"])
def test_the_clues_copied_with_one_filler_earn_nothing_and_a_near_solution_keeps_credit(env_id):
    env = gym.make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        metadata = env.unwrapped._entry["metadata"]
        puzzle, solution = metadata["puzzle"], metadata["solution"]
        copied = "\n".join(" ".join(str(cell or 1) for cell in row) for row in puzzle)
        assert env.step(f"<answer>{copied}</answer>")[1] == 0.0  # earned 0.39-0.68
        near = [row[:] for row in solution]
        blanks = [j for j, cell in enumerate(puzzle[0]) if cell == 0][:2]
        if len(blanks) == 2:
            (a, b) = blanks
            near[0][a], near[0][b] = near[0][b], near[0][a]
            env.reset(seed=seed)
            text = "\n".join(" ".join(map(str, row)) for row in near)
            assert 0.5 < env.step(f"<answer>{text}</answer>")[1] < 1.0
    env.close()


def test_a_number_of_the_question_echoed_earns_nothing():
    env = gym.make("verigym/RG-PrimeFactorization-v0")
    for seed in range(4):
        env.reset(seed=seed)
        number = re.search(r"factorization of (\d+)", env.unwrapped.question).group(1)
        if number == env.unwrapped._entry["answer"]:
            continue  # a prime: the number is its factorization
        _, reward, *_ = env.step(f"<answer>{number}</answer>")
        assert reward == 0.0, seed  # its product is right: reasoning-gym paid 0.5
        env.reset(seed=seed)
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0
    env.close()


def test_coin_flip_accepts_the_probability_in_any_exact_form():
    env = gym.make("verigym/RG-CoinFlip-v0")
    env.reset(seed=2)
    assert env.unwrapped._entry["answer"] == "0.03125"
    for reply, reward in (("1/32", 1.0), ("0.03125", 1.0), ("0.0312", 0.0), ("0.03", 0.0)):
        env.reset(seed=2)
        assert env.step(f"<answer>{reply}</answer>")[1] == reward, reply
    env.reset(seed=3)
    assert env.unwrapped._entry["answer"] == "0.9995117188"
    for reply, reward in (("2047/2048", 1.0), ("0.9995117", 1.0), ("1", 0.0), ("0.9995", 0.0)):
        env.reset(seed=3)
        assert env.step(f"<answer>{reply}</answer>")[1] == reward, reply
    env.close()


def test_game_of_life_halting_needs_the_right_boolean():
    env = gym.make("verigym/RG-GameOfLifeHalting-v0")
    for seed in range(3):
        env.reset(seed=seed)
        reference = env.unwrapped._entry["answer"]
        other = "False" if reference == "True" else "True"
        for reply, success in (
            (reference, True),
            (reference.lower(), True),
            (other, False),
            ("anything at all", False),
            (f"{reference} x", False),
        ):
            env.reset(seed=seed)
            assert env.step(f"<answer>{reply}</answer>")[4]["success"] is success, (seed, reply)


def test_propositional_logic_refuses_restated_premises():
    env = gym.make("verigym/RG-PropositionalLogic-v0")
    checked = 0
    for seed in range(6):
        env.reset(seed=seed)
        premises = env.unwrapped._entry["metadata"]["premises"]
        restated = [
            premises[0],
            " ∧ ".join(f"({p})" for p in premises),
            f"({premises[0]} ∧ {premises[0]})",
        ]
        for reply in restated:
            env.reset(seed=seed)
            assert not env.step(f"<answer>{reply}</answer>")[4]["success"], (seed, reply)
            checked += 1
        env.reset(seed=seed)
        assert not env.step("<answer>(P ∨ Z9)</answer>")[4][
            "success"
        ]  # a name that is not a variable
    assert checked == 18


def test_seeded_reset_draws_the_item_seed_from_gymnasiums_generator():
    """The item seed is the first draw of Gymnasium's ``np_random`` (so ``reset(seed=s)`` keeps
    giving the v0 item); copies keep the generator's state, an unseeded reset continues it."""
    import copy

    from gymnasium.utils import seeding
    from gymnasium.utils.env_checker import check_env

    env = gym.make("verigym/RG-ChainSum-v0")
    for seed in (0, 11, 2**32, 2**64 + 3):
        _, info = env.reset(seed=seed)
        assert info["item_seed"] == int(seeding.np_random(seed)[0].integers(0, 2**31 - 1)), seed
    _, info = env.reset(seed=11)
    eager, _ = seeding.np_random(11)
    assert info["item_seed"] == int(eager.integers(0, 2**31 - 1))
    unwrapped = env.unwrapped
    assert unwrapped.np_random_seed == 11
    clone, restored = copy.deepcopy(unwrapped), pickle.loads(pickle.dumps(unwrapped))
    for copy_ in (unwrapped, clone, restored):
        assert copy_.np_random.bit_generator.state == eager.bit_generator.state
    _, info = env.reset()  # an unseeded reset continues the seeded stream
    assert info["item_seed"] == int(eager.integers(0, 2**31 - 1))
    with pytest.raises(gym.error.Error):
        env.reset(seed=-1)
    check_env(unwrapped, skip_render_check=True)


@pytest.mark.parametrize(
    "inner",
    [
        "",
        " 42 ",
        "a\nb",
        "x</answer",
        "[1, 2]",
        "<think>1</think>2",
        "\\boxed{3}",
        "<|im_end|>4",
        "a<answer>b",
    ],
)
def test_extract_answer_fast_path_agrees_with_the_rule(inner):
    """``<answer>X</answer>`` replies skip the regex scan; the result must be the rule's."""
    from verigym.verifiers import extract_answer

    reply = f"<answer>{inner}</answer>"
    fast = extract_answer(reply, fallback_to_text=True)
    # a leading or trailing space keeps the reply's meaning but never takes the fast path
    assert (
        fast
        == extract_answer(reply + " ", fallback_to_text=True)
        == extract_answer(" " + reply, fallback_to_text=True)
    )


def test_sympy_scored_hash_seeded_items_are_scored_in_the_worker_that_generated_them(monkeypatch):
    """polynomial_multiplication is generated and scored in one PYTHONHASHSEED=0 worker (sympy's
    cache is warm for the item); while that worker is stopped (a check overran) the shared
    verifier worker scores, without starting an interpreter inside the step, and the next
    generation starts it again and gives the same item."""
    from verigym.envs.text import reasoning_gym_env as adapter

    assert adapter.SCORED_WHERE_GENERATED == {"polynomial_multiplication"}
    shared = adapter.call_bounded

    def no_shared_worker(*args, **kwargs):
        raise AssertionError("scored in the shared verifier worker")

    monkeypatch.setattr(adapter, "call_bounded", no_shared_worker)
    env = gym.make("verigym/RG-PolynomialMultiplication-v0")
    question, _ = env.reset(seed=3)
    worker = adapter._SCORING_GENERATOR
    pid = worker._pid()
    assert pid is not None and env.step(env.unwrapped.oracle_action())[4]["success"]
    assert worker._pid() == pid
    env.reset(seed=3)  # the cached item
    worker._process.kill()
    assert not worker.running
    monkeypatch.setattr(adapter, "call_bounded", shared)
    assert env.step(env.unwrapped.oracle_action())[4]["success"]
    assert not worker.running  # not restarted by the step
    env.reset(seed=3)
    assert env.step("<answer>x</answer>")[1] == 0.0
    monkeypatch.setattr(adapter, "call_bounded", no_shared_worker)
    adapter._worker_item.cache_clear()
    assert env.reset(seed=3)[0] == question  # generated by a new worker
    assert (
        worker._pid() not in (None, pid) and env.step(env.unwrapped.oracle_action())[4]["success"]
    )


def test_global_rng_datasets_leave_the_callers_global_rngs_alone():
    """Items of datasets that draw from the global RNGs are generated with seeded globals that are
    restored in this process (the generator worker skips the restore, and gets the same item)."""
    import random

    import numpy as np

    from verigym.envs.text import reasoning_gym_env as adapter

    assert (
        "pool_matrix" in adapter.GLOBAL_RNG_DATASETS
        and "pool_matrix" not in adapter.HASH_SEEDED_DATASETS
    )
    env = gym.make("verigym/RG-PoolMatrix-v0")
    random.seed(5)
    np.random.seed(5)
    python_state, numpy_state = random.getstate(), np.random.get_state()[1].copy()
    for seed in range(3):
        env.reset(seed=seed)
    assert random.getstate() == python_state and np.array_equal(
        np.random.get_state()[1], numpy_state
    )
    config_json, item_seed = env.unwrapped._config_json, env.unwrapped._item_seed
    assert adapter._generate_in_worker("pool_matrix", config_json, item_seed) == adapter._generate(
        "pool_matrix", config_json, item_seed
    )


def test_verdict_and_reference_follow_the_item():
    """The reference answer is computed once per episode: it must be the new item's after a reset."""
    from verigym.envs.text.reasoning_gym_env import oracle_answer

    env = gym.make("verigym/RG-ChainSum-v0")
    references = set()
    for seed in range(4):
        env.reset(seed=seed)
        entry = env.unwrapped._entry
        assert (
            env.unwrapped.oracle_action() == f"<answer>{oracle_answer('chain_sum', entry)}</answer>"
        )
        observation, reward, _, _, info = env.step(env.unwrapped.oracle_action())
        assert (observation, reward, info["reference_answer"]) == (
            "Correct (score 1.000).",
            1.0,
            entry["answer"],
        )
        references.add(info["reference_answer"])
        env.reset(seed=seed)
        observation, reward, _, _, info = env.step(f"<answer>{entry['answer']} or 7</answer>")
        assert observation == "Not correct (score 0.000). the answer hedges between alternatives."
        assert (reward, info["score"], info["success"]) == (0.0, 0.0, False)
    assert len(references) == 4


def test_propositional_logic_tautology_earns_no_partial_credit():
    """reasoning-gym gives 0.25 to a valid but trivial conclusion; a formula true under every
    assignment follows from any premises and says nothing about the question."""
    env = gym.make("verigym/RG-PropositionalLogic-v0")
    for seed in range(4):
        env.reset(seed=seed)
        v = sorted(env.unwrapped._entry["metadata"]["variables"])[0]
        for tautology in (f"({v} ∨ ¬{v})", f"({v} → {v})", f"(({v} ∧ ¬{v}) → {v})"):
            env.reset(seed=seed)
            _, reward, _, _, info = env.step(f"<answer>{tautology}</answer>")
            assert reward == 0.0 and not info["success"], (seed, tautology, reward)


# Datasets whose scorer gave credit to question-independent replies (the audit of issue 28 §6):
# flat credit for any answer (0.01: color_cube_rotation, emoji_mystery, rubiks_cube, tsumego, ...;
# 0.05: advanced_geometry, sentence_reordering; 0.1: figlet_font), credit for the question echoed
# (mini_sudoku), 0.05 for any formula that parses (propositional_logic).
FLAT_CREDIT = [
    "advanced_geometry",
    "boxnet",
    "color_cube_rotation",
    "countdown",
    "emoji_mystery",
    "figlet_font",
    "graph_color",
    "group_anagrams",
    "jugs",
    "mini_sudoku",
    "palindrome_generation",
    "propositional_logic",
    "rubiks_cube",
    "sentence_reordering",
    "tsumego",
]


@pytest.mark.parametrize("name", FLAT_CREDIT)
def test_question_independent_replies_earn_no_partial_credit(name):
    env = gym.make(rg_env_id(name))
    for seed in range(2):
        env.reset(seed=seed)
        question = env.unwrapped._entry["question"]
        for reply in ("", "0", "abc", "[]", "{}", "yes", "(P ∨ ¬P)", "(Z ∧ Z)", question):
            env.reset(seed=seed)
            _, reward, _, _, _ = env.step(f"<answer>{reply}</answer>")
            assert reward == 0.0 or reward >= 1.0, (name, seed, reply[:40], reward)
    env.close()


def test_partial_credit_above_the_question_independent_floor_is_kept():
    """A near miss that the dataset grades (spell_backward: letters in place) keeps its credit."""
    env = gym.make("verigym/RG-SpellBackward-v0")
    env.reset(seed=0)
    reference = env.unwrapped._entry["answer"]
    near = reference[:-1] + ("a" if reference[-1] != "a" else "b")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<answer>{near}</answer>")
    assert 0.0 < reward < 1.0 and not info["success"]


# Constants that closeness-graded scorers paid for by luck before the floor probed them (issue 28
# leftover): "1" earned 0.16-0.64 on rectangle_count, "-1" 0.47 on polynomial_equations, "False"
# 0.13-0.17 on spell_backward (seeds 0-7, measured before the fix).
LUCKY = [("rectangle_count", "1"), ("polynomial_equations", "-1"), ("spell_backward", "False")]


@pytest.mark.parametrize(("name", "constant"), LUCKY)
def test_a_lucky_constant_earns_no_partial_credit_and_the_oracle_still_scores_one(name, constant):
    env = gym.make(rg_env_id(name))
    for seed in range(8):
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(f"<answer>{constant}</answer>")
        assert reward == 0.0 or reward >= 1.0, (name, seed, constant, reward)
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(env.unwrapped.oracle_action())
        assert reward == 1.0 and info["success"], (name, seed)
    env.close()
