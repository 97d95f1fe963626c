"""Twenty questions: identify a secret object by yes/no questions to a scripted answerer."""

from __future__ import annotations

import re
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["ATTRIBUTES", "TwentyQuestionsEnv"]

ATTRIBUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("colour", ("red", "blue", "green", "yellow", "purple", "orange")),
    ("size", ("tiny", "small", "medium", "large", "huge", "giant")),
    ("material", ("wood", "metal", "glass", "plastic", "stone", "paper")),
    ("shape", ("round", "square", "triangular", "oval", "hexagonal", "conical")),
    ("pattern", ("plain", "striped", "dotted", "checked", "spotted", "marbled")),
    ("room", ("kitchen", "garden", "office", "garage", "attic", "bedroom")),
)
"""The attribute schema: (attribute, values); every value word belongs to one attribute."""

# difficulty -> (attributes used, values per attribute, turns)
_LEVELS = {"easy": (3, 4, 20), "medium": (5, 4, 16), "hard": (6, 6, 20)}
_WORD = re.compile(r"[a-z]+")


class TwentyQuestionsEnv(TextGameEnv):
    """A twenty-questions deduction game with a scripted, always truthful answerer.

    ## Description
    The secret object has one value per attribute (e.g. colour red, size small, material wood).
    The agent asks yes/no questions naming values; the answerer replies *yes* exactly when, for
    every attribute the question mentions, the secret's value is one of the values mentioned
    ("is it red or blue?", "is it small and wooden?"). A reply starting with ``guess`` names
    one value per attribute and wins if all are right. The oracle halves the remaining values of
    one attribute per question, then guesses.

    ## Action Space
    ``UnicodeText(8192)``: a question (any text naming values) or ``guess <values>``.

    ## Observation Space
    ``UnicodeText``: the schema on reset, then ``"Turn t/T. Q: is it red or blue? A: yes."``.

    ## Rewards
    ``+1`` for the right guess; ``invalid_action_reward`` (default ``-0.1``) for a reply naming no
    value, or a guess without exactly one value per attribute (the turn is spent); ``0`` otherwise.

    ## Starting State
    Each attribute value uniform over its allowed values. Levels (attributes, values, turns):
    easy (3, 4, 20), medium (5, 4, 16), hard (6, 6, 20).

    ## Episode End
    Terminated on the right guess (success); truncated when the turns are spent (score =
    share of attributes of the last guess that were right, 0 without a guess).

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
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
        count, values, turns = _LEVELS[difficulty]
        self._init_base(
            max_turns=turns, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self.schema = tuple((name, options[:values]) for name, options in ATTRIBUTES[:count])
        self._owner = {value: name for name, options in self.schema for value in options}
        self._secret: dict[str, str] = {}
        self._possible: dict[str, list[str]] = {}
        self._last_guess_share = 0.0

    def instructions(self) -> str:
        schema = "; ".join(f"{name}: {', '.join(options)}" for name, options in self.schema)
        return (
            f"I am thinking of an object with one value of each attribute ({schema}). Ask yes/no "
            "questions that name values, e.g. 'is it red or blue?' (any of the named values of each "
            "named attribute) or 'is it red and small?'. When you know it, reply 'guess' and one "
            f"value per attribute, e.g. 'guess {' '.join(options[0] for _, options in self.schema)}'. "
            f"You have {self.max_turns} turns."
        )

    def _new_task(self) -> str:
        self._secret = {
            name: options[int(self.np_random.integers(len(options)))]
            for name, options in self.schema
        }
        self._possible = {name: list(options) for name, options in self.schema}
        self._last_guess_share = 0.0
        return self.instructions()

    def _parse(self, text: str) -> tuple[str, dict[str, set[str]]]:
        words = _WORD.findall(text.replace("wooden", "wood"))
        named: dict[str, set[str]] = {}
        for word in words:
            if word in self._owner:
                named.setdefault(self._owner[word], set()).add(word)
        if not named:
            raise ActionParseError(
                f"name at least one value ({', '.join(list(self._owner)[:6])}, ...)"
            )
        kind = "guess" if words and words[0] == "guess" else "question"
        if kind == "guess" and (
            len(named) != len(self.schema) or any(len(v) != 1 for v in named.values())
        ):
            raise ActionParseError("a guess names exactly one value of every attribute")
        return kind, named

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        kind, named = move
        if kind == "guess":
            right = sum(self._secret[name] in values for name, values in named.items())
            self._last_guess_share = right / len(self.schema)
            solved = right == len(self.schema)
            return f"Guess: {'right' if solved else 'wrong'}.", solved, False
        answer = all(self._secret[name] in values for name, values in named.items())
        if len(named) == 1:
            ((name, values),) = named.items()
            keep = [v for v in self._possible[name] if (v in values) == answer]
            self._possible[name] = keep or self._possible[name]
        asked = " and ".join(" or ".join(sorted(values)) for _, values in sorted(named.items()))
        return f"Q: is it {asked}? A: {'yes' if answer else 'no'}.", False, False

    def _partial_score(self) -> float:
        return self._last_guess_share

    def oracle_action(self) -> str:
        """Halve the values still possible for the first undecided attribute; then guess."""
        for name, _ in self.schema:
            possible = self._possible[name]
            if len(possible) > 1:
                return f"is it {' or '.join(possible[: len(possible) // 2])}?"
        return "guess " + " ".join(self._possible[name][0] for name, _ in self.schema)
