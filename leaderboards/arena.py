"""Competitive suites: entrants play each other in two-player PettingZoo (AEC) games.

Every unordered pair of entrants plays ``episodes`` matches per game of the suite, on the held-out
seeds ``seed_start + i``; the entrant that moves first alternates with ``i``. A match is recorded
once (crash-safe, resumable like episodes) with both payoffs; ratings are computed from all
recorded matches in a fixed order with openskill's Plackett-Luce model (Weng & Lin 2011, a
TrueSkill-like Bayesian rating): higher payoff ranks first, equal payoffs are a draw. Entrants are
ranked by the ordinal ``mu - 3 sigma``.

Entrants are agent specs (:mod:`verigym.leaderboards.agent_spec`), plus two built-ins for games
that provide them: ``oracle`` (the game's ``solver_action``: minimax or equilibrium play) and
``heuristic`` (its ``heuristic_action``). An agent acts on the seat's observation and
``info["action_mask"]``.

Matches run in the calling process, one after another (these games take milliseconds); an agent
that raises forfeits the match (payoffs -1 / +1, the error recorded).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verigym.leaderboards.agent_spec import AgentSpec, parse_agent_spec
from verigym.leaderboards.store import DEFAULT_DIR, MatchRow, ResultsStore
from verigym.leaderboards.suite import Suite

__all__ = ["ArenaSummary", "Rating", "compute_ratings", "play_arena"]

BUILTINS = ("random", "oracle", "heuristic")


class _Seat:
    """What an agent sees of one seat: its spaces, and the game's solver as its oracle."""

    def __init__(self, game: Any, agent: str, rng: np.random.Generator):
        self.game, self.agent, self.rng = game, agent, rng
        self.action_space = game.action_space(agent)
        self.observation_space = game.observation_space(agent)
        self.unwrapped = self

    def oracle_action(self) -> int:
        return int(self.game.unwrapped.solver_action(self.agent, self.rng))

    def heuristic_action(self) -> int:
        return int(self.game.unwrapped.heuristic_action(self.agent, self.rng))


class _Builtin:
    def __init__(self, seat: _Seat, kind: str):
        needed = {"oracle": "solver_action", "heuristic": "heuristic_action"}[kind]
        if not callable(getattr(seat.game.unwrapped, needed, None)):
            raise TypeError(
                f"{type(seat.game.unwrapped).__name__} has no {needed}; it cannot field the {kind!r} entrant"
            )
        self.act_fn = seat.oracle_action if kind == "oracle" else seat.heuristic_action

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> int:
        return self.act_fn()


def _entrant(spec_text: str) -> tuple[str, str, AgentSpec | None]:
    """(spec text, config hash, parsed spec or None for the arena built-ins)."""
    if spec_text in ("oracle", "heuristic"):
        return spec_text, hashlib.sha256(f"builtin\0{spec_text}".encode()).hexdigest()[:16], None
    spec = parse_agent_spec(spec_text)
    return spec.text, spec.config_hash(), spec


def _build(spec_text: str, spec: AgentSpec | None, seat: _Seat) -> Any:
    if spec is None:
        return _Builtin(seat, spec_text)
    if spec.text_view:
        raise ValueError(f"{spec_text}: text-view agents do not play competitive suites yet")
    return spec.build(seat)


def play_match(
    env_id: str, seed: int, players: Sequence[tuple[str, AgentSpec | None]]
) -> tuple[list[float], int, str]:
    """Play one match; ``players[i]`` takes seat ``i``. Returns payoffs, moves and an error note."""
    from verigym.registration import make

    game = make(env_id)
    try:
        game.reset(seed=seed)
        if len(game.possible_agents) != len(players):
            raise ValueError(
                f"{env_id} has {len(game.possible_agents)} seats, got {len(players)} players"
            )
        rng = np.random.default_rng(seed)
        agents = {}
        for index, (seat_name, (text, spec)) in enumerate(zip(game.possible_agents, players)):
            agents[seat_name] = _build(text, spec, _Seat(game, seat_name, rng))
            if callable(getattr(agents[seat_name], "reset", None)):
                agents[seat_name].reset(seed=seed + index)
        payoffs = dict.fromkeys(game.possible_agents, 0.0)
        final_infos: dict[str, Mapping[str, Any]] = {}
        moves = 0
        for seat_name in game.agent_iter():
            observation, reward, terminated, truncated, info = game.last()
            payoffs[seat_name] += float(reward)
            if terminated or truncated:
                final_infos[seat_name] = info
                game.step(None)
                continue
            try:
                action = agents[seat_name].act(observation, info, deterministic=True)
            except Exception as exc:
                index = game.possible_agents.index(seat_name)
                result = [1.0] * len(players)
                result[index] = -1.0
                return (
                    result,
                    moves,
                    f"{players[index][0]} raised {type(exc).__name__}: {exc}"[-1000:],
                )
            game.step(action)
            moves += 1
        result = [
            float(final_infos.get(a, {}).get("payoff", payoffs[a])) for a in game.possible_agents
        ]
        return result, moves, ""
    finally:
        game.close()


