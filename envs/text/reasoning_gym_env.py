"""Every reasoning-gym dataset as a single-turn verigym environment, with a hardened scorer."""

from __future__ import annotations

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
from verigym.verifiers import (
    BoundedWorker,
    UnsafeExpression,
    VerifierTimeout,
    call_bounded,
    contains_oracle,
    extract_answer,
    has_lookalikes,
    is_hedged,
    safe_expression,
)

__all__ = ["ANSWER_FORMAT", "ReasoningGymEnv", "score_reply"]

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

HASH_SEEDED_DATASETS = frozenset({"codeio", "isomorphic_strings", "knight_swap", "list_functions", "polynomial_multiplication", "ransom_note", "word_ladder"})
"""Datasets whose items depend on ``PYTHONHASHSEED`` (set iteration order): generated in a worker
process started with ``PYTHONHASHSEED=0`` so that the same seed gives the same item in every
process (found by generating items under two hash seeds)."""

SYMPY_SCORED = frozenset({"countdown", "intermediate_integration", "polynomial_multiplication", "puzzle24", "simple_integration"})
"""Datasets whose scorer passes the answer to ``sympy.parse_expr`` (which evaluates Python): the
answer must pass :func:`verigym.verifiers.safe_expression` and the scorer runs in the verifier
worker process under ``score_timeout``."""

EVAL_SCORED = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})
"""Datasets whose scorer calls ``eval`` on the answer: only text made of letters, digits, single
underscores, whitespace and ``[ ] , ' " -`` (list literals nested at most 16 deep, boards like
``_ Q _``) reaches it; without parentheses, dots or double underscores nothing can be called."""

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
        config = curriculum.generate_configuration(defaults={**overrides, "seed": seed, "size": size})
    else:
        config = config_cls(**{**overrides, "seed": seed, "size": size})
    return dataset_cls(config=config)


