"""``ToolEnv``: the multi-turn loop shared by the tool environments (template method).

A subclass generates a task (:meth:`ToolEnv._generate`), offers tools (:meth:`ToolEnv._tools`,
:meth:`ToolEnv._call_tool`) and verifies a final answer (:meth:`ToolEnv._verify`); the base class
owns parsing, step limits, penalties, tool accounting and the episode-end verdict.

``info`` keys on every step: ``turn``, ``tool_calls`` (calls so far this episode), ``tool_cost``
(sum of the called tools' cost units), ``tool_time_s`` (wall-clock seconds spent in tools) and,
on a tool step, ``tool`` (its name). The step that ends the episode adds ``success`` and ``score``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from verigym.core import ActionParseError, EpisodeGuard, UnicodeText, action_error_info, episode_end
from verigym.kwargs_policy import FloatRange, IntRange, client, never, operator_only
from verigym.render_modes import accept_render_mode
from verigym.toolcalls import FinalAnswer, Tool, ToolCall, hermes_call, parse_reply
from verigym.validation import check_int, check_number

__all__ = ["ToolEnv", "tool_call_text"]

_TARGET_NAME = re.compile(r"gold|reference|answer|expected|solution|target", re.I)
"""Attribute names of a tool task's hidden target (:meth:`ToolEnv.task_fingerprint`)."""

OBSERVATION_LENGTH = 1 << 16
"""Largest observation, characters (tool output is truncated before it)."""


def tool_call_text(name: str, **arguments: Any) -> str:
    """The canonical text of a tool call, as the oracles and the docs write it
    (:func:`verigym.toolcalls.hermes_call` with keyword arguments)."""
    return hermes_call(name, arguments)


