"""VersusEnv: one seat of a turn-based game as a Gymnasium env, against built-in opponents."""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from verigym.core import ACTION_MASK, EpisodeEndedError, EpisodeGuard
from verigym.envs.multiagent.base import TurnBasedGame
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_int

__all__ = ["GAMES", "OPPONENTS", "VersusEnv"]

GAMES: dict[str, str] = {
    "tictactoe": "verigym.envs.multiagent.tictactoe:TicTacToeEnv",
    "connect_four": "verigym.envs.multiagent.connect_four:ConnectFourEnv",
    "kuhn_poker": "verigym.envs.multiagent.kuhn_poker:KuhnPokerEnv",
    "liars_dice": "verigym.envs.multiagent.liars_dice:LiarsDiceEnv",
    "negotiation": "verigym.envs.multiagent.negotiation:NegotiationEnv",
    "proposer_solver": "verigym.envs.multiagent.proposer_solver:ProposerSolverEnv",
}
"""Game name -> ``"module:Class"`` of a :class:`~verigym.envs.multiagent.base.TurnBasedGame`."""

OPPONENTS: dict[str, str] = {
    "random": "uniform over the legal moves",
    "heuristic": "the game's heuristic_action (e.g. win, else block, else random)",
    "optimal": "the game's solver_action (minimax or equilibrium play, random among optimal moves)",
}


def make_game(name: str, kwargs: dict[str, Any] | None = None) -> TurnBasedGame:
    """Build the game ``name`` of :data:`GAMES`.

    Raises:
        ValueError: unknown game name.
    """
    if name not in GAMES:
        raise ValueError(f"unknown game {name!r}; choose one of {sorted(GAMES)}")
    module, _, attr = GAMES[name].partition(":")
    return getattr(importlib.import_module(module), attr)(**(kwargs or {}))


