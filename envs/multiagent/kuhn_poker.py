"""Kuhn poker: the three-card two-player poker game (Kuhn 1950), as a PettingZoo AEC env."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces
from verigym.envs.multiagent.base import TurnBasedGame, last_match

from verigym.core import ActionParseError

__all__ = ["KuhnPokerEnv"]

CARDS = "JQK"
PASS, BET = 0, 1
_WORD = re.compile(r"\b(pass|check|fold|bet|call|0|1)\b", re.IGNORECASE)
_WORD_ACTION = {"pass": PASS, "check": PASS, "fold": PASS, "0": PASS, "bet": BET, "call": BET, "1": BET}

# Kuhn's equilibrium family (alpha in [0, 1/3]); probability of BET by card and history.
_ALPHA = 1.0 / 3.0
_FIRST_BET = {0: _ALPHA, 1: 0.0, 2: 3 * _ALPHA}  # player_0, opening
_FIRST_CALL = {0: 0.0, 1: _ALPHA + 1.0 / 3.0, 2: 1.0}  # player_0 after pass-bet
_SECOND_AFTER_PASS = {0: 1.0 / 3.0, 1: 0.0, 2: 1.0}  # player_1 after pass
_SECOND_AFTER_BET = {0: 0.0, 1: 1.0 / 3.0, 2: 1.0}  # player_1 after bet


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

    def __init__(self, *, max_cycles: int | None = None, illegal_move_reward: float = -2.0, render_mode: str | None = None):
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
        if self.history in ([PASS, PASS], [BET, PASS], [BET, BET], [PASS, BET, PASS], [PASS, BET, BET]):
            return None
        return self.possible_agents[len(self.history) % 2]

    def _payoffs(self) -> dict[str, float]:
        h = self.history
        if h == [BET, PASS]:
            first = 1.0
        elif h == [PASS, BET, PASS]:
            first = -1.0
        else:
            stake = 1.0 if h == [PASS, PASS] else 2.0
            first = stake if self.cards[0] > self.cards[1] else -stake
        return {"player_0": first, "player_1": -first}

    def _finish(self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None) -> None:
        super()._finish(payoffs, truncated=truncated, forfeit=forfeit)
        for a in self.agents:
            self.infos[a]["cards"] = {"player_0": CARDS[self.cards[0]], "player_1": CARDS[self.cards[1]]}

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
        seat = self.possible_agents.index(agent)
        card = self.cards[seat]
        if seat == 0:
            p_bet = _FIRST_BET[card] if not self.history else _FIRST_CALL[card]
        else:
            p_bet = _SECOND_AFTER_PASS[card] if self.history == [PASS] else _SECOND_AFTER_BET[card]
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
        actions = [("pass", "bet")[int(np.argmax(observation[3 + 2 * i : 5 + 2 * i]))] for i in range(3) if observation[3 + 2 * i : 5 + 2 * i].any()]
        first = bool(observation[9])
        history = ", ".join(
            f"{'you' if (i % 2 == 0) == first else 'opponent'}: {a}" for i, a in enumerate(actions)
        ) or "no actions yet"
        return f"Your card: {card}. You act {'first' if first else 'second'}. Betting so far: {history}."

    def parse_action(self, text: str, agent: str) -> int:
        """``pass``/``check``/``fold``/``0`` -> 0, ``bet``/``call``/``1`` -> 1 (the last word counts).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: none of these words found.
        """
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        found = last_match(_WORD, text)
        if found is None:
            raise ActionParseError("no action found; reply 'pass' or 'bet'")
        return _WORD_ACTION[found.group().lower()]

    def action_text(self, action: Any, agent: str) -> str:
        return ("pass", "bet")[int(action)]

    def board_text(self) -> str:
        history = " ".join(("pass", "bet")[a] for a in self.history) or "-"
        return f"cards: player_0 {CARDS[self.cards[0]]}, player_1 {CARDS[self.cards[1]]}; history: {history}"