def _generate(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    """Generate one item. Some generators also draw from the global ``random``/``numpy`` RNGs, so
    both are seeded from (dataset, item seed) for the call and restored afterwards."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    random.seed(f"verigym:{name}:{item_seed}")
    np.random.seed(item_seed % 2**32)
    try:
        if name in RESEED_DATASETS:
            return _dataset(name, config_json, item_seed)[0]
        return _dataset(name, config_json, None)[item_seed % SIZE_CAPS.get(name, _INDEX_SIZE)]
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


_GENERATOR = BoundedWorker(start_method="spawn", environment={"PYTHONHASHSEED": "0"})


@functools.lru_cache(maxsize=4096)
def _item(name: str, config_json: str, item_seed: int) -> dict[str, Any]:
    """Item ``item_seed`` of a dataset (cached); hash-order-dependent datasets are generated in a
    worker process with ``PYTHONHASHSEED=0``."""
    if name in HASH_SEEDED_DATASETS:
        return _GENERATOR.call(_generate, (name, config_json, item_seed), 600.0)
    return _generate(name, config_json, item_seed)


def _raw_score(name: str, config_json: str, answer: str, entry: dict[str, Any]) -> float:
    """The dataset's own score of an (already screened) answer; 0.0 when the scorer raises."""
    dataset = _dataset(name, config_json, entry["_verigym_seed"] if name in RESEED_DATASETS else None)
    try:
        value = float(dataset.score_answer(answer, entry))
    except Exception as exc:  # a dataset scorer that crashes on odd input scores it 0
        logger.debug("%s scorer raised %s on %r", name, exc, answer[:80])
        return 0.0
    return value if math.isfinite(value) else 0.0


def score_reply(name: str, config_json: str, entry: dict[str, Any], reply: str, *, timeout: float = 10.0) -> tuple[float, str | None]:
    """Score an agent's whole reply against a reasoning-gym item.

    Steps: :func:`~verigym.verifiers.extract_answer` (with fallback to the visible reply);
    look-alike refusal; screening for the datasets in :data:`SYMPY_SCORED` and
    :data:`EVAL_SCORED`; the dataset's ``score_answer`` (bounded by ``timeout`` seconds in the
    verifier worker for the sympy ones); then no credit for hedges and for partial credit given
    only because the answer contains the oracle.

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
    if oracle is not None and has_lookalikes(answer, oracle):
        return 0.0, "the answer has non-ASCII look-alike characters"
    if name in EVAL_SCORED and (not _LITERAL.fullmatch(answer) or "__" in answer or _nesting(answer) > 16):
        return 0.0, "the answer is not a plain list literal"
    if name in SYMPY_SCORED:
        try:
            safe_expression(answer)
        except UnsafeExpression as exc:
            return 0.0, f"the answer is not a plain expression: {exc}"
        try:
            raw = call_bounded(_raw_score, name, config_json, answer, entry, timeout=timeout)
        except (VerifierTimeout, RuntimeError) as exc:
            return 0.0, f"the check was stopped: {exc}"
    else:
        raw = _raw_score(name, config_json, answer, entry)
    raw = min(1.0, max(0.0, raw))
    if oracle is not None:
        if raw > 0 and is_hedged(answer, oracle):
            return 0.0, "the answer hedges between alternatives"
        if raw < 1 and contains_oracle(answer, oracle):
            return 0.0, "the answer contains more than the answer"
    return raw, None


def _nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        depth += (char == "[") - (char == "]")
        deepest = max(deepest, depth)
    return deepest


def _oracle_answer(name: str, entry: dict[str, Any]) -> str:
    """The dataset's answer, or for datasets without one a valid example from the metadata."""
    if isinstance(entry.get("answer"), str):
        return entry["answer"]
    metadata = entry.get("metadata", {})
    if name == "graph_color":
        return json.dumps({str(k): v for k, v in metadata.get("possible_answer", {}).items()})
    for key in ("example_answer", "example_correct_answer"):
        if isinstance(metadata.get(key), str):
            return metadata[key]
    return ""


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
    for look-alike characters, for answers refused by the expression screens, and when a symbolic
    check overruns ``score_timeout``). A malformed reply scores 0 with ``info["action_error"]``.

    ## Starting State
    Item seed ``k ~ U{0, 2^31 - 2}`` from the reset seed; ``info["item_seed"]`` reports it.

    ## Episode End
    Terminated after the one reply; ``success = score >= 1``. ``info["reference_answer"]`` then
    holds the dataset's answer (or a valid example for datasets scored by a checker).

    ## Arguments
    * ``dataset`` (str): a reasoning-gym dataset name (``reasoning_gym.factory.DATASETS``).
    * ``level`` (int | None): curriculum level ``0..levels-1`` (``None``: the dataset's default
      config); ``env.unwrapped.levels`` is the number of levels (0 without a curriculum).
    * ``config`` (dict | None): overrides of the dataset's config fields (JSON values).
    * ``score_timeout`` (float): wall-clock seconds for a symbolic check (default 10: generous for
      a loaded machine; a check that overruns scores 0).

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "text"}

    def __init__(
        self,
        *,
        dataset: str,
        level: int | None = None,
        config: dict[str, Any] | None = None,
        score_timeout: float = 10.0,
        render_mode: str | None = None,
    ):
        import reasoning_gym.factory as factory

        if not isinstance(dataset, str) or dataset not in factory.DATASETS:
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r}; see reasoning_gym.factory.DATASETS")
        config = {} if config is None else dict(config)
        try:
            json.dumps(config)
        except TypeError as exc:
            raise ValueError(f"config must be JSON-serializable: {exc}") from None
        self.levels = 0
        if dataset in factory.CURRICULA:
            attributes = factory.create_curriculum(dataset).attributes.values()
            self.levels = max((len(a.levels) for a in attributes), default=0)
        if level is not None and (not isinstance(level, int) or isinstance(level, bool) or not 0 <= level < max(self.levels, 1) or not self.levels):
            raise ValueError(f"level must be None or an int in [0, {self.levels - 1}] for {dataset}, got {level!r}")
        if not isinstance(score_timeout, (int, float)) or not score_timeout > 0:
            raise ValueError(f"score_timeout must be a positive number of seconds, got {score_timeout!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
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
            raise TypeError(f"ReasoningGymEnv takes str actions, got {type(text).__name__}: {text!r:.80}")
        if len(text) > _MAX_REPLY:
            raise ActionParseError(f"your reply has {len(text)} characters; at most {_MAX_REPLY} are read")
        return text

    def oracle_action(self) -> str:
        """The dataset's own answer in an ``<answer>`` tag."""
        return f"<answer>{_oracle_answer(self.dataset, self._entry)}</answer>"

    @property
    def question(self) -> str:
        """The current item's question (without the format instruction)."""
        return self._entry.get("question", "")

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._item_seed = int(self.np_random.integers(0, _INDEX_SIZE))
        entry = dict(_item(self.dataset, self._config_json, self._item_seed))
        entry["_verigym_seed"] = self._item_seed
        self._entry = entry
        self._last = f"{entry['question']}\n\n{ANSWER_FORMAT}"
        return self._last, {"dataset": self.dataset, "item_seed": self._item_seed, "instructions": self.instructions()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._entry:
            raise RuntimeError("call reset() before step()")
        info: dict[str, Any] = {"dataset": self.dataset, "item_seed": self._item_seed}
        try:
            reply = self.parse_action(action)
            score, note = score_reply(self.dataset, self._config_json, self._entry, reply, timeout=self.score_timeout)
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            score, note = 0.0, str(exc)
        success = score >= 1.0
        info["reference_answer"] = _oracle_answer(self.dataset, self._entry)
        if note:
            info["verdict_note"] = note
        episode_end(info, success=success, score=score)
        self._last = f"{'Correct' if success else 'Not correct'} (score {score:.3f})." + (f" {note}." if note else "")
        return self._last, float(info["score"]), True, False, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