class VersusEnv(EpisodeGuard, gym.Env[np.ndarray, np.int64]):
    """One seat of a turn-based multi-agent game against a built-in opponent (a Gymnasium env).

    ## Description
    The agent plays seat ``seat`` of the game ``game`` (:data:`GAMES`); the other seats are played
    by the ``opponent`` policy (:data:`OPPONENTS`), which draws its randomness from this env's
    ``np_random``. After each of the agent's moves the opponents move until it is the agent's turn
    again or the game is over. The rules, spaces and text view are the game's (see its class).

    ## Action Space
    The game's action space for the seat (``Discrete``); legal moves are
    ``info["action_mask"]`` (``int8``).

    ## Observation Space
    The game's observation for the seat (a ``Box``).

    ## Rewards
    The seat's game rewards summed over the agent's move and the opponents' replies. An illegal or
    malformed move forfeits the game (the game's ``illegal_move_reward``, ``info["action_error"]``).

    ## Starting State
    The game reset with a seed drawn from ``np_random``; if the opponents move first, their moves
    are already played.

    ## Episode End
    When the game ends: ``terminated`` (or ``truncated`` by the game's ``max_cycles``), with the
    seat's ``success``, ``score`` and ``payoff`` from the game. After that, ``step`` raises
    :class:`verigym.core.EpisodeEndedError` until ``reset``.

    ## Arguments
    * ``game`` (str): a key of :data:`GAMES`.
    * ``opponent`` (str): ``"random"``, ``"heuristic"`` or ``"optimal"`` (the game must have the
      matching ``heuristic_action``/``solver_action``).
    * ``seat`` (int): index of the agent's seat in ``possible_agents``.
    * ``game_kwargs`` (dict | None): the game's constructor arguments.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "multiagent"}

    remote_kwargs = {
        "game": client(OneOf(tuple(GAMES))),
        "opponent": client(OneOf(tuple(OPPONENTS))),
        "seat": client(IntRange(0, 7)),
        "game_kwargs": operator_only(
            why="passed unchecked to the game's constructor (max_cycles, sizes)"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        game: str = "tictactoe",
        opponent: str = "random",
        seat: int = 0,
        game_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ):
        if opponent not in OPPONENTS:
            raise ValueError(f"unknown opponent {opponent!r}; choose one of {sorted(OPPONENTS)}")
        if game_kwargs is not None and not isinstance(game_kwargs, dict):
            raise ValueError(f"game_kwargs must be a dict or None, got {game_kwargs!r}")
        render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.game = make_game(game, game_kwargs)
        check_int("seat", seat, 0, len(self.game.possible_agents) - 1)
        needed = {"heuristic": "heuristic_action", "optimal": "solver_action"}.get(opponent)
        if needed and not callable(getattr(self.game, needed, None)):
            raise ValueError(f"game {game!r} has no {needed}; it cannot play opponent={opponent!r}")
        self.game_name, self.opponent, self.render_mode = game, opponent, render_mode
        self.seat = self.game.possible_agents[seat]
        self.observation_space = self.game.observation_space(self.seat)
        self.action_space = self.game.action_space(self.seat)

    # -- helpers --------------------------------------------------------------------------------
    def _opponent_move(self, agent: str) -> int:
        if self.opponent == "optimal":
            return self.game.solver_action(agent, self.np_random)
        if self.opponent == "heuristic":
            return self.game.heuristic_action(agent, self.np_random)
        legal = np.flatnonzero(self.game.infos[agent][ACTION_MASK])
        return int(legal[int(self.np_random.integers(len(legal)))])

    def _play_opponents(self) -> float:
        """Opponents move until the seat is to move or the game ends; returns the seat's reward."""
        reward = 0.0
        while not self.game.game_over() and self.game.agent_selection != self.seat:
            self.game.step(self._opponent_move(self.game.agent_selection))
            reward += float(self.game.rewards.get(self.seat, 0.0))
        return reward

    def _mask(self) -> np.ndarray:
        if self.game.game_over():
            return np.zeros(int(self.action_space.n), dtype=np.int8)
        return self.game.infos[self.seat][ACTION_MASK].copy()

    def action_masks(self) -> np.ndarray:
        """``bool (n_actions,)``: the seat's legal moves now (``info["action_mask"]``), under the
        name sb3-contrib's ``MaskablePPO`` calls."""
        return self._mask().astype(bool)

    # -- Gymnasium API --------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.game.reset(seed=int(self.np_random.integers(2**31)))
        self._play_opponents()
        return self.game.observe(self.seat), {ACTION_MASK: self._mask()}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.game.game_over():  # also a game that ended before the seat's first move
            raise EpisodeEndedError("the game is over; call reset() before step()")
        self.game.step(action)
        info = {k: v for k, v in self.game.infos[self.seat].items() if k != ACTION_MASK}
        reward = float(self.game.rewards.get(self.seat, 0.0)) + self._play_opponents()
        if self.game.game_over():
            info.update({k: v for k, v in self.game.infos[self.seat].items() if k != ACTION_MASK})
        info[ACTION_MASK] = self._mask()
        terminated = bool(self.game.terminations[self.seat])
        truncated = bool(self.game.truncations[self.seat]) and not terminated
        return self.game.observe(self.seat), reward, terminated, truncated, info

    def render(self) -> str | None:
        return self.game.board_text() if self.render_mode == "ansi" else None

    def close(self) -> None:
        self.game.close()

    # -- TextInterface --------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"{self.game.instructions(self.seat)}\nYour opponent plays {OPPONENTS[self.opponent]}."
        )

    def observation_text(self, observation: np.ndarray) -> str:
        return self.game.observation_text(observation, self.seat)

    def parse_action(self, text: str) -> int:
        """The seat's move in ``text`` (the game's parser).

        Raises:
            ActionParseError: no move found.
        """
        return self.game.parse_action(text, self.seat)

    def action_text(self, action: Any) -> str:
        return self.game.action_text(action, self.seat)

    def task_fingerprint(self) -> dict[str, Any]:
        """The game's drawn state (dealt cards, dice; :func:`verigym.task_split.plain_state`).
        An opponent's own random choices are not part of the task."""
        from verigym.task_split import plain_state

        return plain_state(self.game)

    # -- oracle ---------------------------------------------------------------------------------
    def oracle_action(self) -> int:
        """The game's solver move for the seat (or its heuristic, or the first legal move)."""
        if self.game.game_over():
            return 0
        if callable(getattr(self.game, "solver_action", None)):
            return self.game.solver_action(self.seat)
        if callable(getattr(self.game, "heuristic_action", None)):
            return self.game.heuristic_action(self.seat, np.random.default_rng(0))
        legal = np.flatnonzero(self._mask())
        return int(legal[0]) if len(legal) else 0
