"""The checker itself: a correct env passes; each deliberately broken env is caught by name."""

from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium import spaces

from tests import broken_envs
from verigym.checker import ALL_CHECKS, CheckResult, ConformanceError, check_env


def _failed(factory, **kwargs) -> dict[str, str]:
    report = check_env(factory, steps=60, **kwargs)
    return {r.name: r.detail for r in report.results if r.status == "fail"}


def test_correct_baseline_passes():
    report = check_env(broken_envs.CountdownTextEnv, steps=60)
    assert report.passed, report.format()
    statuses = {r.name: r.status for r in report.results}
    assert statuses["determinism"] == "pass"
    assert statuses["malformed_actions"] == "pass"
    # a factory is not a registered id, so the fresh-interpreter check says why it skipped
    assert statuses["fresh_interpreter"] == "skip"


@pytest.mark.parametrize(
    "env_class, check, words",
    [
        (broken_envs.IgnoresSeedEnv, "determinism", "np_random"),
        (broken_envs.CrashesOnBadTextEnv, "malformed_actions", "raised IndexError"),
        (broken_envs.OutOfSpaceEnv, "determinism", "not in"),
        (broken_envs.LeaksStateEnv, "reset_leak", "state kept across reset"),
        (broken_envs.FixedTaskEnv, "seed_sensitivity", "does reset ignore its seed"),
        (broken_envs.NoVerdictEnv, "episode_end", "info['success']"),
        (broken_envs.BoxCrashEnv, "malformed_actions", "NaN"),
        (broken_envs.KeepsGoingEnv, "step_after_end", "the env: step ran on"),
        (broken_envs.CrashesAfterEndEnv, "step_after_end", "raised KeyError"),
        (broken_envs.ForgetsEndOnCopyEnv, "step_after_end", "its deep copy: step ran on"),
    ],
)
def test_broken_env_is_caught(env_class, check, words):
    failed = _failed(env_class)
    assert check in failed, f"{env_class.__name__} not caught by {check}; failures: {failed}"
    assert words in failed[check], failed[check]


def test_checks_reuse_the_determinism_rollout_faithfully():
    """reset_leak, seed_sensitivity and fresh_interpreter compare against a prefix of the
    determinism check's first rollout: that prefix is exactly what a fresh instance plays."""
    from verigym.checker import _prefix, _rollout

    long = _rollout(broken_envs.CountdownTextEnv(), 0, 60)
    for steps in (0, 1, 5, 25, 60):
        fresh = _rollout(broken_envs.CountdownTextEnv(), 0, steps)
        prefix = _prefix(long, steps)
        assert [(r.observation, r.reward, r.terminated, r.truncated, r.reset) for r in prefix] == [
            (r.observation, r.reward, r.terminated, r.truncated, r.reset) for r in fresh
        ]
    assert any(r.reset for r in long[1:]), "the rollout should cross an episode end"
    with pytest.raises(ValueError, match="fewer than 61"):
        _prefix(long, 61)


def test_seed_sensitivity_stops_at_the_first_difference(monkeypatch):
    """A seed-sensitive env passes after the first differing record, not after 8 x 30 steps."""
    steps = []
    original = broken_envs.CountdownTextEnv.step
    monkeypatch.setattr(
        broken_envs.CountdownTextEnv,
        "step",
        lambda self, action: steps.append(1) or original(self, action),
    )
    report = check_env(
        broken_envs.CountdownTextEnv, steps=60, checks=["determinism", "seed_sensitivity"]
    )
    assert report.passed, report.format()
    determinism_steps = 2 * 60
    assert determinism_steps <= len(steps) <= determinism_steps + 2, len(steps)


def test_raise_for_failures_lists_the_failed_check():
    report = check_env(broken_envs.CrashesOnBadTextEnv, steps=30, checks=["malformed_actions"])
    with pytest.raises(ConformanceError, match="malformed_actions"):
        report.raise_for_failures()


def test_unknown_id_suggests_close_ids():
    report = check_env("verigym/GuessNumbr-v0")
    assert not report.passed
    assert "did you mean verigym/GuessNumber-v0" in report.results[0].detail


def test_unknown_check_name_is_refused():
    with pytest.raises(ValueError, match="unknown checks"):
        check_env(broken_envs.CountdownTextEnv, checks=["nope"])


def test_every_check_has_a_result():
    report = check_env("verigym/Treasure-7x7-v0", steps=50)
    assert [r.name for r in report.results] == list(ALL_CHECKS)
    assert report.passed, report.format()


