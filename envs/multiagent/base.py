"""The bases of the ``multiagent`` family: the turn-based (AEC) game template and the parallel base.

:class:`ParallelGame` is the base of the parallel (simultaneous-move) games: it checks every joint
action before the game's ``step`` runs (see its docstring), so each parallel game gets the contract
without code.

A game subclasses :class:`TurnBasedGame` and fills in the rules (a template method, like
MiniGrid's ``_gen_grid``): :meth:`~TurnBasedGame._new_game`, :meth:`~TurnBasedGame._legal_mask`,
:meth:`~TurnBasedGame._apply`, :meth:`~TurnBasedGame._payoffs`, :meth:`~TurnBasedGame.observe` and
the text view. The base class owns the PettingZoo AEC bookkeeping (agent selection, cumulative
rewards, dead steps), the ``max_cycles`` limit, the illegal-move rule and the verdict entries.

Conventions of every game built on it:

* Legal moves are ``infos[agent]["action_mask"]`` (``int8``, shape ``(n,)``); the agent not to move
  gets an all-zero mask.
* An illegal or malformed move ends the game by forfeit: the offender gets
  ``illegal_move_reward`` and ``infos[offender]["action_error"]``, the others
  ``forfeit_reward`` (a win in zero-sum games, the disagreement payoff elsewhere).
* The step that ends the game puts ``success``/``score`` into every agent's info
  (:func:`verigym.core.episode_end`) and the game payoff into ``info["payoff"]``.
* Text view per agent: ``instructions(agent)``, ``observation_text(observation, agent)``,
  ``parse_action(text, agent)`` and ``action_text(action, agent)``; ``parse_action`` reads any
  action of the space (legal or not: legality is judged by ``step``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper

from verigym.core import (
    ACTION_MASK,
    ActionParseError,
    EpisodeEndedError,
    action_error_info,
    coerce_action,
    episode_end,
    short_repr,
)
from verigym.validation import check_choice, check_int, check_number

__all__ = ["AECView", "AgentSpaces", "MarkBoardGame", "ParallelGame", "TurnBasedGame", "last_match"]


class AgentSpaces:
    """Per-agent spaces read from ``observation_spaces``/``action_spaces`` dicts (the same object
    each call, as PettingZoo's API test requires) and reseeding of ``np_random``."""

    observation_spaces: dict[str, spaces.Space]
    action_spaces: dict[str, spaces.Space]

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _reseed(self, seed: int | None) -> None:
        """Reseed ``np_random`` from ``seed``; ``None`` keeps the current generator."""
        if seed is not None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)


class ParallelGame(AgentSpaces, ParallelEnv):
    """Base of the parallel games of the family: the joint-action and game-over contract.

    A game implements ``_step(actions)`` (the template method: the base's ``step`` owns the
    contract). ``step`` first calls :meth:`check_joint_action`, which raises

    * :class:`verigym.core.EpisodeEndedError` when the game is over (no live agents) or was never
      reset -- call ``reset()``;
    * ``TypeError`` when the joint action is not a mapping ``{agent: action}``;
    * ``ValueError`` when it names agents the game does not have, or has no entry for a live
      agent.

    These are errors of the loop that assembles the joint action (programmer errors). Each entry's
    *value* is the agent's own output and is judged by the game: a malformed value (``None``, NaN,
    out of range, wrong shape, text) gets the game's documented penalty and
    ``infos[agent]["action_error"]``, never an exception. Entries of agents whose episode already
    ended are ignored, so a loop may keep passing a fixed set of agents.
    """

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """One joint step: :meth:`check_joint_action`, then the game's :meth:`_step`.

        Args:
            actions: ``{agent: action}`` with an entry for every live agent.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, dicts keyed by agent.

        Raises:
            EpisodeEndedError, TypeError, ValueError: see :meth:`check_joint_action`.
        """
        self.check_joint_action(actions)
        return self._step(actions)

    def _step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """The game's step on a checked joint action (subclass hook)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _step")

    @classmethod
    def aec_env(cls, **kwargs: Any) -> AECView:
        """The game built with ``kwargs``, in its turn-by-turn view (:class:`AECView`): the entry
        point of the game's ``"aec"`` registration (``pettingzoo.make("aec", id)``)."""
        return AECView(cls(**kwargs))

    def check_joint_action(self, actions: Any) -> None:
        """Check the structure of a joint action (see the class docstring); the values are not judged.

        Raises:
            EpisodeEndedError: no live agents (the game is over, or ``reset`` was never called).
            TypeError: ``actions`` is not a mapping.
            ValueError: it names unknown agents or misses live ones; the message lists both sets.
        """
        if not self.agents:
            raise EpisodeEndedError(
                f"{type(self).__name__}.step() was called with no live agents: the game is over (or was never reset); call reset()"
            )
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"a joint action is a dict mapping each live agent {self.agents} to its action, "
                f"got {type(actions).__name__}: {short_repr(actions)}"
            )
        unknown = [agent for agent in actions if agent not in self.possible_agents]
        if unknown:
            raise ValueError(
                f"the joint action names unknown agents {short_repr(unknown)}; the agents are {self.possible_agents}"
            )
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(
                f"the joint action has no entry for the live agents {missing} (it has {short_repr(list(actions))}); "
                f"give every agent of env.agents an action (None counts as a malformed one)"
            )


