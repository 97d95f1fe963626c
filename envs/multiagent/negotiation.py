"""Negotiation: split a pool of items with private values (Deal or No Deal, Lewis et al. 2017)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import ActionParseError
from verigym.envs.multiagent.base import TurnBasedGame, last_match
from verigym.validation import check_int

__all__ = ["ITEMS", "NegotiationEnv", "deal_payoffs"]

ITEMS = ("book", "hat", "ball")
MAX_COUNT = 4
TOTAL_VALUE = 10
NUM_PROPOSALS = (MAX_COUNT + 1) ** len(ITEMS)
_MOVE = re.compile(
    r"\b(accept)\b|\bpropose\b\s*:?\s*(\d{1,3})\s*[,; ]\s*(\d{1,3})\s*[,; ]\s*(\d{1,3})",
    re.IGNORECASE,
)


def deal_payoffs(
    counts: Sequence[int], values: Sequence[Sequence[int]], first_keeps: Sequence[int]
) -> tuple[float, float]:
    """Payoffs of a deal: each agent's value of what it receives, divided by ``TOTAL_VALUE``.

    Args:
        counts: items of each type in the pool (length 3: books, hats, balls).
        values: ``values[i][j]``, agent ``i``'s private value of one item of type ``j``; each
            agent's values of the whole pool sum to ``TOTAL_VALUE``.
        first_keeps: the items ``player_0`` receives; ``player_1`` receives the rest.

    Returns:
        ``(payoff of player_0, payoff of player_1)``, each in [0, 1].

    Raises:
        ValueError: ``first_keeps`` asks for more items than the pool holds, or for a negative number.
    """
    counts, keeps = np.asarray(counts, dtype=np.int64), np.asarray(first_keeps, dtype=np.int64)
    if np.any(keeps < 0) or np.any(keeps > counts):
        raise ValueError(f"the split {keeps.tolist()} is not within the pool {counts.tolist()}")
    values = np.asarray(values, dtype=np.int64)
    return float(keeps @ values[0]) / TOTAL_VALUE, float((counts - keeps) @ values[1]) / TOTAL_VALUE


def _proposal(action: int) -> tuple[int, ...]:
    """Items the proposer keeps for a proposal action."""
    digits = []
    for _ in ITEMS:
        action, k = divmod(action, MAX_COUNT + 1)
        digits.append(k)
    return tuple(reversed(digits))


def _action(keeps: Sequence[int]) -> int:
    index = 0
    for k in keeps:
        index = index * (MAX_COUNT + 1) + int(k)
    return index


class NegotiationEnv(TurnBasedGame):
    """Two agents split books, hats and balls; each values the items privately.

    ## Description
    The Deal-or-No-Deal negotiation game of Lewis et al. (2017), "Deal or No Deal? End-to-End
    Learning for Negotiation Dialogues". A pool holds 1-4 items of each of three types (5 to 7 in
    all). Each agent has private integer values per item type such that its whole pool is worth
    10, and every item type is worth something to at least one agent. The agents alternate turns,
    ``player_0`` first: a turn either **proposes** a split (the items the proposer keeps; the other
    gets the rest) or **accepts** the standing proposal of the other agent, which ends the game.

    ## Action Space
    ``Discrete(126)``: action ``25 * books + 5 * hats + balls`` (each 0..4) proposes to keep that
    many items; action 125 accepts. Legal moves (a split within the pool; accept once the other
    agent has proposed) are ``infos[agent]["action_mask"]`` (``int8``, shape ``(126,)``).

    ## Observation Space
    ``Box(0, high, (12,), int8)``: the pool counts (3), own values (3), the standing proposal as
    the items this agent would receive (3), whether the standing proposal is the opponent's (1),
    the turn number (1), and whether this agent moves first (1).

    ## Rewards
    On agreement each agent gets the value of what it receives divided by 10 (in [0, 1],
    :func:`deal_payoffs`). No agreement within ``max_cycles`` proposals each: the disagreement
    payoff 0 for both (truncated). An illegal or malformed move ends the game: the offender gets
    ``illegal_move_reward`` (default -1) and ``info["action_error"]``, the other 0.

    ## Starting State
    Counts and both agents' values drawn by ``np_random``.

    ## Episode End
    Terminated on acceptance or a forfeit, truncated after ``max_cycles`` proposals each. Final
    infos: ``success`` (a deal was reached), ``score`` (the payoff), ``payoff`` and ``deal``.

    ## Arguments
    * ``max_cycles`` (int): most proposals per agent (default 5).
    * ``illegal_move_reward`` (float): the offender's reward for an illegal move.
    * ``render_mode`` (``"ansi"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "negotiation_v0"}
    forfeit_reward = 0.0

    def __init__(
        self,
        *,
        max_cycles: int = 5,
        illegal_move_reward: float = -1.0,
        render_mode: str | None = None,
    ):
        check_int("max_cycles", max_cycles, 1, 50)  # an int: negotiations must end
        agents = ["player_0", "player_1"]
        high = np.array(
            [MAX_COUNT] * 3 + [TOTAL_VALUE] * 3 + [MAX_COUNT] * 3 + [1, 2 * max_cycles, 1],
            dtype=np.int8,
        )
        self._setup(
            agents,
            spaces.Box(np.zeros(12, dtype=np.int8), high, dtype=np.int8),
            {a: spaces.Discrete(NUM_PROPOSALS + 1) for a in agents},
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.counts = np.ones(3, dtype=np.int64)
        self.values = np.zeros((2, 3), dtype=np.int64)
        self.offer: tuple[int, tuple[int, ...]] | None = None  # (proposer seat, items it keeps)
        self.deal: tuple[int, ...] | None = None  # items player_0 receives
        self.turn = 0

    @property
    def accept(self) -> int:
        """The action that accepts the standing proposal."""
        return NUM_PROPOSALS

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        while True:
            counts = self.np_random.integers(1, MAX_COUNT + 1, size=3)
            if 5 <= counts.sum() <= 7:
                break
        grid = np.array(list(itertools.product(range(TOTAL_VALUE + 1), repeat=3)))
        valid = grid[grid @ counts == TOTAL_VALUE]
        first = valid[int(self.np_random.integers(len(valid)))]
        second_pool = valid[np.all((valid > 0) | (first > 0), axis=1)]
        second = second_pool[int(self.np_random.integers(len(second_pool)))]
        self.counts, self.values = (
            counts.astype(np.int64),
            np.stack([first, second]).astype(np.int64),
        )
        self.offer, self.deal, self.turn = None, None, 0
        return "player_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        mask = np.zeros(NUM_PROPOSALS + 1, dtype=np.int8)
        for keeps in itertools.product(*(range(int(c) + 1) for c in self.counts)):
            mask[_action(keeps)] = 1
        seat = self.possible_agents.index(agent)
        mask[self.accept] = int(self.offer is not None and self.offer[0] != seat)
        return mask

    def _apply(self, agent: str, action: int) -> str | None:
        seat = self.possible_agents.index(agent)
        self.turn += 1
        if action == self.accept:
            if self.offer is None:  # excluded by the mask
                raise RuntimeError("accept without a standing offer")
            proposer, keeps = self.offer
            self.deal = (
                tuple(keeps)
                if proposer == 0
                else tuple(int(c - k) for c, k in zip(self.counts, keeps))
            )
            return None
        self.offer = (seat, _proposal(action))
        return self.possible_agents[1 - seat]

    def _payoffs(self) -> dict[str, float]:
        first, second = deal_payoffs(self.counts, self.values, self.deal)
        return {"player_0": first, "player_1": second}

    def _verdict(self, agent: str, payoff: float) -> tuple[bool, float]:
        return self.deal is not None and not self.truncations.get(
            agent, False
        ), payoff if payoff > 0 else 0.0

    def _finish(
        self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None
    ) -> None:
        super()._finish(payoffs, truncated=truncated, forfeit=forfeit)
        for a in self.agents:
            self.infos[a]["deal"] = (
                None
                if self.deal is None
                else {
                    "player_0": list(self.deal),
                    "player_1": [int(c - k) for c, k in zip(self.counts, self.deal)],
                }
            )

    def observe(self, agent: str) -> np.ndarray:
        seat = self.possible_agents.index(agent)
        obs = np.zeros(12, dtype=np.int8)
        obs[:3] = self.counts
        obs[3:6] = self.values[seat]
        if self.offer is not None:
            proposer, keeps = self.offer
            receive = (
                keeps if proposer == seat else tuple(int(c - k) for c, k in zip(self.counts, keeps))
            )
            obs[6:9] = receive
            obs[9] = int(proposer != seat)
        obs[10] = self.turn
        obs[11] = int(seat == 0)
        return obs

    def heuristic_action(self, agent: str, rng: np.random.Generator) -> int:
        """Accept an offer worth at least a target that falls from 8 to 5 (of 10) over the turns;
        otherwise keep the most valuable items worth about the target and give away the rest."""
        seat = self.possible_agents.index(agent)
        values = self.values[seat]
        progress = self.turn / max(1, 2 * self.max_cycles - 1)
        target = 8 - 3 * progress
        if self.offer is not None and self.offer[0] != seat:
            proposer, keeps = self.offer
            receive = np.asarray(self.counts) - np.asarray(keeps)
            if float(receive @ values) >= target or self._moves[agent] + 1 >= self.max_cycles:
                return self.accept
        keeps = np.zeros(3, dtype=np.int64)
        order = np.lexsort((rng.random(3), -values))
        for j in order:
            while keeps[j] < self.counts[j] and values[j] > 0 and float(keeps @ values) < target:
                keeps[j] += 1
        return _action(keeps)

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        first = agent == "player_0"
        return (
            "You negotiate with another agent over a pool of books, hats and balls. You each value the "
            f"items privately: your values of the whole pool add up to {TOTAL_VALUE}, the other's too, "
            "but the values differ. You move "
            + ("first" if first else "second")
            + "; turns alternate. "
            "On your turn reply 'propose B H A' to propose that YOU receive B books, H hats and A balls "
            "(the other agent gets the rest), or 'accept' to accept the other agent's standing "
            f"proposal. Each of you may propose at most {self.max_cycles} times; without agreement both "
            f"get 0. On agreement your reward is the value of what you receive divided by {TOTAL_VALUE}."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        obs = [int(v) for v in observation]
        pool = ", ".join(f"{obs[j]} {ITEMS[j]}{'s' if obs[j] != 1 else ''}" for j in range(3))
        values = ", ".join(f"{ITEMS[j]} {obs[3 + j]}" for j in range(3))
        if obs[9]:
            standing = f"The other agent proposes that you receive {obs[6]} books, {obs[7]} hats, {obs[8]} balls."
        elif any(obs[6:9]) or obs[10]:
            standing = (
                f"Your standing proposal gives you {obs[6]} books, {obs[7]} hats, {obs[8]} balls."
            )
        else:
            standing = "No proposal yet."
        return f"Pool: {pool}. Your value per item: {values}. Turn {obs[10]}. {standing}"

    def parse_action(self, text: str, agent: str) -> int:
        """``accept`` or ``propose B H A`` (the last one in ``text`` counts).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: neither found, or a count above 4.
        """
        found = last_match(
            _MOVE, text, "no move found; reply 'propose B H A' (what you receive) or 'accept'"
        )
        if found.group(1):
            return self.accept
        keeps = [int(found.group(i)) for i in (2, 3, 4)]
        if max(keeps) > MAX_COUNT:
            raise ActionParseError(f"counts must be 0..{MAX_COUNT}, got {keeps}")
        return _action(keeps)

    def action_text(self, action: Any, agent: str) -> str:
        action = int(action)
        if action == self.accept:
            return "accept"
        return "propose " + " ".join(str(k) for k in _proposal(action))

    def board_text(self) -> str:
        offer = (
            "none" if self.offer is None else f"player_{self.offer[0]} keeps {list(self.offer[1])}"
        )
        return (
            f"pool {self.counts.tolist()}; values player_0 {self.values[0].tolist()}, player_1 "
            f"{self.values[1].tolist()}; turn {self.turn}; standing offer: {offer}"
        )