def _can_play(env_id: str, text: str, spec: AgentSpec | None) -> str:
    """'' if the entrant can take a seat in ``env_id``, else why not."""
    from verigym.registration import make

    game = make(env_id)
    try:
        game.reset(seed=0)
        _build(text, spec, _Seat(game, game.possible_agents[0], np.random.default_rng(0)))
    except (TypeError, ValueError) as exc:
        return str(exc)
    finally:
        game.close()
    return ""


@dataclass
class ArenaSummary:
    suite: str
    entrants: list[str]
    ran: int = 0
    skipped: int = 0
    unavailable: list[str] = field(default_factory=list)
    """``"<entrant> on <game>: why"`` for entrants that cannot play a game (their pairs are skipped)."""


def play_arena(
    agents: Sequence[str],
    suite: Suite,
    *,
    out: Any = DEFAULT_DIR,
    resume: bool = False,
    progress: bool = True,
) -> ArenaSummary:
    """Play every pair of ``agents`` on each game of a competitive ``suite`` and record the matches.

    Raises:
        ValueError: fewer than two entrants, a non-competitive suite, or unregistered games.
        ResultsExistError: matches exist already and ``resume`` is False.
    """
    from verigym.leaderboards.runner import ResultsExistError, provenance

    if suite.kind != "competitive":
        raise ValueError(f"suite {suite.name} is not competitive")
    if len(set(agents)) < 2:
        raise ValueError(
            "a competitive suite needs at least two different entrants (--agent A --agent B ...)"
        )
    missing = suite.missing_ids()
    if missing:
        raise ValueError(f"suite {suite.name} names ids that are not registered here: {missing}")
    entrants = [_entrant(text) for text in dict.fromkeys(agents)]
    meta = provenance()
    summary = ArenaSummary(suite.name, [e[0] for e in entrants])
    with ResultsStore(out) as store:
        done = {
            (m.env_id, m.seed, m.first_spec, m.first_hash, m.second_spec, m.second_hash)
            for m in store.matches(env_ids=[t.env_id for t in suite])
        }
        plan = []
        for task in suite:
            able = []
            for entrant in entrants:
                why = _can_play(task.env_id, entrant[0], entrant[2])
                if why:
                    summary.unavailable.append(f"{entrant[0]} on {task.env_id}: {why}")
                else:
                    able.append(entrant)
            for a, b in itertools.combinations(able, 2):
                for i, seed in enumerate(task.seeds):
                    first, second = (a, b) if i % 2 == 0 else (b, a)
                    key = (task.env_id, seed, first[0], first[1], second[0], second[1])
                    if key in done:
                        summary.skipped += 1
                    else:
                        plan.append((task.env_id, seed, first, second))
        if summary.skipped and not resume:
            raise ResultsExistError(
                f"{summary.skipped} matches of these entrants on {suite.name} are already recorded; add --resume"
            )
        from rich.progress import Progress

        with Progress(disable=not progress) as bar:
            task_id = bar.add_task(f"arena {suite.name}", total=len(plan))
            for env_id, seed, first, second in plan:
                payoffs, moves, error = play_match(
                    env_id, seed, [(first[0], first[2]), (second[0], second[2])]
                )
                store.add_match(
                    MatchRow(
                        suite=suite.name,
                        env_id=env_id,
                        seed=seed,
                        first_spec=first[0],
                        first_hash=first[1],
                        second_spec=second[0],
                        second_hash=second[1],
                        first_payoff=payoffs[0],
                        second_payoff=payoffs[1],
                        length=moves,
                        error=error,
                        **meta,
                    )
                )
                summary.ran += 1
                bar.advance(task_id)
    return summary


@dataclass
class Rating:
    """An entrant's rating and record."""

    agent_spec: str
    config_hash: str
    mu: float
    sigma: float
    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def ordinal(self) -> float:
        return self.mu - 3.0 * self.sigma

    @property
    def matches(self) -> int:
        return self.wins + self.draws + self.losses


def compute_ratings(matches: Sequence[MatchRow]) -> list[Rating]:
    """openskill Plackett-Luce ratings from matches (in the store's fixed order), best first."""
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    players: dict[tuple[str, str], Any] = {}
    records: dict[tuple[str, str], list[int]] = {}
    for m in matches:
        a, b = (m.first_spec, m.first_hash), (m.second_spec, m.second_hash)
        for key in (a, b):
            players.setdefault(key, model.rating(name=key[0]))
            records.setdefault(key, [0, 0, 0])
        if math.isclose(m.first_payoff, m.second_payoff):
            ranks, outcome = [0, 0], (1, 1)
        elif m.first_payoff > m.second_payoff:
            ranks, outcome = [0, 1], (0, 2)
        else:
            ranks, outcome = [1, 0], (2, 0)
        [[players[a]], [players[b]]] = model.rate([[players[a]], [players[b]]], ranks=ranks)
        records[a][outcome[0]] += 1
        records[b][outcome[1]] += 1
    ratings = [Rating(key[0], key[1], p.mu, p.sigma, *records[key]) for key, p in players.items()]
    return sorted(ratings, key=lambda r: (-r.ordinal, r.agent_spec))
