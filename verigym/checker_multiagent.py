"""``verigym check`` for multi-agent ids: PettingZoo ``AECEnv`` and ``ParallelEnv`` games.

Usable on third-party games too::

    from verigym.checker_multiagent import check_multiagent_env
    report = check_multiagent_env("verigym/TicTacToe-v0")   # an id, an env, or a factory
    print(report.format()); report.raise_for_failures()

The report uses the same :class:`~verigym.checker.CheckReport`/:class:`~verigym.checker.CheckResult`
types as the Gymnasium checker. Checks, beyond PettingZoo's own API tests:

``pettingzoo_api_test``
    ``pettingzoo.test.api_test`` (AEC) or ``parallel_api_test`` (parallel; then ``api_test`` on its
    ``parallel_to_aec`` view too), with warnings turned into errors.
``determinism``
    two instances, the same seed and the same turn/joint actions for ``steps`` steps (finished games
    restarted with seeds ``seed + 1``, ...) give equal observations, rewards, terminations,
    truncations, verdicts and ``action_error`` flags; every observation is in its agent's space,
    every reward is finite, and no observation or info (at reset too) holds a lone surrogate (text
    that cannot be encoded to UTF-8; the failure is one line naming the agent, field and step).
    Actions are sampled uniformly over ``infos[agent]["action_mask"]`` when the info has one.
``reset_leak``
    ``reset(seed=s)`` after other play replays exactly like ``reset(seed=s)`` on a fresh instance.
``pickle_deepcopy``
    ``pickle`` and ``copy.deepcopy`` mid-game continue identically to the original, and stepping a
    copy leaves the original untouched.
``malformed_actions``
    for EACH agent, when it has to act: ``None``, out-of-range, NaN, inf, fractional, wrong-shape
    and text actions (and, in turn-based games that are not parallelizable, a move the
    ``action_mask`` forbids) raise nothing; the agent's info gets a non-empty ``action_error`` (in
    the AEC view of a parallel game, by the end of that cycle); observations stay in their spaces and rewards
    are finite; the game either goes on (another valid step works) or ends with a verdict
    (``success``/``score``) in every finishing agent's info.
``episode_end``
    every step that ends an agent's episode puts ``success`` (bool) and ``score`` (float in
    ``[0, 1]``) into that agent's info.
``step_after_end``
    once every agent has stepped out (AEC) or no agent is live (parallel), ``step`` raises a clear
    error saying to call ``reset`` (also on ``deepcopy``/``pickle`` copies of the finished game), and
    after ``reset`` the game steps again.
``close_twice``
    ``close()`` can be called twice.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import pickle
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.checker import (
    CheckReport,
    CheckResult,
    Status,
    _short,
    lone_surrogate,
    malformed_cases,
    run_checks,
    same_values,
)
from verigym.core import ACTION_ERROR, ACTION_MASK, SCORE, SUCCESS

__all__ = ["MULTIAGENT_CHECKS", "check_multiagent_all", "check_multiagent_env"]

MULTIAGENT_CHECKS = (
    "pettingzoo_api_test",
    "determinism",
    "reset_leak",
    "pickle_deepcopy",
    "malformed_actions",
    "episode_end",
    "step_after_end",
    "close_twice",
)

MultiAgentSource = (
    Any  # a registered id, an AECEnv/ParallelEnv instance, or a zero-argument factory
)


def _api_of(env: Any) -> str:
    """``"aec"`` or ``"parallel"`` for a PettingZoo env.

    Raises:
        TypeError: ``env`` is neither.
    """
    from pettingzoo import AECEnv, ParallelEnv

    if isinstance(env, AECEnv):
        return "aec"
    if isinstance(env, ParallelEnv):
        return "parallel"
    raise TypeError(f"expected a PettingZoo AECEnv or ParallelEnv, got {type(env).__name__}")


@dataclass
class _Record:
    """What one agent saw after one step: compared across instances."""

    agent: str
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    verdict: tuple[Any, Any]
    malformed: bool

    def same_as(self, other: _Record) -> bool:
        return (
            self.agent == other.agent
            and same_values(self.observation, other.observation)
            and same_values(self.reward, other.reward)
            and (self.terminated, self.truncated, self.verdict, self.malformed)
            == (other.terminated, other.truncated, other.verdict, other.malformed)
        )


class _Actions:
    """Reproducible per-agent actions: uniform over the ``action_mask`` when the info has one,
    else a sample of the agent's action space (each agent's space seeded from ``seed``)."""

    def __init__(self, env: Any, seed: int):
        self.rng = np.random.default_rng(seed)
        self.spaces: dict[str, spaces.Space] = {}
        for i, agent in enumerate(env.possible_agents):
            space = copy.deepcopy(env.action_space(agent))
            space.seed(seed + 7919 * i)
            self.spaces[agent] = space

    def __call__(self, agent: str, info: Mapping[str, Any] | None) -> Any:
        space = self.spaces[agent]
        sample = space.sample()
        mask = None if info is None else info.get(ACTION_MASK)
        if (
            isinstance(space, spaces.Discrete)
            and mask is not None
            and np.shape(mask) == (space.n,)
            and np.any(mask)
        ):
            return np.int64(space.start + self.rng.choice(np.flatnonzero(mask)))
        return sample


class _Driver:
    """Steps an AEC or parallel game through one interface; records what every agent sees."""

    def __init__(self, env: Any, api: str):
        self.env = env
        self.api = api
        self.infos: dict[str, dict[str, Any]] = {}

    def reset(self, seed: int | None) -> list[_Record]:
        if self.api == "aec":
            self.env.reset(seed=seed)
            self.infos = {a: dict(self.env.infos.get(a, {})) for a in self.env.agents}
            return [self._aec_record(a) for a in self.env.agents]
        observations, infos = self.env.reset(seed=seed)
        self.infos = {a: dict(infos.get(a, {})) for a in self.env.agents}
        return [
            _Record(a, observations[a], 0.0, False, False, (None, None), False)
            for a in sorted(observations)
        ]

    def done(self) -> bool:
        return not self.env.agents

    def actors(self) -> list[str]:
        """The agents that act on the next step (the selected one, or every live one)."""
        return [self.env.agent_selection] if self.api == "aec" else list(self.env.agents)

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[list[_Record], dict[str, dict[str, Any]], list[str]]:
        """One step with ``actions`` for :meth:`actors`; returns the records, the infos of this step
        and the agents whose episode this step ended."""
        if self.api == "aec":
            agent = self.env.agent_selection
            was_live = {
                a
                for a in self.env.agents
                if not (self.env.terminations[a] or self.env.truncations[a])
            }
            self.env.step(actions[agent])
            infos = {a: dict(self.env.infos.get(a, {})) for a in self.env.agents}
            ended = [
                a
                for a in self.env.agents
                if a in was_live and (self.env.terminations[a] or self.env.truncations[a])
            ]
            self.infos = infos
            records = [self._aec_record(a) for a in sorted(self.env.agents)]
            return records, infos, ended
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        infos = {a: dict(i) for a, i in infos.items()}
        self.infos = {a: infos.get(a, {}) for a in self.env.agents}
        records = [
            _Record(
                a,
                observations[a],
                float(rewards[a]),
                bool(terminations[a]),
                bool(truncations[a]),
                (infos.get(a, {}).get(SUCCESS), infos.get(a, {}).get(SCORE)),
                ACTION_ERROR in infos.get(a, {}),
            )
            for a in sorted(observations)
        ]
        ended = [a for a in observations if terminations[a] or truncations[a]]
        return records, infos, ended

    def live(self, agent: str) -> bool:
        if self.api == "aec":
            return not (self.env.terminations[agent] or self.env.truncations[agent])
        return agent in self.env.agents

    def choose(self, source: _Actions) -> dict[str, Any]:
        """Actions of :meth:`actors` from ``source`` (``None`` for an AEC agent that stepped out)."""
        return {a: (source(a, self.infos.get(a)) if self.live(a) else None) for a in self.actors()}

    def _aec_record(self, agent: str) -> _Record:
        env = self.env
        info = env.infos.get(agent, {})
        return _Record(
            agent,
            env.observe(agent),
            float(env._cumulative_rewards.get(agent, 0.0)),
            bool(env.terminations[agent]),
            bool(env.truncations[agent]),
            (info.get(SUCCESS), info.get(SCORE)),
            ACTION_ERROR in info,
        )


class _ObservationProblem(AssertionError):
    """What a rollout saw that ends its check: a failure in one line, not a traceback."""


def _observation_problem(env: Any, records: Sequence[_Record]) -> str | None:
    for r in records:
        space = env.observation_space(r.agent)
        if not space.contains(r.observation):
            return f"{r.agent}'s observation {_short(r.observation)} is not in {space}"
        if not math.isfinite(r.reward):
            return f"{r.agent}'s reward {r.reward!r} is not finite"
        if problem := lone_surrogate(r.observation, f"{r.agent}'s observation"):
            return problem
    return None


def _text_problem(records: Sequence[_Record], infos: Mapping[str, Any], when: str) -> str | None:
    """The first lone surrogate in what the agents see ``when`` (observations and infos)."""
    for r in records:
        if problem := lone_surrogate(r.observation, f"{r.agent}'s observation {when}"):
            return problem
    return lone_surrogate(dict(infos), f"the infos {when}")


def _verdict_problem(agent: str, info: Mapping[str, Any]) -> str | None:
    success, score = info.get(SUCCESS), info.get(SCORE)
    if not isinstance(success, (bool, np.bool_)):
        return f"the step that ended {agent}'s episode has info['success']={success!r}, not a bool"
    if (
        isinstance(score, bool)
        or not isinstance(score, (int, float, np.floating))
        or not 0.0 <= float(score) <= 1.0
    ):
        return f"the step that ended {agent}'s episode has info['score']={score!r}, not a float in [0, 1]"
    return None


def _refuses_step(driver: _Driver, label: str) -> str | None:
    """``None`` if stepping the finished game raises a clear error saying to reset, else the problem."""
    env = driver.env
    action: Any = {a: 0 for a in env.possible_agents} if driver.api == "parallel" else 0
    try:
        env.step(action)
    except (RuntimeError, gym.error.Error, ValueError) as exc:
        if "reset" in str(exc).lower():
            return None
        return f"{label}: step raised {type(exc).__name__}: {_short(str(exc))} -- say that reset() is needed"
    except Exception as exc:
        return f"{label}: step raised {type(exc).__name__}: {_short(str(exc))}, not a clear error saying to call reset()"
    return f"{label}: step on the finished game ran on instead of raising an error that says to call reset()"


class _MultiAgentChecker:
    def __init__(
        self, source: MultiAgentSource, *, steps: int, seed: int, env_kwargs: dict[str, Any]
    ):
        self.steps, self.seed = steps, seed
        self.env_id: str | None = None
        if isinstance(source, str):
            from verigym.registration import make

            self.env_id = source
            self.factory: Callable[[], Any] = lambda: make(source, **env_kwargs)
        elif callable(source) and not hasattr(source, "possible_agents"):
            self.factory = source
        else:
            template = source
            _api_of(template)
            self.factory = lambda: copy.deepcopy(template)
        probe = self.factory()
        self.api = _api_of(probe)
        try:
            agents = list(probe.possible_agents)
        except AttributeError:
            agents = []
        if not agents:
            raise TypeError(
                f"{type(probe).__name__} has no possible_agents; the checks compare every agent's trajectory "
                "and need the full agent list (PettingZoo's api_test warns about it too)"
            )
        self.parallelizable = bool(getattr(probe, "metadata", {}).get("is_parallelizable", False))
        self.name = self.env_id or type(getattr(probe, "unwrapped", probe)).__name__
        probe.close()
        self.episode_end_problems: list[str] = []
        self.episode_ends = 0

    # -- helpers --------------------------------------------------------------------------------
    def _driver(self) -> _Driver:
        return _Driver(self.factory(), self.api)

    def _rollout(
        self, driver: _Driver, seed: int, steps: int, *, action_seed: int | None = None
    ) -> list[_Record]:
        """``steps`` steps from ``reset(seed)``; finished games restart with seeds seed+1, ...;
        also collects the episode-end problems of :meth:`episode_end`."""
        source = _Actions(driver.env, seed if action_seed is None else action_seed)
        trajectory = driver.reset(seed)
        if problem := _text_problem(trajectory, driver.infos, f"at reset(seed={seed})"):
            raise _ObservationProblem(problem)
        episode = 0
        for step in range(1, steps + 1):
            records, infos, ended = driver.step(driver.choose(source))
            trajectory.extend(records)
            problem = _text_problem(records, infos, f"at step {step}") or _observation_problem(
                driver.env, records
            )
            if problem:
                raise _ObservationProblem(problem)
            for agent in ended:
                self.episode_ends += 1
                issue = _verdict_problem(agent, infos.get(agent, {}))
                if issue and len(self.episode_end_problems) < 5:
                    self.episode_end_problems.append(issue)
            if driver.done():
                episode += 1
                restart = driver.reset(seed + episode)
                if problem := _text_problem(
                    restart, driver.infos, f"at reset(seed={seed + episode})"
                ):
                    raise _ObservationProblem(problem)
                trajectory.extend(restart)
        return trajectory

    @staticmethod
    def _first_difference(a: Sequence[_Record], b: Sequence[_Record]) -> str | None:
        for i, (x, y) in enumerate(zip(a, b)):
            if not x.same_as(y):
                fields = [
                    n
                    for n in (
                        "agent",
                        "observation",
                        "reward",
                        "terminated",
                        "truncated",
                        "verdict",
                        "malformed",
                    )
                    if not same_values(getattr(x, n), getattr(y, n))
                ]
                return f"record {i} ({x.agent}) differs in {', '.join(fields)}: {_short(getattr(x, fields[0]))} vs {_short(getattr(y, fields[0]))}"
        if len(a) != len(b):
            return f"trajectory lengths differ: {len(a)} vs {len(b)} records"
        return None

    # -- the checks (each returns (status, detail)) -----------------------------------------------
    def pettingzoo_api_test(self) -> tuple[Status, str]:
        from pettingzoo.test import api_test, parallel_api_test
        from pettingzoo.utils.conversions import parallel_to_aec

        cycles = max(10, min(self.steps, 100))
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
        ):  # its progress prints
            warnings.simplefilter("error")
            env = self.factory()
            if self.api == "aec":
                api_test(env, num_cycles=cycles)
                env.close()
                return "pass", f"api_test, {cycles} cycles"
            parallel_api_test(env, num_cycles=cycles)
            env.close()
            api_test(parallel_to_aec(self.factory()), num_cycles=cycles)
        return (
            "pass",
            f"parallel_api_test and api_test of the parallel_to_aec view, {cycles} cycles",
        )

    def determinism(self) -> tuple[Status, str]:
        first, second = self._driver(), self._driver()
        a = self._rollout(first, self.seed, self.steps)
        b = self._rollout(second, self.seed, self.steps)
        first.env.close()
        second.env.close()
        difference = self._first_difference(a, b)
        if difference:
            return "fail", f"two instances, seed {self.seed}, the same actions: {difference}"
        return "pass", f"{self.steps} steps, {len(a)} agent records equal"

    def reset_leak(self) -> tuple[Status, str]:
        steps = max(1, self.steps // 4)
        played = self._driver()
        self._rollout(played, self.seed + 1000, steps, action_seed=self.seed + 99)
        again = self._rollout(played, self.seed, steps)
        fresh_driver = self._driver()
        fresh = self._rollout(fresh_driver, self.seed, steps)
        played.env.close()
        fresh_driver.env.close()
        difference = self._first_difference(fresh, again)
        if difference:
            return (
                "fail",
                f"reset(seed={self.seed}) after other play differs from a fresh instance: {difference}",
            )
        return "pass", f"{steps} steps replayed identically after other play"

    def _mid_game(self) -> tuple[_Driver, _Actions]:
        """A driver a few steps into a game that is not over, and its action source."""
        driver = self._driver()
        source = _Actions(driver.env, self.seed)
        for attempt in range(20):
            driver.reset(self.seed + attempt)
            for _ in range(2):
                driver.step(driver.choose(source))
                if driver.done():
                    break
            if not driver.done():
                return driver, source
        raise AssertionError(
            "every game of 20 seeds ended within 2 steps; no mid-game state to copy"
        )

    def pickle_deepcopy(self) -> tuple[Status, str]:
        driver, source = self._mid_game()
        steps = max(5, min(self.steps, 50))
        problems = []
        for label, clone in (
            ("deepcopy", copy.deepcopy),
            ("pickle", lambda e: pickle.loads(pickle.dumps(e))),
        ):
            try:
                copied_env = clone(driver.env)
            except Exception as exc:
                return "fail", f"{label} of a mid-game env raised {type(exc).__name__}: {exc}"
            copied = _Driver(copied_env, self.api)
            copied.infos = copy.deepcopy(driver.infos)
            original = _Driver(copy.deepcopy(driver.env), self.api)
            original.infos = copy.deepcopy(driver.infos)
            before = pickle.dumps(driver.env)
            runs = []
            for d in (original, copied):
                actions = copy.deepcopy(source)
                records: list[_Record] = []
                for _ in range(steps):
                    if d.done():
                        break
                    records.extend(d.step(d.choose(actions))[0])
                runs.append(records)
            difference = self._first_difference(*runs)
            if difference:
                problems.append(
                    f"{label}: the copy continues differently from the original: {difference}"
                )
            if pickle.dumps(driver.env) != before:
                problems.append(
                    f"{label}: stepping the copy changed the original (its pickled state differs)"
                )
        driver.env.close()
        return (
            ("fail", "\n".join(problems))
            if problems
            else ("pass", f"deepcopy and pickle mid-game continue identically for {steps} steps")
        )

    def _malformed_for(self, agent: str, space: spaces.Space) -> list[tuple[str, Any]]:
        cases: list[tuple[str, Any]] = [("None", None), ("text", "up")]
        cases += [(label, action) for label, action, must in malformed_cases(space) if must]
        return cases

    def malformed_actions(self) -> tuple[Status, str]:
        driver = self._driver()
        env = driver.env
        problems: list[str] = []
        tried = 0
        for index, agent in enumerate(env.possible_agents):
            cases = self._malformed_for(agent, env.action_space(agent))
            cases.append(("illegal (masked-out) move", "__illegal__"))
            for label, bad in cases:
                reached = self._reach_turn(driver, agent, self.seed + 31 * index)
                if not reached:
                    problems.append(
                        f"{agent}: never had to act within 200 steps of seed {self.seed + 31 * index}"
                    )
                    break
                mask = driver.infos.get(agent, {}).get(ACTION_MASK)
                space = env.action_space(agent)
                if label.startswith(
                    "illegal"
                ):  # turn-based games: the mask is the rule (grid moves into walls are legal turns)
                    if (
                        self.api != "aec"
                        or self.parallelizable
                        or mask is None
                        or not isinstance(space, spaces.Discrete)
                        or np.all(mask)
                    ):
                        continue
                    bad = np.int64(space.start + int(np.flatnonzero(np.asarray(mask) == 0)[0]))
                source = _Actions(env, self.seed + index)
                actions = driver.choose(source)
                actions[agent] = bad
                tried += 1
                where = f"{agent}, {label} {_short(bad, 40)}"
                try:
                    records, infos, ended = driver.step(actions)
                except Exception as exc:
                    problems.append(
                        f"{where}: step raised {type(exc).__name__}: {_short(str(exc))}"
                    )
                    driver = self._driver()
                    env = driver.env
                    continue
                error = infos.get(agent, {}).get(ACTION_ERROR)
                if (
                    self.api == "aec" and error is None
                ):  # an AEC view of a parallel game judges the joint action at the cycle's end
                    for _ in range(len(env.possible_agents) - 1):
                        if driver.done() or env.agent_selection == agent:
                            break
                        more, infos, also_ended = driver.step(driver.choose(source))
                        records, ended = records + more, ended + also_ended
                        error = infos.get(agent, {}).get(ACTION_ERROR)
                        if error is not None:
                            break
                if not isinstance(error, str) or not error:
                    problems.append(
                        f"{where}: no info['action_error'] (non-empty str) for {agent}; infos {_short(infos.get(agent))}"
                    )
                observation_issue = _observation_problem(env, records)
                if observation_issue:
                    problems.append(f"{where}: {observation_issue}")
                for a in ended:
                    issue = _verdict_problem(a, infos.get(a, {}))
                    if issue:
                        problems.append(f"{where}: the game ended without a verdict: {issue}")
                if not driver.done():
                    try:  # the game goes on: a valid step still works
                        driver.step(driver.choose(source))
                    except Exception as exc:
                        problems.append(
                            f"{where}: the next valid step raised {type(exc).__name__}: {_short(str(exc))}"
                        )
                        driver = self._driver()
                        env = driver.env
        env.close()
        if problems:
            return "fail", "\n".join(problems[:12])
        return (
            "pass",
            f"{tried} malformed actions over {len(env.possible_agents)} agents flagged without exceptions",
        )

    def _reach_turn(self, driver: _Driver, agent: str, seed: int) -> bool:
        """Reset and play valid moves until ``agent`` has to act (live and among the actors)."""
        source = _Actions(driver.env, seed)
        for attempt in range(10):
            driver.reset(seed + attempt)
            for _ in range(200):
                if agent in driver.actors() and driver.live(agent):
                    return True
                driver.step(driver.choose(source))
                if driver.done():
                    break
        return False

    def _play_to_end(self, driver: _Driver, source: _Actions, seed: int) -> bool:
        """Play one whole game from ``reset(seed)`` (at most 100,000 steps), checking the verdict of
        every agent's last step; False when the game did not end."""
        driver.reset(seed)
        for _ in range(100_000):
            if driver.done():
                return True
            _, infos, ended = driver.step(driver.choose(source))
            for agent in ended:
                self.episode_ends += 1
                issue = _verdict_problem(agent, infos.get(agent, {}))
                if issue and len(self.episode_end_problems) < 5:
                    self.episode_end_problems.append(issue)
        return driver.done()

    def episode_end(self) -> tuple[Status, str]:
        if self.episode_ends == 0:  # the determinism rollouts were too short: play one whole game
            driver = self._driver()
            if not self._play_to_end(driver, _Actions(driver.env, self.seed), self.seed):
                return "warn", "the game did not end within 100,000 steps; verdicts not seen"
            driver.env.close()
        if self.episode_end_problems:
            return "fail", "\n".join(self.episode_end_problems)
        return "pass", f"{self.episode_ends} agent episode ends carried success/score"

    def step_after_end(self) -> tuple[Status, str]:
        driver = self._driver()
        source = _Actions(driver.env, self.seed)
        if not self._play_to_end(driver, source, self.seed):
            return "warn", "the game did not end within 100,000 steps"
        problems = [
            p
            for p in (
                _refuses_step(driver, "finished game"),
                _refuses_step(
                    _Driver(copy.deepcopy(driver.env), self.api), "deepcopy of the finished game"
                ),
                _refuses_step(
                    _Driver(pickle.loads(pickle.dumps(driver.env)), self.api),
                    "pickle of the finished game",
                ),
            )
            if p
        ]
        driver.reset(self.seed + 1)
        try:
            driver.step(driver.choose(source))
        except Exception as exc:
            problems.append(f"after reset, step raised {type(exc).__name__}: {_short(str(exc))}")
        driver.env.close()
        return (
            ("fail", "\n".join(problems))
            if problems
            else ("pass", "a finished game refuses step until reset")
        )

    def close_twice(self) -> tuple[Status, str]:
        driver = self._driver()
        driver.reset(self.seed)
        driver.env.close()
        driver.env.close()
        return "pass", ""


