"""Hangman: reveal a hidden word letter by letter before the lives run out."""

from __future__ import annotations

import string
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.envs.text.words import FIVE_LETTER_WORDS
from verigym.validation import check_choice

__all__ = ["HangmanEnv"]

_LIVES = {"easy": 10, "medium": 8, "hard": 7}


class HangmanEnv(TextGameEnv):
    """Hangman over verigym's five-letter word list.

    ## Description
    A word is drawn from :data:`~verigym.envs.text.words.FIVE_LETTER_WORDS`; the agent sees its
    pattern (``_ a _ _ e``) and guesses letters or the whole word. A wrong letter or wrong word
    costs a life. The oracle guesses the letter most frequent among the words of the list still
    consistent with the pattern, and the word once it is the only candidate.

    ## Action Space
    ``UnicodeText(8192)``: the reply; its last token is the move: one letter or a five-letter
    word. ``info["action_candidates"]`` lists the 26 letters.

    ## Observation Space
    ``UnicodeText``: ``"Turn t/T. Letter e: yes. Word: _ _ e _ e. Wrong: st. Lives 5."``

    ## Rewards
    ``+1`` when the word is complete; ``invalid_action_reward`` (default ``-0.1``) for a malformed
    move or a letter already tried (no life lost, the turn is spent); ``0`` otherwise.

    ## Starting State
    The word is uniform over the list; lives: easy 10, medium 8, hard 7.

    ## Episode End
    Terminated when the word is revealed (success) or the lives are gone (score = share of
    letters revealed); truncated after 26 turns.

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"`` (lives).
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
            max_turns=26, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self.lives = _LIVES[difficulty]
        self._word = ""
        self._tried: list[str] = []
        self._lives = self.lives

    def instructions(self) -> str:
        return (
            f"Guess the hidden five-letter English word. Each turn reply with one letter, or with "
            f"the whole word. A wrong guess costs one of your {self.lives} lives."
        )

    def action_candidates(self) -> list[str]:
        return list(string.ascii_lowercase)

    def legal_candidates(self) -> list[str]:
        """The letters not tried yet (a tried letter is an invalid move)."""
        return [c for c in string.ascii_lowercase if c not in self._tried]

    def _pattern(self) -> str:
        return " ".join(c if c in self._tried else "_" for c in self._word)

    def _status(self) -> str:
        wrong = "".join(c for c in self._tried if c not in self._word)
        return f"Word: {self._pattern()}. Wrong: {wrong or '-'}. Lives {self._lives}."

    def _new_task(self) -> str:
        self._word = FIVE_LETTER_WORDS[int(self.np_random.integers(len(FIVE_LETTER_WORDS)))]
        self._tried = []
        self._lives = self.lives
        return f"{self.instructions()}\n{self._status()}"

    def _parse(self, text: str) -> str:
        token = text.split()[-1].strip(".,!?;:'\"()[]{}<>*`")
        if not token.isascii() or not token.isalpha() or len(token) not in (1, 5):
            raise ActionParseError("reply with one letter (e.g. e) or a five-letter word")
        return token

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        if len(move) == 1:
            if move in self._tried:
                raise ActionParseError(f"you already tried {move!r}")
            self._tried.append(move)
            hit = move in self._word
            verdict = f"Letter {move}: {'yes' if hit else 'no'}."
        else:
            hit = move == self._word
            if hit:
                self._tried.extend(c for c in self._word if c not in self._tried)
            verdict = f"Word {move}: {'yes' if hit else 'no'}."
        if not hit:
            self._lives -= 1
        solved = all(c in self._tried for c in self._word)
        lost = not solved and self._lives <= 0
        return f"{verdict} {self._status()}", solved, lost

    def _partial_score(self) -> float:
        """The share of the word's letters revealed."""
        return sum(c in self._tried for c in self._word) / len(self._word)

    def oracle_action(self) -> str:
        """Most frequent untried letter among the consistent words; the word when it is unique."""
        wrong = {c for c in self._tried if c not in self._word}
        pattern = [c if c in self._tried else None for c in self._word]
        candidates = [
            w
            for w in FIVE_LETTER_WORDS
            if not wrong & set(w)
            and all((p is None and c not in self._tried) or p == c for p, c in zip(pattern, w))
        ]
        if len(candidates) == 1:
            return candidates[0]
        counts = {
            letter: sum(letter in w for w in candidates)
            for letter in string.ascii_lowercase
            if letter not in self._tried
        }
        return max(sorted(counts), key=lambda letter: counts[letter])