@pytest.mark.parametrize(
    "env_id", ["verigym/DoorKey-5x5-v0", "verigym/Wordle-Easy-v0", "verigym/TicTacToe-Random-v0"]
)
def test_registered_envs_refuse_step_after_end(env_id):
    """Families whose base class used to keep going (grid) and ones that refused by hand."""
    report = check_env(env_id, steps=60, checks=["step_after_end"])
    assert report.passed, report.format()
    assert "the next step raised" in report.results[0].detail


def test_step_after_end_reports_an_error_that_does_not_say_reset():
    class Terse(broken_envs.KeepsGoingEnv):
        def reset(self, *, seed=None, options=None):
            self._over = False
            return super().reset(seed=seed, options=options)

        def step(self, action):
            if self._over:
                raise RuntimeError("no")
            result = super().step(action)
            self._over = result[2] or result[3]
            return result

    failed = _failed(Terse, checks=["step_after_end"])
    assert "say that reset() is needed" in failed["step_after_end"]


def test_step_after_end_is_checked_through_language_wrapper(monkeypatch):
    """A LanguageWrapper that answers malformed replies after the end is caught by the check."""
    from verigym.wrappers.language import LanguageWrapper

    guarded = LanguageWrapper.step
    monkeypatch.setattr(
        LanguageWrapper, "step", guarded.__wrapped__
    )  # the step without its EpisodeGuard
    failed = _failed("verigym/DoorKey-5x5-v0", checks=["step_after_end"])
    detail = failed["step_after_end"]
    assert (
        "LanguageWrapper, after the env truncated the episode, a malformed reply: step ran on"
        in detail
    )
    assert (
        "LanguageWrapper, after its own truncation (3 malformed replies), the oracle reply: step ran on"
        in detail
    )
    monkeypatch.setattr(LanguageWrapper, "step", guarded)
    report = check_env("verigym/DoorKey-5x5-v0", steps=60, checks=["step_after_end"])
    assert report.passed and "LanguageWrapper refused too" in report.results[0].detail, (
        report.format()
    )


def test_a_hanging_step_fails_its_check_instead_of_hanging_the_checker():
    """call_timeout bounds each env call: the stuck step is interrupted and named, the rest skipped."""
    report = check_env(broken_envs.HangsInStepEnv, steps=60, call_timeout=1.0)
    results = {r.name: r for r in report.results}
    assert not report.passed
    hung = [r for r in report.results if r.status == "fail"]
    assert len(hung) == 1, report.format()
    assert "now in HangsInStepEnv.step (broken_envs.py" in hung[0].detail, hung[0].detail
    assert "did not return within 1 s" in hung[0].detail and hung[0].name == "determinism", hung[
        0
    ].detail
    after = report.results[report.results.index(hung[0]) + 1 :]
    assert after and all(
        r.status == "skip" and "hung in an earlier check" in r.detail for r in after
    ), report.format()
    assert results["family"].status == "pass"  # the checks before it ran normally


def test_call_timeout_leaves_a_correct_env_alone():
    report = check_env(broken_envs.CountdownTextEnv, steps=60, call_timeout=5.0)
    assert report.passed, report.format()


def test_a_lone_surrogate_is_named_in_one_line():
    """An observation with a lone surrogate fails naming the check, the field and why, in one line
    (not a bare UnicodeEncodeError, nor a pass); the printed report is valid UTF-8."""
    report = check_env(broken_envs.LoneSurrogateEnv, steps=20, checks=["determinism", "text_view"])
    failed = {r.name: r.detail for r in report.failures}
    assert set(failed) == {"determinism", "text_view"}, report.format()
    for detail in failed.values():
        assert "\n" not in detail and "lone surrogate '\\udcff'" in detail, detail
        assert detail.endswith("it cannot be encoded to UTF-8"), detail
    assert re.fullmatch(  # the first one only, though every observation holds one
        r"the observation at reset\(seed=0\) holds a lone surrogate '\\udcff' at index \d+: "
        r"it cannot be encoded to UTF-8",
        failed["determinism"],
    ), failed
    assert "[fail] determinism\n      the observation at reset(seed=0)" in report.format()
    report.format().encode("utf-8")  # printable: no raw surrogate in the report


