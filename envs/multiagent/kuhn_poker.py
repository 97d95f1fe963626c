"""Kuhn poker: the three-card two-player poker game (Kuhn 1950), as a PettingZoo AEC env."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.envs.multiagent.base import TurnBasedGame, last_match

__all__ = ["KuhnPokerEnv", "equilibrium_bet_probability", "exploitability"]

CARDS = "JQK"
PASS, BET = 0, 1
_WORD = re.compile(r"\b(pass|check|fold|bet|call|0|1)\b", re.IGNORECASE)
_WORD_ACTION = {
    "pass": PASS,
    "check": PASS,
    "fold": PASS,
    "0": PASS,
    "bet": BET,
    "call": BET,
    "1": BET,
}

# Kuhn's equilibrium family (alpha in [0, 1/3]); probability of BET by card and history.
_ALPHA = 1.0 / 3.0
_FIRST_BET = {0: _ALPHA, 1: 0.0, 2: 3 * _ALPHA}  # player_0, opening
_FIRST_CALL = {0: 0.0, 1: _ALPHA + 1.0 / 3.0, 2: 1.0}  # player_0 after pass-bet
_SECOND_AFTER_PASS = {0: 1.0 / 3.0, 1: 0.0, 2: 1.0}  # player_1 after pass
_SECOND_AFTER_BET = {0: 0.0, 1: 1.0 / 3.0, 2: 1.0}  # player_1 after bet


_ENDS = ((PASS, PASS), (BET, PASS), (BET, BET), (PASS, BET, PASS), (PASS, BET, BET))


def equilibrium_bet_probability(card: int, history: tuple[int, ...]) -> float:
    """Probability of BET in Kuhn's equilibrium (alpha = 1/3) for ``card`` (0 J, 1 Q, 2 K) to act
    after ``history`` (a tuple of PASS/BET)."""
    if not history:
        return _FIRST_BET[card]
    if history == (PASS, BET):
        return _FIRST_CALL[card]
    return _SECOND_AFTER_PASS[card] if history == (PASS,) else _SECOND_AFTER_BET[card]


def _showdown(history: tuple[int, ...], cards: tuple[int, int]) -> float:
    """Chips won by player_0 at the end of ``history``."""
    if history == (BET, PASS):
        return 1.0
    if history == (PASS, BET, PASS):
        return -1.0
    stake = 1.0 if history == (PASS, PASS) else 2.0
    return stake if cards[0] > cards[1] else -stake


def exploitability(policy: Callable[[int, tuple[int, ...]], float]) -> float:
    """NashConv / 2 of a Kuhn poker strategy played in both seats (0 at an equilibrium).

    ``policy(card, history)`` is the probability of BET. For each seat the exact best response
    against ``policy`` is computed over the whole game tree (per information set: own card and
    history); the result is the mean of the two best-response values, in chips per hand. It is
    >= 0, and 0 exactly for equilibrium strategies (Kuhn's family; the game value -1/18 cancels
    between the seats).
    """

    def value(history: tuple[int, ...], seat: int, mine: int, reach: dict[int, float]) -> float:
        # expected chips of `seat` (summed over opponent cards, weighted by their reach)
        if history in _ENDS:
            sign = 1.0 if seat == 0 else -1.0
            return sum(
                w * sign * _showdown(history, (mine, c) if seat == 0 else (c, mine))
                for c, w in reach.items()
            )
        if len(history) % 2 == seat:  # the best responder moves: best action for this info set
            return max(value(history + (a,), seat, mine, reach) for a in (PASS, BET))
        total = 0.0
        for action in (PASS, BET):
            weights = {
                c: w * (policy(c, history) if action == BET else 1.0 - policy(c, history))
                for c, w in reach.items()
            }
            total += value(history + (action,), seat, mine, weights)
        return total

    best = [
        sum(
            value((), seat, mine, {c: 1.0 / 6.0 for c in range(3) if c != mine})
            for mine in range(3)
        )
        for seat in (0, 1)
    ]
    return (best[0] + best[1]) / 2.0


class KuhnPokerEnv(TurnBasedGame):
    """Kuhn poker: two players, three cards (J < Q < K), one betting round.

    ## Description
    Each player antes 1 chip and gets one private card; the third card is unseen. ``player_0``
    acts first: **pass** (check) or **bet** 1 chip. After a pass ``player_1`` may pass (showdown for
    the antes) or bet, after which ``player_0`` folds (pass) or calls (bet). After a bet the other
    player folds or calls. At a showdown the higher card wins the pot. The game value for
    ``player_0`` under equilibrium play is -1/18 (Kuhn 1950); :meth:`solver_action` plays Kuhn's
    equilibrium (alpha = 1/3).

    ## Action Space
    ``Discrete(2)``: 0 pass (check or fold), 1 bet (bet or call). Both are always legal;
    ``infos[agent]["action_mask"]`` is all ones for the agent to move.

    ## Observation Space
    ``Box(0, 1, (11,), int8)``: own card one-hot (3), the betting history as one-hot
    (pass, bet) for each of up to 3 actions (6), own position one-hot (2: first, second).

    ## Rewards
    The chips won or lost on the final step: +-1 (fold or checked showdown) or +-2 (called bet).
    A malformed move (not 0/1) forfeits: the offender gets ``illegal_move_reward`` (default -2,
    the largest loss) and ``info["action_error"]``, the opponent +2.

    ## Starting State
    The three cards shuffled by ``np_random``; ``player_0`` gets the first, ``player_1`` the second.

    ## Episode End
    Terminated after a fold or a showdown. Final infos: ``success`` (chips won), ``score``
    ``(payoff + 2) / 4``, ``payoff`` and ``cards`` (both cards, revealed at the end).

    ## Arguments
    * ``max_cycles`` (int | None): most moves per agent before truncation (``None``: no limit).
    * ``illegal_move_reward`` (float): the offender's reward for a malformed move.
    * ``render_mode`` (``"ansi"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "kuhn_poker_v0"}
    forfeit_reward = 2.0

    def __init__(
        self,
        *,
        max_cycles: int | None = None,
        illegal_move_reward: float = -2.0,
        render_mode: str | None = None,
    ):
        agents = ["player_0", "player_1"]
        self._setup(
            agents,
            spaces.Box(0, 1, shape=(11,), dtype=np.int8),
            {a: spaces.Discrete(2) for a in agents},
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.cards = (0, 1)
        self.history: list[int] = []

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        deck = self.np_random.permutation(3)
        self.cards = (int(deck[0]), int(deck[1]))
        self.history = []
        return "player_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        return np.ones(2, dtype=np.int8)

    def _apply(self, agent: str, action: int) -> str | None:
        self.history.append(action)
        if tuple(self.history) in _ENDS:
            return None
        return self.possible_agents[len(self.history) % 2]

    def _payoffs(self) -> dict[str, float]:
        first = _showdown(tuple(self.history), self.cards)
        return {"player_0": first, "player_1": -first}

    def _finish(
        self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None
    ) -> None:
        super()._finish(payoffs, truncated=truncated, forfeit=forfeit)
        for a in self.agents:
            self.infos[a]["cards"] = {
                "player_0": CARDS[self.cards[0]],
                "player_1": CARDS[self.cards[1]],
            }

    def _verdict(self, agent: str, payoff: float) -> tuple[bool, float]:
        return payoff > 0, (payoff + 2.0) / 4.0

    def observe(self, agent: str) -> np.ndarray:
        seat = self.possible_agents.index(agent)
        obs = np.zeros(11, dtype=np.int8)
        obs[self.cards[seat]] = 1
        for i, action in enumerate(self.history[:3]):
            obs[3 + 2 * i + action] = 1
        obs[9 + seat] = 1
        return obs

    def solver_action(self, agent: str, rng: np.random.Generator | None = None) -> int:
        """Kuhn's equilibrium strategy (alpha = 1/3) for ``agent`` to move.

        With ``rng`` the mixed strategy is sampled; without, the more likely action is returned.
        """
        p_bet = equilibrium_bet_probability(
            self.cards[self.possible_agents.index(agent)], tuple(self.history)
        )
        if rng is None:
            return BET if p_bet > 0.5 else PASS
        return BET if rng.random() < p_bet else PASS

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        position = "first" if agent == "player_0" else "second"
        return (
            "You play Kuhn poker against one opponent, acting " + position + ". The deck has three "
            "cards, J < Q < K; each player antes 1 chip and holds one private card. On your turn "
            "reply 'pass' (check, or fold facing a bet) or 'bet' (bet 1 chip, or call a bet). After "
            "pass-pass or a called bet, the higher card wins the pot; a fold gives the pot to the "
            "bettor. The last of these words in your reply counts."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        card = CARDS[int(np.argmax(observation[:3]))]
        actions = [
            ("pass", "bet")[int(np.argmax(observation[3 + 2 * i : 5 + 2 * i]))]
            for i in range(3)
            if observation[3 + 2 * i : 5 + 2 * i].any()
        ]
        first = bool(observation[9])
        history = (
            ", ".join(
                f"{'you' if (i % 2 == 0) == first else 'opponent'}: {a}"
                for i, a in enumerate(actions)
            )
            or "no actions yet"
        )
        return f"Your card: {card}. You act {'first' if first else 'second'}. Betting so far: {history}."

    def parse_action(self, text: str, agent: str) -> int:
        """``pass``/``check``/``fold``/``0`` -> 0, ``bet``/``call``/``1`` -> 1 (the last word counts).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: none of these words found.
        """
        found = last_match(_WORD, text, "no action found; reply 'pass' or 'bet'")
        return _WORD_ACTION[found.group().lower()]

    def action_text(self, action: Any, agent: str) -> str:
        return ("pass", "bet")[int(action)]

    def board_text(self) -> str:
        history = " ".join(("pass", "bet")[a] for a in self.history) or "-"
        return f"cards: player_0 {CARDS[self.cards[0]]}, player_1 {CARDS[self.cards[1]]}; history: {history}"
