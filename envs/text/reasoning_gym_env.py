"""Every reasoning-gym dataset as a single-turn verigym environment, with a hardened scorer."""

from __future__ import annotations

import decimal
import functools
import json
import logging
import math
import random
import re
from typing import Any

import gymnasium as gym
import numpy as np

from verigym.core import ActionParseError, EpisodeGuard, UnicodeText, action_error_info, episode_end
from verigym.envs.text.base import ReplySpace
from verigym.kwargs_policy import FLAG, Bound, Fields, FloatRange, IntRange, operator_only
from verigym.render_modes import accept_render_mode
from verigym.verifiers import (
    UnsafeExpression,
    contains_oracle,
    extract_answer,
    has_lookalikes,
    is_hedged,
    normalize_answer,
    safe_expression,
)
from verigym.workers import MEMORY_CAP_BYTES, BoundedWorker, VerifierTimeout, call_bounded

__all__ = [
    "ANSWER_FORMAT",
    "LINEAR_SCORED",
    "STRICT_RULES",
    "ReasoningGymEnv",
    "score_reply",
    "scored_in_process",
]

logger = logging.getLogger(__name__)

ANSWER_FORMAT = (
    "You may reason inside <think>...</think>. Give your final answer inside <answer>...</answer> "
    "(or \\boxed{...}); the last one outside <think> counts, and it must be the answer alone."
)
"""The answer-format instruction appended to every question."""

RESEED_DATASETS = frozenset({"acre", "gsm_symbolic", "list_functions"})
"""Datasets whose constructor generates ``size`` items up front (or caps ``size``): item ``k`` is
built as ``dataset(seed=k, size=1)[0]`` instead of ``dataset(seed=0, size=2**31 - 1)[k]``.
The two give the same item for the other datasets (reasoning-gym draws item ``i`` of a dataset
with seed ``s`` from ``Random(s + i)``)."""

SIZE_CAPS = {"word_ladder": 20_000}
"""Datasets whose ``size`` reasoning-gym caps: item ``k`` is ``dataset(seed=0, size=cap)[k % cap]``
(word_ladder builds its word graph in the constructor, so one dataset per item would cost 76 ms)."""

HASH_SEEDED_DATASETS = frozenset(
    {
        "codeio",
        "isomorphic_strings",
        "knight_swap",
        "list_functions",
        "polynomial_multiplication",
        "ransom_note",
        "word_ladder",
    }
)
"""Datasets whose items depend on ``PYTHONHASHSEED`` (set iteration order): generated in a worker
process started with ``PYTHONHASHSEED=0`` so that the same seed gives the same item in every
process (found by generating items under two hash seeds)."""

SYMPY_SCORED = frozenset(
    {
        "countdown",
        "intermediate_integration",
        "polynomial_multiplication",
        "puzzle24",
        "simple_integration",
    }
)
"""Datasets whose scorer passes the answer to ``sympy.parse_expr`` (which evaluates Python): the
answer must pass :func:`verigym.verifiers.safe_expression` and the scorer runs in the verifier
worker process under ``score_timeout``."""

EVAL_SCORED = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})
"""Datasets whose scorer calls ``eval`` on the answer: only text made of letters, digits, single
underscores, whitespace and ``[ ] , ' " -`` (list literals nested at most 16 deep, boards like
``_ Q _``) reaches it; without parentheses, dots or double underscores nothing can be called."""

LINEAR_SCORED = frozenset(
    {"chain_sum", "decimal_chain_sum", "knights_knaves", "spell_backward", "word_sorting"}
)
"""Datasets with their own scorer that are scored in this process: each scorer was read and does
work linear (or ``n log n``) in the answer's length with no number built from the answer's digits
(``Decimal`` equality, string comparison, splitting, sorting), so a reply of at most 65536
characters is scored in milliseconds; the registry-wide worst-case check (``verigym check``,
:mod:`verigym.verifier_bounds`) measures it for every id. Datasets that keep reasoning-gym's base
scorer (equality, containment) are scored in this process too. Every other scorer runs in the
verifier worker process under ``score_timeout`` seconds and :data:`~verigym.workers.MEMORY_CAP_BYTES`
(a reply that makes it do exponential work scores 0)."""

SCORE_SECONDS = 1.0
"""Default limit, in seconds of the verifier worker's CPU time, of a scorer run (a 4x wall-clock
backstop stops a worker that does not get the CPU at all), so that every reply is scored within the
2 s bound of :mod:`verigym.verifier_bounds`."""

_LITERAL = re.compile(r"[A-Za-z0-9_\s\[\],'\"\-]*")
_INDEX_SIZE = 2**31 - 1
_MAX_REPLY = 1 << 16


@functools.lru_cache(maxsize=512)
def _dataset(name: str, config_json: str, item_seed: int | None) -> Any:
    """A reasoning-gym dataset (cached per process); ``item_seed`` only for reseeded datasets."""
    import reasoning_gym.factory as factory

    dataset_cls, config_cls = factory.DATASETS[name]
    spec = json.loads(config_json)
    overrides = dict(spec["config"])
    seed, size = (0, SIZE_CAPS.get(name, _INDEX_SIZE)) if item_seed is None else (item_seed, 1)
    if spec["level"] is not None:
        curriculum = factory.create_curriculum(name)
        curriculum.set_global_level(spec["level"])
        config = curriculum.generate_configuration(
            defaults={**overrides, "seed": seed, "size": size}
        )
    else:
        config = config_cls(**{**overrides, "seed": seed, "size": size})
    dataset = dataset_cls(config=config)
    _BUILT.add((name, config_json, item_seed))
    return dataset