def test_lone_surrogate_names_the_field_and_passes_valid_text():
    from verigym.checker import lone_surrogate

    info = {"notes": ["fine", {"path": "a\udc80b"}]}
    assert lone_surrogate(info, "info at step 3") == (
        "info at step 3['notes'][1]['path'] holds a lone surrogate '\\udc80' at index 1: "
        "it cannot be encoded to UTF-8"
    )
    assert "(a key)" in lone_surrogate({"\ud800": 1}, "info")
    assert "[1]" in lone_surrogate(np.array(["ok", "\udfff"]), "the observation")
    for valid in ("", "😀 a surrogate pair is one character", {"k": ("x", 1, None)}, np.zeros(3)):
        assert lone_surrogate(valid, "x") is None


class _EchoesTheReplyEnv(broken_envs.CountdownTextEnv):
    """Correct: its error message quotes the agent's reply, lone surrogates included."""

    def _parse(self, action: str) -> int:
        if len(action) > 64 or not action.strip().isdigit():
            raise ValueError(f"reply with digits only, not {action[:20]}")
        return int(action.strip())


def test_an_echo_of_the_agents_own_surrogates_is_allowed_and_escaped():
    report = check_env(_EchoesTheReplyEnv, steps=20, checks=["malformed_actions"])
    assert report.passed, report.format()
    assert CheckResult("x", "fail", "not \ud800 digits").detail == "not \\ud800 digits"


class _FloatOnlyNanCheckEnv(broken_envs.BoxCrashEnv):
    """Flags NaN only in float arrays and moves by the real part: a complex NaN gets through."""

    def step(self, action):
        array = np.asarray(action)
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            observation, reward, terminated, truncated, info = super().step(np.zeros(2))
            return observation, reward, terminated, truncated, {**info, "action_error": "NaN"}
        return super().step(np.nan_to_num(array.real))


def test_a_complex_nan_action_must_be_flagged():
    report = check_env(_FloatOnlyNanCheckEnv, steps=20, checks=["malformed_actions"])
    (result,) = report.results
    assert result.status == "fail" and "complex NaN: no info['action_error']" in result.detail


class _PrintsTheActionEnv(broken_envs.BoxCrashEnv):
    """Discrete actions; its error message prints the action (str() of a huge int raises)."""

    def __init__(self):
        super().__init__()
        self.action_space = spaces.Discrete(3)

    def step(self, action):
        ok = isinstance(action, (int, np.integer)) and 0 <= action < 3
        info = {} if ok else {"action_error": f"{action} is not 0, 1 or 2"}
        observation, reward, terminated, truncated, end = super().step(np.zeros(2))
        return observation, reward, terminated, truncated, {**end, **info}


def test_an_integer_of_5000_digits_is_a_malformed_case():
    report = check_env(_PrintsTheActionEnv, steps=20, checks=["malformed_actions"])
    (result,) = report.results
    assert result.status == "fail" and "integer of 5000 digits: step raised" in result.detail


def _surrogate_game():
    """A two-player parallel game whose step observations hold a lone surrogate."""
    from pettingzoo import ParallelEnv

    from verigym.core import UnicodeText

    class SurrogateGame(ParallelEnv):
        metadata = {"name": "surrogate_game_v0", "is_parallelizable": True}
        possible_agents = ["a", "b"]

        def __init__(self):
            self.agents = []
            self._turn = 0

        def observation_space(self, agent):
            return UnicodeText(64)

        def action_space(self, agent):
            return broken_envs.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            self.agents, self._turn = list(self.possible_agents), 0
            return {a: "start" for a in self.agents}, {a: {} for a in self.agents}

        def step(self, actions):
            self._turn += 1
            done = self._turn >= 3
            agents = list(self.agents)
            infos = {a: {"success": False, "score": 0.0} if done else {} for a in agents}
            if done:
                self.agents = []
            return (
                {a: f"turn {self._turn} \udcff" for a in agents},
                dict.fromkeys(agents, 0.0),
                dict.fromkeys(agents, done),
                dict.fromkeys(agents, False),
                infos,
            )

    return SurrogateGame()


def test_a_lone_surrogate_in_a_multiagent_game_is_named_in_one_line():
    from verigym.checker_multiagent import check_multiagent_env

    report = check_multiagent_env(_surrogate_game, steps=6, checks=["determinism"])
    detail = {r.name: r.detail for r in report.failures}["determinism"]
    assert detail == (
        "a's observation at step 1 holds a lone surrogate '\\udcff' at index 7: "
        "it cannot be encoded to UTF-8"
    ), detail
