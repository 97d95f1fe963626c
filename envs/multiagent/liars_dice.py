"""Liar's dice (one round, two players) as a PettingZoo AEC env."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import ActionParseError
from verigym.envs.multiagent.base import TurnBasedGame, last_match
from verigym.validation import check_int

__all__ = ["LiarsDiceEnv"]

FACES = 6
_BID = re.compile(r"\b(\d{1,2})\s*[x*×]\s*([1-6])\b|\b(liar|challenge)\b", re.IGNORECASE)


class LiarsDiceEnv(TurnBasedGame):
    """Liar's dice, one round between two players (the OpenSpiel-style variant, no wild faces).

    ## Description
    Each player rolls ``num_dice`` six-sided dice in secret. ``player_0`` opens with a bid
    "at least q dice among all dice show face f"; then the players alternate, each either raising
    the bid (a higher quantity, or the same quantity with a higher face) or calling **liar**. On a
    call all dice are revealed: if the bid holds the caller loses, otherwise the bidder loses.

    ## Action Space
    ``Discrete(6 * total_dice + 1)`` with ``total_dice = 2 * num_dice``: action ``(q - 1) * 6 +
    (f - 1)`` bids q dice of face f; the last action, ``6 * total_dice``, calls liar. Legal moves
    (bids above the standing bid; liar only once there is a bid) are
    ``infos[agent]["action_mask"]`` (``int8``).

    ## Observation Space
    ``Box(0, num_dice, (6 + 6 * total_dice + 2,), int8)``: how many of own dice show each face
    (6), the standing bid one-hot (``6 * total_dice``), and who made it (2: self, opponent).

    ## Rewards
    +1 to the winner, -1 to the loser on the final step. An illegal (a bid not above the standing
    one, liar without a bid) or malformed move forfeits: the offender gets ``illegal_move_reward``
    (default -1) and ``info["action_error"]``, the opponent +1.

    ## Starting State
    All dice rolled by ``np_random``.

    ## Episode End
    Terminated on a liar call (at the latest after the highest bid) or a forfeit. Final infos carry
    ``success`` (won), ``score`` (1 won, 0 lost), ``payoff`` and ``dice`` (everyone's dice).

    ## Arguments
    * ``num_dice`` (int, 1..5): dice per player.
    * ``max_cycles`` (int | None): most moves per agent before truncation (``None``: no limit).
    * ``illegal_move_reward`` (float): the offender's reward for an illegal move.
    * ``render_mode`` (``"ansi"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "liars_dice_v0"}

    def __init__(
        self,
        *,
        num_dice: int = 2,
        max_cycles: int | None = None,
        illegal_move_reward: float = -1.0,
        render_mode: str | None = None,
    ):
        check_int("num_dice", num_dice, 1, 5)
        agents = ["player_0", "player_1"]
        self.num_dice = num_dice
        self.total_dice = 2 * num_dice
        self.num_bids = FACES * self.total_dice
        size = FACES + self.num_bids + 2
        high = np.ones(size, dtype=np.int8)
        high[:FACES] = num_dice
        self._setup(
            agents,
            spaces.Box(np.zeros(size, dtype=np.int8), high, dtype=np.int8),
            {a: spaces.Discrete(self.num_bids + 1) for a in agents},
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.dice = np.ones((2, num_dice), dtype=np.int64)
        self.bid = -1
        self.bidder = -1
        self.caller = -1

    @property
    def liar(self) -> int:
        """The action that calls liar."""
        return self.num_bids

    def bid_of(self, action: int) -> tuple[int, int]:
        """``(quantity, face)`` of a bid action."""
        return action // FACES + 1, action % FACES + 1

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        self.dice = self.np_random.integers(1, FACES + 1, size=(2, self.num_dice))
        self.bid, self.bidder, self.caller = -1, -1, -1
        return "player_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        mask = np.zeros(self.num_bids + 1, dtype=np.int8)
        mask[self.bid + 1 : self.num_bids] = 1
        mask[self.liar] = int(self.bid >= 0)
        return mask

    def _apply(self, agent: str, action: int) -> str | None:
        seat = self.possible_agents.index(agent)
        if action == self.liar:
            self.caller = seat
            return None
        self.bid, self.bidder = action, seat
        return self.possible_agents[1 - seat]

    def _payoffs(self) -> dict[str, float]:
        quantity, face = self.bid_of(self.bid)
        holds = int((self.dice == face).sum()) >= quantity
        loser = self.caller if holds else self.bidder
        return {a: (-1.0 if i == loser else 1.0) for i, a in enumerate(self.possible_agents)}

    def _finish(
        self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None
    ) -> None:
        super()._finish(payoffs, truncated=truncated, forfeit=forfeit)
        for a in self.agents:
            self.infos[a]["dice"] = {
                p: [int(v) for v in self.dice[i]] for i, p in enumerate(self.possible_agents)
            }

    def observe(self, agent: str) -> np.ndarray:
        seat = self.possible_agents.index(agent)
        obs = np.zeros(self.observation_spaces[agent].shape, dtype=np.int8)
        obs[:FACES] = np.bincount(self.dice[seat] - 1, minlength=FACES)
        if self.bid >= 0:
            obs[FACES + self.bid] = 1
            obs[FACES + self.num_bids + (0 if self.bidder == seat else 1)] = 1
        return obs

    def heuristic_action(self, agent: str, rng: np.random.Generator) -> int:
        """Call liar when the standing bid exceeds own count + expected unseen count (by more than
        half a die); else the lowest legal bid on a face this player holds most of that stays
        within that estimate; else call liar (or the lowest bid when there is none)."""
        seat = self.possible_agents.index(agent)
        own = np.bincount(self.dice[seat] - 1, minlength=FACES)
        expected = own + self.num_dice / FACES
        if self.bid >= 0:
            quantity, face = self.bid_of(self.bid)
            if quantity > expected[face - 1] + 0.5:
                return self.liar
        order = np.lexsort((rng.random(FACES), -own))  # faces by own count, ties at random
        for action in range(self.bid + 1, self.num_bids):
            quantity, face = self.bid_of(action)
            if face - 1 == order[0] and quantity <= expected[face - 1]:
                return action
        return self.liar if self.bid >= 0 else int(order[0])

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        return (
            f"You play Liar's dice against one opponent; each of you rolled {self.num_dice} six-sided "
            f"dice in secret ({self.total_dice} dice in all). Players alternate; player_0 opens. On your "
            "turn either raise the bid — 'QxF' claims at least Q dice among ALL dice show face F; a "
            "raise has a higher Q, or the same Q and a higher F — or reply 'liar' to challenge the "
            "standing bid. On a challenge the dice are revealed: if the bid holds the challenger "
            "loses, otherwise the bidder loses. The last bid or 'liar' in your reply counts."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        dice = ", ".join(f"{int(n)}x{f + 1}" for f, n in enumerate(observation[:FACES]) if n)
        bids = np.flatnonzero(observation[FACES : FACES + self.num_bids])
        if len(bids):
            quantity, face = self.bid_of(int(bids[0]))
            who = "you" if observation[FACES + self.num_bids] else "your opponent"
            standing = f"The standing bid is {quantity}x{face}, made by {who}."
        else:
            standing = "No bid yet."
        return f"Your dice: {dice}. {standing}"

    def parse_action(self, text: str, agent: str) -> int:
        """The last bid ``QxF`` (or ``Q*F``) or ``liar`` in ``text``.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no bid or call found, or a quantity outside 1..total_dice.
        """
        found = last_match(
            _BID, text, "no bid found; reply with a bid like '3x5' (three fives) or 'liar'"
        )
        if found.group(3):
            return self.liar
        quantity, face = int(found.group(1)), int(found.group(2))
        if not 1 <= quantity <= self.total_dice:
            raise ActionParseError(f"a bid quantity must be 1..{self.total_dice}, got {quantity}")
        return (quantity - 1) * FACES + face - 1

    def action_text(self, action: Any, agent: str) -> str:
        action = int(action)
        if action == self.liar:
            return "liar"
        quantity, face = self.bid_of(action)
        return f"{quantity}x{face}"

    def board_text(self) -> str:
        dice = "; ".join(
            f"{a}: {' '.join(str(int(v)) for v in self.dice[i])}"
            for i, a in enumerate(self.possible_agents)
        )
        bid = self.action_text(self.bid, "player_0") if self.bid >= 0 else "none"
        return f"dice {dice}; standing bid {bid}"