_BUILT: set[tuple[str, str, int | None]] = set()
"""Keys of the datasets built in this process (a forked verifier worker inherits them)."""


def _dataset_key(name: str, config_json: str, entry: dict[str, Any]) -> tuple[str, str, int | None]:
    return name, config_json, entry["_verigym_seed"] if name in RESEED_DATASETS else None


def _worker_score(name: str, config_json: str, answer: str, entry: dict[str, Any]) -> float | None:
    """Worker side of scoring: ``None`` when the dataset is not built in this worker yet (building
    it, up to seconds for the ARC datasets, must not count against the scorer's deadline)."""
    if _dataset_key(name, config_json, entry) not in _BUILT:
        return None
    return _raw_score(name, config_json, answer, entry)


def _worker_build(name: str, config_json: str, item_seed: int | None) -> bool:
    _dataset(name, config_json, item_seed)
    return True


GLOBAL_RNG_DATASETS = {"codeio", "list_functions", "polynomial_multiplication", "pool_matrix"}
"""Datasets whose generators draw from the global ``random`` or ``numpy.random`` RNGs (found by
reading reasoning-gym 0.1.25 and by the probes below): for them both RNGs are seeded from (dataset, item seed) for the call
and restored afterwards. Saving and restoring the global states costs about 0.5 ms, more than
most items take to generate, so the other datasets skip it; :data:`_PROBES` items of each are
generated with the full protocol and a dataset whose generator turns out to touch a global RNG
joins this set (with a warning)."""

_PROBES = 16
_probed: dict[str, int] = {}