def check_multiagent_env(
    env: MultiAgentSource,
    *,
    steps: int = 200,
    seed: int = 0,
    checks: Iterable[str] | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> CheckReport:
    """Run the multi-agent checks (module docstring) on one PettingZoo game.

    Args:
        env: a registered multi-agent id (``api="aec"``/``"parallel"``), a PettingZoo ``AECEnv`` or
            ``ParallelEnv`` instance (deep-copied for each check), or a zero-argument factory.
        steps: length of the determinism rollouts, in steps (one agent's turn for AEC, one joint
            action for parallel games).
        seed: the first reset seed.
        checks: names from :data:`MULTIAGENT_CHECKS` (default: all).
        env_kwargs: constructor overrides when ``env`` is an id.

    Returns:
        The report; :meth:`~verigym.checker.CheckReport.raise_for_failures` turns failures into an error.

    Raises:
        ValueError: an unknown check name.
    """
    selected = list(MULTIAGENT_CHECKS if checks is None else checks)
    unknown = [c for c in selected if c not in MULTIAGENT_CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose from {MULTIAGENT_CHECKS}")
    if "episode_end" in selected and "determinism" not in selected:
        selected.append("determinism")
    try:
        checker = _MultiAgentChecker(env, steps=steps, seed=seed, env_kwargs=dict(env_kwargs or {}))
    except Exception as exc:
        name = (
            env
            if isinstance(env, str)
            else getattr(env, "__qualname__", None) or type(env).__name__
        )
        report = CheckReport(
            f"{getattr(env, '__module__', '')}.{name}".lstrip(".")
            if callable(env) and not isinstance(env, str)
            else name
        )
        report.results.append(
            CheckResult("make", "fail", f"making the env raised {type(exc).__name__}: {exc}")
        )
        return report
    names = [name for name in MULTIAGENT_CHECKS if name in selected]

    def run(name: str) -> tuple[Status, str]:
        try:
            return getattr(checker, name)()
        except _ObservationProblem as exc:  # one line naming the agent, the field and the step
            return "fail", str(exc)

    return run_checks(CheckReport(checker.name), names, run)


def check_multiagent_all(
    env_ids: Sequence[str] | None = None,
    *,
    steps: int = 200,
    seed: int = 0,
    on_report: Callable[[CheckReport], None] | None = None,
) -> list[CheckReport]:
    """Check many multi-agent ids (default: every registered ``aec``/``parallel`` row).

    Args:
        env_ids: ids to check.
        steps, seed: as in :func:`check_multiagent_env`.
        on_report: called with each report as soon as it is ready (progress output).
    """
    from verigym.registration import rows

    if env_ids is None:
        env_ids = [r.id for r in rows() if r.api in ("aec", "parallel")]
    reports = []
    for env_id in env_ids:
        report = check_multiagent_env(env_id, steps=steps, seed=seed)
        if on_report is not None:
            on_report(report)
        reports.append(report)
    return reports