class ToolEnv(EpisodeGuard, gym.Env[str, str]):
    """Base class: a question, tools to call, a verified final answer.

    Subclasses set ``metadata`` (with ``"family": "tool"``) and implement :meth:`_generate`,
    :meth:`_tools`, :meth:`_call_tool`, :meth:`_verify`, :meth:`_task_instructions` and
    ``oracle_action``. After the step that ends the episode, ``step`` raises
    :class:`verigym.core.EpisodeEndedError` until ``reset`` (:class:`verigym.core.EpisodeGuard`).

    Args (keyword-only, shared by every tool env):
        max_turns: replies per episode; the last one without an answer truncates (score 0).
        invalid_action_reward: reward for a malformed reply or a bad tool call.
        max_action_length: longest reply read, characters (default 8192).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "invalid_action_reward": client(FloatRange(-1.0, 0.0)),
        "max_turns": operator_only(IntRange(1, 64), why="raises the cost of an episode"),
        "max_action_length": operator_only(
            IntRange(16, 1 << 20), why="raises the size of what the env executes"
        ),
        "unsafe": never("it runs agent code outside the sandbox, as the server's user"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        max_turns: int = 8,
        invalid_action_reward: float = -0.1,
        max_action_length: int = 8192,
        render_mode: str | None = None,
    ):
        self.max_turns = check_int("max_turns", max_turns, 1)
        self.max_action_length = check_int("max_action_length", max_action_length, 16)
        self.invalid_action_reward = check_number("invalid_action_reward", invalid_action_reward)
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_space = UnicodeText(OBSERVATION_LENGTH)
        self.action_space = UnicodeText(max_action_length)
        self._turn = 0
        self._tool_calls = 0
        self._tool_cost = 0.0
        self._tool_time = 0.0
        self._question = ""
        self._last = ""

    # -- to implement ------------------------------------------------------------------------------
    def _generate(self) -> str:
        """Draw a task from ``self.np_random``; return the question shown to the agent."""
        raise NotImplementedError

    def _tools(self) -> Sequence[Tool]:
        """The tools on offer in the current episode."""
        raise NotImplementedError

    def _call_tool(self, call: ToolCall) -> str:
        """Run a schema-checked call and return its result text.

        Raises:
            ActionParseError: the call is well-formed but cannot be carried out (reported to the
                agent as an action error).
        """
        raise NotImplementedError

    def _verify(self, answer: str) -> tuple[bool, float]:
        """(success, score in [0, 1]) of a final answer; never trusts text the agent wrote."""
        raise NotImplementedError

    def _task_instructions(self) -> str:
        """The task-specific part of the instructions (what to find, the answer format)."""
        raise NotImplementedError

    def task_fingerprint(self) -> dict[str, Any]:
        """The hidden target of the drawn task: the plain attributes named for it (``*gold*``,
        ``*reference*``, ``*answer*``, ``*expected*``, ``*solution*``, ``*target*``: the gold
        answer, SQL or call, the reference solution), else every plain attribute but the
        per-episode counters (:func:`verigym.task_split.plain_state`). A database's rows or a
        test's random inputs are left out: a task with the same question and the same answer is
        the same task to an agent that remembered the answer."""
        from verigym.task_split import plain_state

        state = plain_state(
            self, exclude=("_turn", "_tool_calls", "_tool_cost", "_tool_time", "_last")
        )
        named = {k: v for k, v in state.items() if _TARGET_NAME.search(k)}
        return named or state

    # -- TextInterface -------------------------------------------------------------------------------
    def instructions(self) -> str:
        schemas = "\n".join(json.dumps(tool.schema()) for tool in self._tools())
        return (
            f"{self._task_instructions()}\n\nTools (OpenAI function-calling schemas):\n{schemas}\n\n"
            'Each turn, reply with exactly one tool call, <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>, '
            f"or with your final answer, <answer>...</answer>. You have {self.max_turns} replies; "
            "the episode ends at your answer."
        )

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> ToolCall | FinalAnswer:
        """Parse a reply into a checked :class:`ToolCall` or a :class:`FinalAnswer`.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: malformed call, unknown tool, bad arguments, or neither call nor answer.
        """
        return parse_reply(text, self._tools(), max_length=self.max_action_length)

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._turn = 0
        self._tool_calls = 0
        self._tool_cost = 0.0
        self._tool_time = 0.0
        self._question = self._generate()
        self._last = f"{self._question}\n\n(Turn 0/{self.max_turns}.)"
        info = self._info()
        info["instructions"] = (
            self.instructions()
        )  # docs/design.md 2: rules and tool schemas in the reset info
        info["tools"] = [
            tool.schema() for tool in self._tools()
        ]  # OpenAI `tools`, for native tool calling
        return self._last, info

    def _info(self) -> dict[str, Any]:
        return {
            "turn": self._turn,
            "tool_calls": self._tool_calls,
            "tool_cost": self._tool_cost,
            "tool_time_s": self._tool_time,
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        reward, terminated = 0.0, False
        error: str | None = None
        tool_name: str | None = None
        try:
            parsed = self.parse_action(action)
            if isinstance(parsed, FinalAnswer):
                success, score = self._verify(parsed.text)
                terminated = True
                reward = float(score)
                body = f"Your answer was recorded. {'Correct.' if success else 'Not correct.'}"
            else:
                tool_name = parsed.name
                tool = {t.name: t for t in self._tools()}[parsed.name]
                start = time.monotonic()
                try:
                    result = self._call_tool(parsed)
                finally:
                    self._tool_calls += 1
                    self._tool_cost += tool.cost
                    self._tool_time += time.monotonic() - start
                body = f"[{parsed.name} result]\n{result}"
        except ActionParseError as exc:
            error = str(exc)
            reward = self.invalid_action_reward
            body = f"Error: {exc}"
        truncated = not terminated and self._turn >= self.max_turns
        info = self._info()
        if tool_name is not None:
            info["tool"] = tool_name
        if error is not None:
            action_error_info(error, info)
        if terminated:
            episode_end(info, success=success, score=score)
        elif truncated:
            episode_end(info, success=False, score=0.0)
            body += "\nNo replies left; the episode ends without an answer."
        limit = OBSERVATION_LENGTH - 64
        if len(body) > limit:
            body = body[: limit - 20] + "\n...[truncated]"
        self._last = f"{body}\n(Turn {self._turn}/{self.max_turns}.)"
        return self._last, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