def _generate(name: str, config_json: str, item_seed: int, restore: bool = True) -> dict[str, Any]:
    """Generate one item (see :data:`GLOBAL_RNG_DATASETS` for the global RNGs); ``restore=False``
    leaves the global RNGs as the generator left them (the generator worker, where nothing else
    draws from them and every item seeds them first, saves the 0.1 ms of saving and restoring)."""
    probing = name not in GLOBAL_RNG_DATASETS and _probed.get(name, 0) < _PROBES
    if name not in GLOBAL_RNG_DATASETS and not probing:
        return _generate_item(name, config_json, item_seed)
    if restore:
        python_state, numpy_state = random.getstate(), np.random.get_state()
    random.seed(f"verigym:{name}:{item_seed}")
    np.random.seed(item_seed % 2**32)
    seeded = (random.getstate(), np.random.get_state()[1].copy()) if probing else None
    try:
        return _generate_item(name, config_json, item_seed)
    finally:
        if seeded is not None:
            _probed[name] = _probed.get(name, 0) + 1
            if random.getstate() != seeded[0] or not np.array_equal(
                np.random.get_state()[1], seeded[1]
            ):
                logger.warning(
                    "reasoning-gym dataset %s draws from a global RNG; its items are generated with seeded globals from now on",
                    name,
                )
                GLOBAL_RNG_DATASETS.add(name)
        if restore:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def _generate_in_worker(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    """:func:`_generate` in the generator worker (global RNGs seeded per item, not restored)."""
    return _generate(name, config_json, item_seed, restore=False)


def _generate_item(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    if name in RESEED_DATASETS:
        return _dataset(name, config_json, item_seed)[0]
    return _dataset(name, config_json, None)[item_seed % SIZE_CAPS.get(name, _INDEX_SIZE)]


_GENERATOR = BoundedWorker(start_method="spawn", environment={"PYTHONHASHSEED": "0"})

SCORED_WHERE_GENERATED = HASH_SEEDED_DATASETS & SYMPY_SCORED
"""Datasets generated in a ``PYTHONHASHSEED=0`` worker and scored by sympy: one worker, with the
verifier worker's memory cap and time limits, generates and scores their items, so that the
scorer finds the item's expressions in sympy's cache as it does when reasoning-gym is called
directly (``polynomial_multiplication`` scored 2.6 ms per item in a second worker against 1.3 ms
in the process that had generated the item). When that worker is not running (a check that
overran stopped it), the shared verifier worker scores: a new interpreter takes seconds to start
and import reasoning-gym, which must not count against a reply's time; the next generation starts
it again."""

_SCORING_GENERATOR = BoundedWorker(
    start_method="spawn", environment={"PYTHONHASHSEED": "0"}, memory_bytes=MEMORY_CAP_BYTES
)


def _call_scorer(name: str, function: Any, *args: Any, timeout: float) -> Any:
    """``function(*args)`` in the worker that scores ``name`` (see :data:`SCORED_WHERE_GENERATED`)."""
    if name in SCORED_WHERE_GENERATED:
        if _SCORING_GENERATOR.running:
            if timeout <= 0:
                raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
            return _SCORING_GENERATOR.call(function, args, timeout)
    return call_bounded(function, *args, timeout=timeout)


ITEM_CACHE_SIZE = 64
"""Items generated in this process that are kept for a repeated ``reset(seed=s)`` (Gymnasium's
determinism check, a retried episode, a few agents on the same seeds); any other item is
generated again, at what reasoning-gym costs. A big cache costs more than it saves when seeds are
new: with 4096 items, ``spell_backward`` took 41 against 21 us per episode over its first 3000
episodes (the kept items reach the garbage collector's oldest generation and bring a full
collection, tens of milliseconds, forward); 1 and 64 items cost the same (also ``knights_knaves``);
256 items cost 2 us more per episode of ``spell_backward`` in the benchmark (they no longer fit
the CPU caches)."""

WORKER_ITEM_CACHE_SIZE = 4096
"""Items generated in the ``PYTHONHASHSEED=0`` worker that are kept (each costs a pipe round trip
and milliseconds to generate again)."""


@functools.lru_cache(maxsize=ITEM_CACHE_SIZE)
def _local_item(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    return _generate(name, config_json, item_seed)


@functools.lru_cache(maxsize=WORKER_ITEM_CACHE_SIZE)
def _worker_item(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    worker = _SCORING_GENERATOR if name in SCORED_WHERE_GENERATED else _GENERATOR
    return worker.call(_generate_in_worker, (name, config_json, item_seed), 600.0)


def _item(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    """Item ``item_seed`` of a dataset (cached, see :data:`ITEM_CACHE_SIZE`); hash-order-dependent
    datasets are generated in a worker process with ``PYTHONHASHSEED=0``."""
    if name in HASH_SEEDED_DATASETS:
        return _worker_item(name, config_json, item_seed)
    return _local_item(name, config_json, item_seed)


@functools.cache
def scored_in_process(name: str) -> bool:
    """Whether a dataset's scorer runs in this process (see :data:`LINEAR_SCORED`); all others run
    in the bounded verifier worker."""
    import reasoning_gym.factory as factory
    from reasoning_gym.dataset import ProceduralDataset

    if name in SYMPY_SCORED:
        return False
    return (
        name in LINEAR_SCORED
        or factory.DATASETS[name][0].score_answer is ProceduralDataset.score_answer
    )


def _raw_score(name: str, config_json: str, answer: str, entry: dict[str, Any]) -> float:
    """The dataset's own score of an (already screened) answer, with the stricter rules of
    :data:`STRICT_RULES`; 0.0 when the scorer raises."""
    dataset = _dataset(
        name, config_json, entry["_verigym_seed"] if name in RESEED_DATASETS else None
    )
    try:
        if name == "game_of_life_halting":
            return float(normalize_answer(answer) == normalize_answer(str(entry["answer"])))
        if name == "coin_flip":
            return float(_close_probability(answer, str(entry["answer"])))
        if _has_nan(answer) and not _has_nan(str(entry.get("answer", ""))):
            return 0.0  # NaN passes a distance test: min(1, exp(-nan)) is 1 (complex_arithmetic)
        value = float(dataset.score_answer(answer, entry))
        if name == "puzzle24" and value > 0.0 and not _uses_the_numbers(answer, entry):
            return 0.0  # reasoning-gym checks only that four numbers in range make 24
        if name == "time_intervals" and value < 1.0:
            return 0.0  # closeness over a day: "00:00:00" earned 0.6-0.94 on most items
        if (
            name == "propositional_logic"
            and value > 0.0
            and (
                value < 0.25  # reasoning-gym's 0.05 for any formula that parses but does not follow
                or _is_tautology(answer, entry)
                or (value >= 1.0 and _restates_premises(answer, entry))
            )
        ):
            return 0.0
    except Exception as exc:  # a dataset scorer that crashes on odd input scores it 0
        logger.debug("%s scorer raised %s on %r", name, exc, answer[:80])
        return 0.0
    return value if math.isfinite(value) else 0.0


_NAN = re.compile(r"(?<![a-z])[-+]?nan(?![a-hk-z])")
"""A NaN spelling ``float``/``complex`` read (``nan``, ``-NaN``, ``nanj``, ``n a n`` once the
scorer drops spaces); an answer with one scores 0 unless its item's reference has one too."""
_INTEGER = re.compile(r"\d+")


def _has_nan(text: str) -> bool:
    """Whether ``text`` spells a NaN (:data:`_NAN`), its spaces dropped."""
    return bool(_NAN.search("".join(text.lower().split())))


def _uses_the_numbers(answer: str, entry: dict[str, Any]) -> bool:
    """Whether a puzzle24 expression's numbers are exactly the question's, each once."""
    numbers = entry.get("metadata", {}).get("numbers")
    if not isinstance(numbers, list):
        return False
    return sorted(int(n) for n in _INTEGER.findall(answer)) == sorted(int(n) for n in numbers)


def _close_probability(answer: str, reference: str) -> bool:
    """Whether a coin_flip answer (a decimal or a fraction) is the reference probability ``p`` to
    within a relative 1e-3 of both ``p`` and ``1 - p`` (so ``1`` is not ``0.9995``; the reference
    is written with 10 significant digits)."""
    from fractions import Fraction

    try:
        value, target = Fraction(answer.replace(",", "").strip()), Fraction(reference)
    except (ValueError, ZeroDivisionError):
        return False
    return abs(value - target) <= Fraction(1, 1000) * min(abs(target), abs(1 - target))


STRICT_RULES = {
    "coin_flip": "reasoning-gym's scorer gave 1.0 within an absolute 1e-4 (so 0 was right for every "
    "probability below 1e-4) and to any prefix of the reference's digits (so 0 and 0.0 were right for "
    "0.03125); the answer must be the probability p to within a relative 1e-3 of p and of 1 - p, "
    "else it scores 0",
    "time_intervals": "its partial credit falls linearly over a day (100 days for dates), so a "
    "constant such as 00:00:00 earned 0.6-0.94 on most items; only the exact duration scores",
    "complex_arithmetic": "its scorer gave min(1, exp(-|answer - reference|)), 1.0 for nan; an answer "
    "with a NaN spelling (nan, nanj, n a n) scores 0, in every dataset, unless the reference has one",
    "puzzle24": "its scorer checked only that the expression makes 24 with four numbers in range, so "
    "1*2*3*4 was right for every item; the numbers must be the question's, each used once",
    "game_of_life_halting": "reasoning-gym's scorer compares bool(answer) with bool(reference), so every non-empty "
    "answer scored 1; the answer must be exactly True or False (case-insensitive) and equal the reference",
    "propositional_logic": "a conclusion scores only if it follows from the premises, is not a tautology or a bare "
    "variable (reasoning-gym's rules) and is not equivalent to a premise or to a conjunction of premises (a "
    "restatement of the givens); it may only use the question's variables; a formula true under every "
    "assignment scores 0, not reasoning-gym's 0.25, and one that does not follow scores 0, not 0.05",
}
"""Datasets whose own scorer is not enough, and the stricter rule verigym applies."""


def _truth_table(expressions: list[Any], variables: list[str]) -> list[tuple[bool, ...]]:
    """Rows of truth values of ``expressions`` under every assignment of ``variables``."""
    rows = []
    for bits in range(2 ** len(variables)):
        assignment = {v: bool(bits >> i & 1) for i, v in enumerate(variables)}
        rows.append(tuple(e.evaluate(assignment) for e in expressions))
    return rows


def _is_tautology(answer: str, entry: dict[str, Any]) -> bool:
    """Whether a propositional-logic formula is true under every assignment of the question's
    variables (it then follows from any premises: it says nothing about the question)."""
    from reasoning_gym.logic.propositional_logic import Expression

    conclusion = Expression.from_string(answer)
    return all(row[0] for row in _truth_table([conclusion], sorted(entry["metadata"]["variables"])))


def _restates_premises(answer: str, entry: dict[str, Any]) -> bool:
    """Whether a propositional-logic conclusion is equivalent to a premise or to the conjunction
    of some premises (checked by truth tables over the question's variables)."""
    from reasoning_gym.logic.propositional_logic import Expression

    premises = [Expression.from_string(p) for p in entry["metadata"]["premises"]]
    conclusion = Expression.from_string(answer)
    variables = sorted(entry["metadata"]["variables"])
    table = _truth_table([*premises, conclusion], variables)
    for mask in range(1, 2 ** len(premises)):
        chosen = [k for k in range(len(premises)) if mask >> k & 1]
        if all(all(row[k] for k in chosen) == row[-1] for row in table):
            return True
    return False


def _propositional_conclusion(entry: dict[str, Any]) -> str:
    """A conclusion that scores under :data:`STRICT_RULES`: the dataset's example if it does,
    else the first that does among the two-literal formulas."""
    from reasoning_gym.logic.propositional_logic import Expression

    example = entry["metadata"].get("example_answer", "")
    try:
        if example and not _restates_premises(example, entry):
            return example
    except Exception:  # an example the parser refuses: search instead
        pass
    variables = sorted(entry["metadata"]["variables"])
    premises = [Expression.from_string(p) for p in entry["metadata"]["premises"]]
    literals = [*variables, *(f"¬{v}" for v in variables)]
    for left in literals:
        for right in literals:
            for operator in ("∧", "∨", "→", "↔"):
                candidate = f"({left} {operator} {right})"
                conclusion = Expression.from_string(candidate)
                table = _truth_table([*premises, conclusion], variables)
                valid = all(row[-1] for row in table if all(row[:-1]))
                tautology = all(row[-1] for row in table)
                if valid and not tautology and not _restates_premises(candidate, entry):
                    return candidate
    return entry["metadata"].get("example_answer", "")


def score_reply(
    name: str,
    config_json: str,
    entry: dict[str, Any],
    reply: str,
    *,
    timeout: float = SCORE_SECONDS,
) -> tuple[float, str | None]:
    """Score an agent's whole reply against a reasoning-gym item.

    Steps: :func:`~verigym.verifiers.extract_answer` (with fallback to the visible reply);
    look-alike refusal; screening for the datasets in :data:`SYMPY_SCORED` and
    :data:`EVAL_SCORED`; the dataset's ``score_answer`` (bounded by ``timeout`` seconds in the
    verifier worker for the sympy ones); then no credit for hedges, for partial credit given
    only because the answer contains the oracle, and for partial credit (``0 < score < 1``) no
    higher than a question-independent reply earns on the same item (the empty answer, ``0``,
    ``none``, ``[]``, ``{}``, the question echoed: reasoning-gym's flat "format" credit; or a
    :data:`LUCKY_CONSTANTS` constant, ``1``, ``-1``, ``2``, ``True``, ``False``, ``yes``, ``no``:
    credit by closeness to a constant; or the reference's form with every digit 0, an all-dead
    board: credit for the form alone; or a grid puzzle's clues with every blank one value, or a
    number of the question: credit for the givens).

    Returns:
        ``(score in [0, 1], note)``; ``note`` says why a reply got no credit, else ``None``.

    Raises:
        ActionParseError: no answer could be read from the reply.
    """
    answer = extract_answer(reply, fallback_to_text=True)
    if answer is None:
        raise ActionParseError("no answer found; put your final answer inside <answer>...</answer>")
    oracle = entry.get("answer")
    oracle = oracle if isinstance(oracle, str) else None
    if (
        oracle is not None and not answer.isascii() and has_lookalikes(answer, oracle)
    ):  # (ASCII: none)
        return 0.0, "the answer has non-ASCII look-alike characters"
    raw, refusal = _scored(name, config_json, entry, answer, timeout)
    if refusal is not None:
        return 0.0, refusal
    if 0.0 < raw < 1.0 and raw <= _question_independent_score(
        name, config_json, entry, timeout, reaches=raw
    ):
        return 0.0, "partial credit no higher than a reply that ignores the question earns"
    if (
        oracle is not None
        and raw > 0
        and answer != oracle
        and normalize_answer(answer) != normalize_answer(oracle)
    ):
        # (an answer equal to the oracle once normalized neither hedges nor contains more)
        if is_hedged(answer, oracle):
            return 0.0, "the answer hedges between alternatives"
        if contains_oracle(answer, oracle) and not _same_number(answer, oracle):
            return 0.0, "the answer contains more than the answer"
    return raw, None


def _scored(
    name: str, config_json: str, entry: dict[str, Any], answer: str, timeout: float
) -> tuple[float, str | None]:
    """``(raw score, None)`` of an extracted answer, or ``(0.0, why)`` when a screen refuses it or
    its check is stopped: the screens of :data:`EVAL_SCORED` and :data:`SYMPY_SCORED`, then the
    dataset's scorer in this process or in the verifier worker."""
    if name in EVAL_SCORED and (
        not _LITERAL.fullmatch(answer) or "__" in answer or _nesting(answer) > 16
    ):
        return 0.0, "the answer is not a plain list literal"
    if name in SYMPY_SCORED:
        try:
            safe_expression(answer)
        except UnsafeExpression as exc:
            return 0.0, f"the answer is not a plain expression: {exc}"
    if scored_in_process(name):
        raw = _raw_score(name, config_json, answer, entry)
    elif refusal := _screen(name, answer, entry):
        return 0.0, refusal
    else:
        try:
            raw = _call_scorer(
                name, _worker_score, name, config_json, answer, entry, timeout=timeout
            )
            if raw is None:  # a new worker: build the dataset there (trusted work, generous limit)
                _call_scorer(
                    name, _worker_build, *_dataset_key(name, config_json, entry), timeout=600.0
                )
                raw = _call_scorer(
                    name, _worker_score, name, config_json, answer, entry, timeout=timeout
                )
        except (VerifierTimeout, RuntimeError) as exc:
            return 0.0, f"the check was stopped: {exc}"
        if raw is None:  # pragma: no cover - the worker died between the two calls
            return 0.0, "the check was stopped: the verifier worker restarted"
    if not 0.0 <= raw <= 1.0:
        return 0.0, f"the dataset's scorer gave {raw!r}, outside [0, 1]"
    return raw, None


QUESTION_INDEPENDENT_REPLIES = ("", "0", "none", "[]", "{}")
"""Replies that ignore the question; with the question itself (echoed) and the
:data:`LUCKY_CONSTANTS` they set an item's floor of partial credit (see :func:`score_reply`)."""

LUCKY_CONSTANTS = ("1", "-1", "2", "True", "False", "yes", "no")
"""Constants that closeness-graded scorers pay for by luck, whatever the question: ``1`` earns
0.48-0.64 on rectangle_count (credit by distance to the count), ``-1`` 0.47 on
polynomial_equations, ``False`` 0.14-0.17 on spell_backward (letters in place). Part of the floor."""


def _question_independent_score(
    name: str, config_json: str, entry: dict[str, Any], timeout: float, reaches: float = 1.0
) -> float:
    """The most that a reply which ignores the question (:data:`QUESTION_INDEPENDENT_REPLIES`,
    :data:`LUCKY_CONSTANTS`, the question echoed, or the reference's form with every digit 0: an
    all-dead Game of Life board, ``-0.00, 0.0``, a number of the question, or a grid puzzle's
    clues with every blank one value: :func:`_clue_grids`) earns on this item, or the first such
    score at or above ``reaches`` (the probes stop there: at most 20 checks, 36 for a 16 x 16
    grid, made only for a reply that got partial credit). Many reasoning-gym scorers give flat credit (0.01, 0.05, 0.1) to any answer,
    credit by closeness to a constant, or credit to the question restated."""
    echo = extract_answer(str(entry.get("question", "")), fallback_to_text=True) or ""
    reference = entry.get("answer")
    shape = _ZERO_DIGITS.sub("0", reference) if isinstance(reference, str) else ""
    shape = "" if shape == reference else shape  # a reference without digits is no probe
    best = 0.0
    probes = (
        *QUESTION_INDEPENDENT_REPLIES,
        echo,
        shape,
        *LUCKY_CONSTANTS,
        *_question_numbers(str(entry.get("question", ""))),
        *_clue_grids(entry),
    )
    for probe in probes:
        best = max(best, _scored(name, config_json, entry, probe, timeout)[0])
        if best >= reaches:
            break
    return best


_ZERO_DIGITS = re.compile(r"\d")
_QUESTION_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _question_numbers(question: str, each_end: int = 3) -> list[str]:
    """The first and last ``each_end`` distinct numbers written in the question (``833`` of
    "Find the prime factorization of 833", which prime_factorization paid 0.5)."""
    found = list(dict.fromkeys(_QUESTION_NUMBER.findall(question[:100_000])))
    return found if len(found) <= 2 * each_end else found[:each_end] + found[-each_end:]


_MAX_GRID = 16


def _clue_grids(entry: dict[str, Any]) -> list[str]:
    """For a grid puzzle (``metadata["puzzle"]``: an n x n list of ints, 0 for a blank; sudoku,
    mini_sudoku, futoshiki), the given clues with every blank filled by the same value, one grid
    per value 1..n: the question copied, no cell solved. Per-cell scorers paid it 0.45-0.68."""
    puzzle = entry.get("metadata", {}).get("puzzle")
    if not (
        isinstance(puzzle, list)
        and 0 < len(puzzle) <= _MAX_GRID
        and all(
            isinstance(row, list)
            and len(row) == len(puzzle)
            and all(type(cell) is int for cell in row)
            for row in puzzle
        )
    ):
        return []
    size = len(puzzle)
    return [
        "\n".join(" ".join(str(cell or value) for cell in row) for row in puzzle)
        for value in range(1, size + 1)
    ]


def _same_number(answer: str, oracle: str) -> bool:
    """Both are plain decimal numbers of equal value ("1000.0" for "1000"), which the datasets that
    compare numbers by value accept; any other text around the reference is refused."""
    a, o = normalize_answer(answer).replace(",", ""), normalize_answer(oracle).replace(",", "")
    if not (_PLAIN_NUMBER.fullmatch(a) and _PLAIN_NUMBER.fullmatch(o)):
        return False
    try:
        return decimal.Decimal(a) == decimal.Decimal(o)
    except decimal.InvalidOperation:  # pragma: no cover - the pattern only matches decimals
        return False


_PLAIN_NUMBER = re.compile(r"[-+]?\d{1,64}(?:\.\d{0,64})?")
_TOWER = re.compile(r"(?:\*\*|\^)\s*[({]?\s*[-+]?[\w.]+\s*[)}]?\s*(?:\*\*|\^)")
_HUGE_POWER = re.compile(r"(?:\*\*|\^)\s*[({]?\s*[-+]?\d{4,}|\d[eE][-+]?\d{4,}|\d{4,}\s*!")
_IDENTIFIERS = re.compile(r"[A-Za-z_]\w*")
MIN_SCREEN_LENGTH = 4096
"""Shortest length limit of an answer scored in the verifier worker (see :func:`_screen`)."""


def _screen(name: str, answer: str, entry: dict[str, Any]) -> str | None:
    """Why an answer to a worker-scored dataset is refused before its scorer runs, or ``None``.

    Refused: answers longer than ``max(8 * len(reference), MIN_SCREEN_LENGTH)`` characters; power
    towers (``9**9**9``, ``9^9^9``), exponents or factorials of 4+ digits (``10**9999``,
    ``1e99999``, ``9999!``); for propositional_logic, names that are not the question's
    variables. None of these can be a correct answer, and each can make a scorer do unbounded
    work (the worker's deadline would stop it, but the screen answers at once).
    """
    metadata = entry.get("metadata", {})
    reference = (
        entry.get("answer")
        if isinstance(entry.get("answer"), str)
        else metadata.get("example_answer")
    )
    limit = max(8 * len(reference if isinstance(reference, str) else ""), MIN_SCREEN_LENGTH)
    if len(answer) > limit:
        return f"the answer has {len(answer)} characters; at most {limit} are read for this task"
    if _TOWER.search(answer) or _HUGE_POWER.search(answer):
        return "the answer has a power tower or a huge exponent"
    if name == "propositional_logic":
        allowed = set(metadata.get("variables", ()))
        unknown = sorted(set(_IDENTIFIERS.findall(answer)) - allowed)
        if unknown:
            return f"the answer uses names that are not variables of the question: {unknown[:5]}"
    return None


def _nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        depth += (char == "[") - (char == "]")
        deepest = max(deepest, depth)
    return deepest


def oracle_answer(name: str, entry: dict[str, Any]) -> str:
    """The reference answer of one reasoning-gym item: the dataset's answer, or for datasets
    without one a valid example from the item's metadata (``""`` where there is none).

    Args:
        name: the reasoning-gym dataset name (``"propositional_logic"``, ...).
        entry: the item as the dataset returns it (``question``, ``answer``, ``metadata``).
    """
    if isinstance(entry.get("answer"), str):
        return entry["answer"]
    metadata = entry.get("metadata", {})
    if name == "propositional_logic":
        return _propositional_conclusion(entry)
    if name == "graph_color":
        return json.dumps({str(k): v for k, v in metadata.get("possible_answer", {}).items()})
    for key in ("example_answer", "example_correct_answer"):
        if isinstance(metadata.get(key), str):
            return metadata[key]
    return ""


def _pair(bound: Bound, *names: str) -> dict[str, Bound]:
    return {f"{side}_{name}": bound for name in names for side in ("min", "max")}


CONFIG_FIELDS: dict[str, Bound] = {
    **_pair(IntRange(1, 10), "terms", "digits", "degree"),
    **_pair(IntRange(1, 12), "rows", "cols", "numbers"),
    **_pair(IntRange(1, 50), "words"),
    **_pair(IntRange(0, 100), "n"),
    **_pair(IntRange(1, 100), "string_length"),
    **_pair(FloatRange(-1e6, 1e6), "value"),
    "allow_negation": FLAG,
    "p_solvable": FloatRange(0.0, 1.0),
    "difficulty": FloatRange(0.0, 10.0),
}
"""Generator config fields an operator may let clients or stored data set in ``config`` (a dataset without the
field refuses it itself), with bounds per field; the rest (``size``,
``seed``, lists of operators, ...) come from the registered row or from code on the server."""


class ReasoningGymEnv(EpisodeGuard, gym.Env[str, str]):
    """One reasoning-gym dataset as a single-turn question-answering environment.

    ## Description
    ``reset`` draws an item of the dataset (question, oracle answer, metadata) from the seed; the
    agent replies once and the reply is scored. The items are reasoning-gym's own
    (Open-Thought/reasoning-gym, 0.1.25): item ``k`` is ``Random(k)``-generated, so
    ``reset(seed=s)`` always gives the same question.

    ## Action Space
    ``UnicodeText(65536)``: the whole reply. The answer is extracted by
    :func:`verigym.verifiers.extract_answer`: the last ``<answer>...</answer>`` or ``\\boxed{}``
    outside ``<think>``; with neither, the visible reply. Longer replies or replies with no visible
    answer are malformed.

    ## Observation Space
    ``UnicodeText(1 << 20)``: on reset the question followed by :data:`ANSWER_FORMAT`; after the
    answer, a one-line verdict.

    ## Rewards
    ``reward = score``, the dataset's ``score_answer`` on the extracted answer, hardened by
    :func:`score_reply` (0 for hedges, for partial credit that only comes from containing the oracle,
    for partial credit no higher than a reply that ignores the question earns on the item,
    for look-alike characters, for answers refused by the expression screens, and when a symbolic
    check overruns ``score_timeout``). A malformed reply scores 0 with ``info["action_error"]``.

    ## Starting State
    Item seed ``k ~ U{0, 2^31 - 2}``, the first draw of ``self.np_random`` (Gymnasium's seeding:
    ``reset(seed=s)`` gives item ``seeding.np_random(s)[0].integers(0, 2**31 - 1)``);
    ``info["item_seed"]`` reports it.

    ## Episode End
    Terminated after the one reply; ``success = score >= 1``. ``info["reference_answer"]`` then
    holds the dataset's answer (or a valid example for datasets scored by a checker).

    ## Arguments
    * ``dataset`` (str): a reasoning-gym dataset name (``reasoning_gym.factory.DATASETS``).
    * ``level`` (int | None): curriculum level ``0..levels-1`` (``None``: the dataset's default
      config); ``env.unwrapped.levels`` is the number of levels (0 without a curriculum).
    * ``config`` (dict | None): overrides of the dataset's config fields (JSON values).
    * ``score_timeout`` (float): seconds of the verifier worker's CPU time for a check (default
      :data:`SCORE_SECONDS`; legitimate answers take milliseconds; a check that overruns scores 0).

    ## Version History
    * v0: initial version. Holes closed since (same version, shared/DESIGN.md decision 1): partial
      credit no higher than a question-independent reply (empty, ``0``, ``none``, ``[]``, ``{}``,
      the question echoed, ``1``, ``-1``, ``2``, ``True``, ``False``, ``yes``, ``no``) earns on the
      item scores 0 (reasoning-gym's flat 0.01/0.05/0.1 credit for any answer);
      a propositional-logic tautology scores 0 (was 0.25), a conclusion that does not follow 0 (was
      0.05); an answer spelling NaN scores 0 (``nan`` scored 1 on complex_arithmetic); puzzle24
      needs the question's numbers (``1*2*3*4`` scored 1 on every item); coin_flip needs the
      probability to a relative 1e-3 (``0`` scored 1 on most items); time_intervals gives no
      partial credit (``00:00:00`` earned 0.6-0.94); the reference's form with every digit 0 (an
      all-dead board earned 0.94-0.99 on game_of_life) and a grid puzzle's clues with every blank
      one value (0.45-0.68 on sudoku, mini_sudoku, futoshiki) and the question's numbers (``833``
      earned 0.5 for the factorization of 833) join the partial-credit floor.
      Correct answers score as before.
    """

    metadata = {"render_modes": ["ansi"], "family": "text"}

    remote_kwargs = {
        "level": operator_only(
            IntRange(0, 20),
            why="generator work: the top level of RG-Bf costs 1.2 s a reset against 4 ms",
        ),
        "config": operator_only(
            Fields(CONFIG_FIELDS),
            why="generator work: a client-set config made a reset cost 0.5 s against 9 ms",
        ),
        "dataset": operator_only(why="it picks the generator, and some take seconds per item"),
        "score_timeout": operator_only(FloatRange(0.01, 60.0), why="CPU seconds of each check"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`): none
    of the generator's. ``level`` and ``config`` set generator work (a reset must stay within
    50 ms; some datasets' top levels and configs take seconds), so only the operator lets them
    through (``serve-env --allow-kwargs level,config``), ``config`` then only with the
    :data:`CONFIG_FIELDS` (never ``size`` or ``seed``)."""

    def __init__(
        self,
        *,
        dataset: str,
        level: int | None = None,
        config: dict[str, Any] | None = None,
        score_timeout: float = SCORE_SECONDS,
        render_mode: str | None = None,
    ):
        import reasoning_gym.factory as factory

        if not isinstance(dataset, str) or dataset not in factory.DATASETS:
            raise ValueError(
                f"unknown reasoning-gym dataset {dataset!r}; see reasoning_gym.factory.DATASETS"
            )
        config = {} if config is None else dict(config)
        try:
            json.dumps(config)
        except TypeError as exc:
            raise ValueError(f"config must be JSON-serializable: {exc}") from None
        self.levels = 0
        if dataset in factory.CURRICULA:
            attributes = factory.create_curriculum(dataset).attributes.values()
            self.levels = max((len(a.levels) for a in attributes), default=0)
        if level is not None and (
            not isinstance(level, int)
            or isinstance(level, bool)
            or not 0 <= level < max(self.levels, 1)
            or not self.levels
        ):
            raise ValueError(
                f"level must be None or an int in [0, {self.levels - 1}] for {dataset}, got {level!r}"
            )
        if not isinstance(score_timeout, (int, float)) or not score_timeout > 0:
            raise ValueError(
                f"score_timeout must be a positive number of seconds, got {score_timeout!r}"
            )
        render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.dataset = dataset
        self.level = level
        self.score_timeout = float(score_timeout)
        self.render_mode = render_mode
        self._config_json = json.dumps({"config": config, "level": level}, sort_keys=True)
        try:
            _dataset(dataset, self._config_json, 0 if dataset in RESEED_DATASETS else None)
        except Exception as exc:
            raise ValueError(f"reasoning-gym refused the config of {dataset}: {exc}") from None
        self.observation_space = UnicodeText(1 << 20)
        self.action_space = ReplySpace(_MAX_REPLY)
        self._entry: dict[str, Any] = {}
        self._item_seed = 0
        self._reference: str | None = None
        self._last = ""

    # -- TextInterface -------------------------------------------------------------------------------
    def instructions(self) -> str:
        return f"Answer the question of the reasoning-gym task {self.dataset!r}. {ANSWER_FORMAT}"

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> str:
        """The reply itself, checked for type and length (scoring extracts the answer).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: the reply is longer than 65536 characters.
        """
        if not isinstance(text, str):
            raise TypeError(
                f"ReasoningGymEnv takes str actions, got {type(text).__name__}: {text!r:.80}"
            )
        if len(text) > _MAX_REPLY:
            raise ActionParseError(
                f"your reply has {len(text)} characters; at most {_MAX_REPLY} are read"
            )
        return text

    def task_fingerprint(self) -> Any:
        """The item's reference answer (the hidden target; the question is the observation). The
        item's index and seed are left out: two indices that draw the same question and answer
        pose the same task."""
        return (self._entry or {}).get("answer")

    def oracle_action(self) -> str:
        """The dataset's own answer in an ``<answer>`` tag."""
        return f"<answer>{self._reference_answer()}</answer>"

    def _reference_answer(self) -> str:
        """:func:`oracle_answer` of the current item, computed once per episode (for
        propositional_logic it searches conclusions by truth tables)."""
        if self._reference is None:
            self._reference = oracle_answer(self.dataset, self._entry)
        return self._reference

    @property
    def question(self) -> str:
        """The current item's question (without the format instruction)."""
        return self._entry.get("question", "")

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        item_seed = int(self.np_random.integers(0, _INDEX_SIZE))
        entry = {**_item(self.dataset, self._config_json, item_seed), "_verigym_seed": item_seed}
        self._item_seed, self._entry, self._reference = item_seed, entry, None
        self._last = observation = f"{entry['question']}\n\n{ANSWER_FORMAT}"
        return observation, {
            "dataset": self.dataset,
            "item_seed": item_seed,
            "instructions": self.instructions(),
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._entry:
            raise RuntimeError("call reset() before step()")
        info: dict[str, Any] = {"dataset": self.dataset, "item_seed": self._item_seed}
        try:
            reply = self.parse_action(action)
            score, note = score_reply(
                self.dataset, self._config_json, self._entry, reply, timeout=self.score_timeout
            )
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            score, note = 0.0, str(exc)
        success = score >= 1.0
        info["reference_answer"] = self._reference_answer()
        if note:
            info["verdict_note"] = note
        episode_end(info, success=success, score=score)
        self._last = f"{'Correct' if success else 'Not correct'} (score {score:.3f})." + (
            f" {note}." if note else ""
        )
        return self._last, info["score"], True, False, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