class AECView(parallel_to_aec_wrapper):
    """The turn-by-turn (AEC) view of a parallel game, PettingZoo's ``parallel_to_aec`` with the
    episode-end contract of the family.

    Agents act one after the other; the joint action goes to the game when the last live agent of
    the cycle has acted, so a malformed action's ``infos[agent]["action_error"]`` (and the rewards)
    appear after that agent's turn, at the end of the cycle. Once every agent has stepped out of a
    finished game, ``step`` raises :class:`verigym.core.EpisodeEndedError` until ``reset``
    (PettingZoo's converter only warns and steps on).

    Args:
        game: a :class:`ParallelGame`.
    """

    def step(self, action: Any) -> None:
        if not self.agents:
            raise EpisodeEndedError(
                f"the {type(self.env).__name__} game is over and every agent has stepped out (or it was never reset); call reset()"
            )
        super().step(action)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)


def last_match(pattern: re.Pattern[str], text: str, missing: str) -> re.Match[str]:
    """The last match of ``pattern`` in ``text`` outside ``<think>...</think>`` blocks (only the
    last 20,000 characters are searched).

    Raises:
        TypeError: ``text`` is not a ``str``.
        ActionParseError: no match; ``missing`` is the message for the agent.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    visible = re.sub(r"<think>.*?(?:</think>|\Z)", " ", text, flags=re.DOTALL | re.IGNORECASE)
    matches = list(pattern.finditer(visible[-20000:]))
    if not matches:
        raise ActionParseError(missing)
    return matches[-1]


class TurnBasedGame(AgentSpaces, AECEnv):
    """Base class of the turn-based (AEC) games; see the module docstring for the conventions.

    Subclasses call :meth:`_setup` in ``__init__`` and implement the hooks below.

    Args (shared by every subclass):
        max_cycles: most moves any one agent makes before the game is truncated (payoffs from
            :meth:`_truncation_payoffs`); ``None``: only the game's own rules end it.
        illegal_move_reward: reward of an agent whose move is illegal or malformed (ends the game).
        render_mode: ``None``, ``"ansi"`` (``render`` returns the board text) or ``"human"``
            (``render`` writes it to stdout).
    """

    metadata: dict[str, Any] = {
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
        "family": "multiagent",
    }
    forfeit_reward = 1.0
    """Reward of the other agents when one forfeits by an illegal move."""

    def _setup(
        self,
        agents: list[str],
        observation_space: spaces.Box,
        action_spaces: dict[str, spaces.Discrete],
        *,
        max_cycles: int | None,
        illegal_move_reward: float,
        render_mode: str | None,
    ) -> None:
        if max_cycles is not None:
            check_int("max_cycles", max_cycles, 1, 100_000)
        check_number("illegal_move_reward", illegal_move_reward, -100.0, 100.0)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        self.possible_agents = list(agents)
        self.agents = []
        self.observation_spaces = dict.fromkeys(agents, observation_space)
        self.action_spaces = dict(action_spaces)
        self.max_cycles = max_cycles
        self.illegal_move_reward = float(illegal_move_reward)
        self.render_mode = render_mode
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self._moves: dict[str, int] = {}
        self.agent_selection = agents[0]

    # -- hooks ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        """Draw a new game from ``self.np_random``; return the agent that moves first."""
        raise NotImplementedError

    def _legal_mask(self, agent: str) -> np.ndarray:
        """``int8`` mask over ``action_space(agent)`` of the moves ``agent`` may make now."""
        raise NotImplementedError

    def _apply(self, agent: str, action: int) -> str | None:
        """Play a legal ``action``; return the next agent to move, or ``None`` when the game is over."""
        raise NotImplementedError

    def _payoffs(self) -> dict[str, float]:
        """Rewards of the finished game (called once, after :meth:`_apply` returned ``None``)."""
        raise NotImplementedError

    def _verdict(self, agent: str, payoff: float) -> tuple[bool, float]:
        """``(success, score)`` of ``agent`` for its payoff; default: won, and payoff in [-1, 1] -> [0, 1]."""
        return payoff > 0, (payoff + 1.0) / 2.0

    def _truncation_payoffs(self) -> dict[str, float]:
        """Rewards when ``max_cycles`` cuts the game short; default 0 for everyone."""
        return dict.fromkeys(self.possible_agents, 0.0)

    def board_text(self) -> str:
        """The whole state as text, for ``render``."""
        raise NotImplementedError

    def action_text(self, action: Any, agent: str) -> str:
        """The text of ``action`` that :meth:`parse_action` reads back."""
        raise NotImplementedError

    # -- PettingZoo API -------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._reseed(seed)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._moves = dict.fromkeys(self.agents, 0)
        self._skip_agent_selection = None
        self.agent_selection = self._new_game()
        self.infos = {agent: {} for agent in self.agents}
        self._put_masks()

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if agent not in getattr(self, "terminations", {}):
            raise EpisodeEndedError(
                "the game is over and every agent has stepped out (or it was never reset); call reset() first"
            )
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.infos = {a: {} for a in self.agents}
        try:
            move = int(coerce_action(self.action_space(agent), action))
            if not self._legal_mask(agent)[move]:
                raise ActionParseError(
                    f"{self.action_text(move, agent)!r} is not a legal move now; {self.legal_moves_text(agent)}"
                )
        except ActionParseError as exc:
            action_error_info(str(exc), self.infos[agent])
            payoffs = {
                a: (self.illegal_move_reward if a == agent else self.forfeit_reward)
                for a in self.agents
            }
            self._finish(payoffs, truncated=False, forfeit=agent)
        else:
            self._moves[agent] += 1
            following = self._apply(agent, move)
            if following is None:
                self._finish(self._payoffs(), truncated=False)
            elif self.max_cycles is not None and self._moves[following] >= self.max_cycles:
                self._finish(self._truncation_payoffs(), truncated=True)
            else:
                self.agent_selection = following
        self._put_masks()
        self._accumulate_rewards()

    def observe(self, agent: str) -> np.ndarray:
        raise NotImplementedError

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        text = self.board_text()
        if self.render_mode == "human":
            sys.stdout.write(text + "\n")
            return None
        return text

    def close(self) -> None:
        """Nothing to release; safe to call twice."""

    # -- helpers --------------------------------------------------------------------------------
    def _finish(
        self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None
    ) -> None:
        for a in self.agents:
            payoff = float(payoffs.get(a, 0.0))
            self.rewards[a] = payoff
            if truncated:
                self.truncations[a] = True
            else:
                self.terminations[a] = True
            success, score = (False, 0.0) if a == forfeit else self._verdict(a, payoff)
            if forfeit is not None:
                self.infos[a]["forfeit"] = forfeit
            episode_end(self.infos[a], success=success, score=score)
            self.infos[a]["payoff"] = payoff
        # let agent_iter visit every agent once more (each steps None)
        order = self.possible_agents
        self.agent_selection = order[(order.index(self.agent_selection) + 1) % len(order)]

    def _put_masks(self) -> None:
        for a in self.agents:
            n = int(self.action_space(a).n)
            live = not (self.terminations[a] or self.truncations[a]) and a == self.agent_selection
            self.infos[a][ACTION_MASK] = (
                self._legal_mask(a).astype(np.int8) if live else np.zeros(n, dtype=np.int8)
            )

    def game_over(self) -> bool:
        """Whether the current game has ended (all agents terminated or truncated)."""
        return all(
            self.terminations.get(a, True) or self.truncations.get(a, True)
            for a in self.possible_agents
        )

    def legal_moves_text(self, agent: str) -> str:
        """``"legal moves: a, b, c"`` for ``agent`` (at most 20 listed)."""
        legal = np.flatnonzero(self._legal_mask(agent))
        shown = ", ".join(self.action_text(int(a), agent) for a in legal[:20])
        more = f" and {len(legal) - 20} more" if len(legal) > 20 else ""
        return f"legal moves: {shown}{more}" if len(legal) else "no legal moves"


class MarkBoardGame(TurnBasedGame):
    """A two-seat board game of marks: ``player_0`` places mark 1, ``player_1`` mark 2, an empty
    cell is 0, and the first to line up its marks wins (tic-tac-toe, connect four).

    Gives the shared rules: the mark of a seat, whose turn is next, the win/loss/draw payoffs
    and the three-plane observation. An action is a cell or column number.
    """

    def _mark(self, agent: str) -> int:
        """1 for ``player_0``, 2 for ``player_1``."""
        return 1 + self.possible_agents.index(agent)

    def _other(self, agent: str) -> str:
        """The seat that moves after ``agent``."""
        return self.possible_agents[1 - self.possible_agents.index(agent)]

    def _mark_payoffs(self, winner: int) -> dict[str, float]:
        """+1 to the seat with mark ``winner``, -1 to the other; 0 each when ``winner`` is 0 (a draw)."""
        return {
            a: 0.0 if not winner else (1.0 if self._mark(a) == winner else -1.0)
            for a in self.possible_agents
        }

    def _mark_planes(self, grid: np.ndarray, agent: str) -> np.ndarray:
        """``int8`` array of shape ``grid.shape + (3,)``: ``agent``'s marks, the opponent's, the
        empty cells."""
        mine = self._mark(agent)
        return np.stack([grid == mine, grid == 3 - mine, grid == 0], axis=-1).astype(np.int8)

    def action_text(self, action: Any, agent: str) -> str:
        return str(int(action))
