"""Mastermind: find a secret colour code from black/white peg feedback."""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["FIRST_GUESS", "MastermindEnv", "mastermind_feedback"]

# difficulty -> (pegs, colours, turns)
_LEVELS = {"easy": (3, 4, 8), "medium": (4, 6, 10), "hard": (5, 7, 12)}
_COLOURS = "ABCDEFGH"
FIRST_GUESS = {(3, 4): 6, (4, 6): 7, (5, 7): 58}
"""(pegs, colours) -> index of the minimax first guess (precomputed by ``_knuth_guess`` over all
codes; 7 is Knuth's AABB). ``tests/envs/text/test_games.py`` recomputes them."""
_MAX_GUESS_POOL = 400


def mastermind_feedback(guess: str, secret: str) -> tuple[int, int]:
    """(black, white): pegs right in colour and place; right colour, wrong place."""
    black = sum(g == s for g, s in zip(guess, secret))
    common = sum(min(guess.count(c), secret.count(c)) for c in set(guess))
    return black, common - black


@functools.lru_cache(maxsize=4)
def _codes(pegs: int, colours: int) -> tuple[np.ndarray, np.ndarray]:
    """All codes as int8 array (N, pegs) in lexicographic order, and colour counts (N, colours)."""
    codes = np.array(list(itertools.product(range(colours), repeat=pegs)), dtype=np.int8)
    counts = np.stack([(codes == c).sum(axis=1) for c in range(colours)], axis=1).astype(np.int8)
    return codes, counts


def _feedback_codes(index: int, subset: np.ndarray, pegs: int, colours: int) -> np.ndarray:
    """Feedback of code ``index`` against each code in ``subset``, encoded black*(pegs+1)+white."""
    codes, counts = _codes(pegs, colours)
    black = (codes[subset] == codes[index]).sum(axis=1)
    common = np.minimum(counts[subset], counts[index]).sum(axis=1)
    return black * (pegs + 1) + (common - black)


def _knuth_guess(candidates: np.ndarray, pegs: int, colours: int) -> int:
    """Knuth's minimax rule: the guess whose largest feedback class over the candidates is
    smallest, preferring candidates, then the lowest code. The guess pool is every code when
    there are at most 1296 codes, else the first ``_MAX_GUESS_POOL`` candidates."""
    if len(candidates) <= 2:
        return int(candidates[0])
    codes, counts = _codes(pegs, colours)
    pool = np.arange(len(codes)) if len(codes) <= 1296 else candidates[:_MAX_GUESS_POOL]
    classes = (pegs + 1) ** 2
    worst = np.empty(len(pool), dtype=np.int64)
    for start in range(0, len(pool), 256):
        chunk = pool[start : start + 256]
        black = (codes[chunk][:, None, :] == codes[candidates][None, :, :]).sum(axis=2)
        common = np.minimum(counts[chunk][:, None, :], counts[candidates][None, :, :]).sum(axis=2)
        keys = black * (pegs + 1) + (common - black) + classes * np.arange(len(chunk))[:, None]
        worst[start : start + len(chunk)] = (
            np.bincount(keys.ravel(), minlength=classes * len(chunk))
            .reshape(len(chunk), classes)
            .max(axis=1)
        )
    not_candidate = ~np.isin(pool, candidates)
    return int(pool[np.lexsort((pool, not_candidate, worst))[0]])


@functools.lru_cache(maxsize=4096)
def _cached_guess(candidates: tuple[int, ...], pegs: int, colours: int) -> int:
    return _knuth_guess(np.array(candidates, dtype=np.int64), pegs, colours)


class MastermindEnv(TextGameEnv):
    """Mastermind with black/white peg feedback and Knuth's minimax solver as the oracle.

    ## Description
    A secret code of ``pegs`` letters from the first ``colours`` letters of ``ABCDEFGH``
    (repetition allowed) is drawn. Each guess is answered with ``black`` (right letter, right
    place) and ``white`` (right letter, wrong place) counts. The oracle is Knuth's (1976) minimax
    strategy, solving the classic 4-peg 6-colour game in at most 5 guesses.

    ## Action Space
    ``UnicodeText(8192)``: the reply; the guess is its last run of ``pegs`` code letters
    (e.g. ``ABCD``; case-insensitive, spaces between letters allowed).

    ## Observation Space
    ``UnicodeText``: rules on reset, then ``"Turn t/T. ABCD -> black 1, white 2"``.

    ## Rewards
    ``+1`` when the code is found; ``invalid_action_reward`` (default ``-0.1``) for a malformed
    guess (the turn is spent); ``0`` otherwise.

    ## Starting State
    The secret is uniform over all ``colours ** pegs`` codes.

    ## Episode End
    Terminated when the code is found (success); truncated after ``max_turns`` guesses (score 0).
    Levels (pegs, colours, turns): easy (3, 4, 8), medium (4, 6, 10), hard (5, 7, 12).

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``invalid_action_reward`` (float).

    ## Version History
    * v0: initial version.

    References: D. E. Knuth, "The computer as master mind", J. Recreational Mathematics 9 (1976).
    """

    def __init__(
        self,
        *,
        difficulty: str = "medium",
        invalid_action_reward: float = -0.1,
        render_mode: str | None = None,
    ):
        self.difficulty = check_choice("difficulty", difficulty, DIFFICULTIES)
        self.pegs, self.colours, turns = _LEVELS[difficulty]
        self._init_base(
            max_turns=turns, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self._letters = _COLOURS[: self.colours]
        self._pattern = re.compile(
            rf"[{self._letters.lower()}](?:\s*[{self._letters.lower()}]){{{self.pegs - 1}}}(?![a-z])"
        )
        self._secret = 0
        self._candidates = np.arange(1)

    def instructions(self) -> str:
        return (
            f"Find the secret code: {self.pegs} letters from {', '.join(self._letters)} (letters may "
            f"repeat) in {self.max_turns} guesses. After each guess you get black = letters right "
            "in letter and place, white = right letter in the wrong place. Reply with a code, "
            f"e.g. {self._letters[: self.pegs].ljust(self.pegs, self._letters[0])}."
        )

    def _code_text(self, index: int) -> str:
        return "".join(self._letters[c] for c in _codes(self.pegs, self.colours)[0][index])

    def _new_task(self) -> str:
        codes, _ = _codes(self.pegs, self.colours)
        self._secret = int(self.np_random.integers(len(codes)))
        self._candidates = np.arange(len(codes))
        return self.instructions()

    def _parse(self, text: str) -> int:
        found = self._pattern.findall(text)
        if not found:
            raise ActionParseError(
                f"no code of {self.pegs} letters from {self._letters} found, e.g. {'A' * self.pegs}"
            )
        letters = [self._letters.index(c.upper()) for c in found[-1] if not c.isspace()]
        index = 0
        for letter in letters:
            index = index * self.colours + letter
        return index

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        black, white = mastermind_feedback(self._code_text(move), self._code_text(self._secret))
        observed = _feedback_codes(move, np.array([self._secret]), self.pegs, self.colours)[0]
        self._candidates = self._candidates[
            _feedback_codes(move, self._candidates, self.pegs, self.colours) == observed
        ]
        return f"{self._code_text(move)} -> black {black}, white {white}", black == self.pegs, False

    def oracle_action(self) -> str:
        """Knuth's minimax guess over the codes still consistent with the feedback."""
        if len(self._candidates) == len(_codes(self.pegs, self.colours)[0]):
            return self._code_text(FIRST_GUESS[(self.pegs, self.colours)])
        return self._code_text(
            _cached_guess(tuple(self._candidates.tolist()), self.pegs, self.colours)
        )
