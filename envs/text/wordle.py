"""Wordle: guess a five-letter word from per-letter colour feedback."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.envs.text.words import FIVE_LETTER_WORDS
from verigym.validation import check_choice

__all__ = ["WordleEnv", "wordle_feedback"]

_TURNS = {"easy": 8, "medium": 6, "hard": 5}


def wordle_feedback(guess: str, secret: str) -> str:
    """Wordle's colouring of ``guess`` against ``secret``: ``G`` right letter and place, ``Y`` in
    the word elsewhere (each secret letter is used once, greens first), ``.`` absent.

    Example: ``wordle_feedback("speed", "abide") == "..Y.Y"`` (one ``e`` in "abide", so only the
    first ``e`` of "speed" is yellow).
    """
    marks = ["."] * len(guess)
    spare: dict[str, int] = {}
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            marks[i] = "G"
        else:
            spare[s] = spare.get(s, 0) + 1
    for i, g in enumerate(guess):
        if marks[i] == "." and spare.get(g, 0) > 0:
            marks[i] = "Y"
            spare[g] -= 1
    return "".join(marks)


@functools.lru_cache(maxsize=1)
def _pattern_table() -> np.ndarray:
    """(guess, secret) -> feedback code, int16 array of shape (W, W) over FIVE_LETTER_WORDS."""
    words = FIVE_LETTER_WORDS
    codes = {}
    table = np.empty((len(words), len(words)), dtype=np.int16)
    for i, guess in enumerate(words):
        for j, secret in enumerate(words):
            table[i, j] = codes.setdefault(wordle_feedback(guess, secret), len(codes))
    return table


@functools.lru_cache(maxsize=64)
def _best_guess(candidates: tuple[int, ...]) -> int:
    """Minimax guess index: the word whose worst feedback class over ``candidates`` is smallest
    (ties: a candidate, then the lowest index)."""
    if len(candidates) <= 2:
        return candidates[0]
    table = _pattern_table()
    sub = table[:, list(candidates)]
    worst = np.array([np.bincount(row).max() for row in sub])
    is_candidate = np.zeros(len(FIVE_LETTER_WORDS), dtype=bool)
    is_candidate[list(candidates)] = True
    order = np.lexsort((np.arange(len(worst)), ~is_candidate, worst))
    return int(order[0])


class WordleEnv(TextGameEnv):
    """Wordle with verigym's own word list.

    ## Description
    A secret word is drawn from :data:`~verigym.envs.text.words.FIVE_LETTER_WORDS` (529 common
    words). Each turn the agent guesses a word of the list; the env colours every letter: ``G``
    right place, ``Y`` elsewhere in the word, ``.`` absent (duplicates as in Wordle).

    ## Action Space
    ``UnicodeText(8192)``: the reply; the guess is its last five-letter word outside ``<think>``.
    ``info["action_candidates"]`` lists the 529 legal guesses.

    ## Observation Space
    ``UnicodeText``: the rules and history on reset; then ``"Turn t/T. crane -> .GY.."``.

    ## Rewards
    ``+1`` when the word is found; ``invalid_action_reward`` (default ``-0.1``) for a reply with no
    word of the list (the turn is spent); ``0`` otherwise.

    ## Starting State
    The secret word is uniform over the list.

    ## Episode End
    Terminated when the word is guessed (success, score 1); truncated after ``max_turns`` guesses
    (score 0): easy 8, medium 6, hard 5.

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"`` (turn budget).
    * ``invalid_action_reward`` (float).

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        *,
        difficulty: str = "medium",
        invalid_action_reward: float = -0.1,
        render_mode: str | None = None,
    ):
        self.difficulty = check_choice("difficulty", difficulty, DIFFICULTIES)
        self._init_base(
            max_turns=_TURNS[difficulty],
            invalid_action_reward=invalid_action_reward,
            render_mode=render_mode,
        )
        self._secret = 0
        self._candidates: tuple[int, ...] = ()
        self._index = {w: i for i, w in enumerate(FIVE_LETTER_WORDS)}

    def instructions(self) -> str:
        return (
            f"Guess the secret five-letter English word in {self.max_turns} turns. After each guess "
            "each letter is marked G (right letter, right place), Y (in the word, elsewhere) or . "
            "(not in the word). Guesses must be common five-letter words. Reply with one word."
        )

    def action_candidates(self) -> list[str]:
        return list(FIVE_LETTER_WORDS)

    def _new_task(self) -> str:
        self._secret = int(self.np_random.integers(len(FIVE_LETTER_WORDS)))
        self._candidates = tuple(range(len(FIVE_LETTER_WORDS)))
        return self.instructions()

    def _parse(self, text: str) -> str:
        words = [w.strip(".,!?;:'\"()[]{}<>*`") for w in text.split()]
        words = [w for w in words if len(w) == 5 and w.isalpha()]
        if not words:
            raise ActionParseError("no five-letter word found; reply with your guess, e.g. crane")
        if words[-1] not in self._index:
            raise ActionParseError(f"{words[-1]!r} is not in the word list")
        return words[-1]

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        secret = FIVE_LETTER_WORDS[self._secret]
        marks = wordle_feedback(move, secret)
        table = _pattern_table()
        code = table[self._index[move], self._secret]
        self._candidates = tuple(c for c in self._candidates if table[self._index[move], c] == code)
        return f"{move} -> {marks}", move == secret, False

    def oracle_action(self) -> str:
        """Minimax over the words still consistent with the feedback."""
        return FIVE_LETTER_WORDS[_best_guess(self._candidates)]
