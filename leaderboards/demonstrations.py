"""Demonstrations as chat SFT data: successful episodes, as an LLM agent would have played them.

An SFT record is one successful episode on a *training* seed (below
:data:`~verigym.leaderboards.suite.TRAIN_SEED_END`; evaluation seeds are refused, so a model is never
fine-tuned on the episodes it is ranked on), in the OpenAI chat layout that TRL's ``SFTTrainer`` and
:mod:`verigym.agents.llm.sft` read, in one of two protocols (:data:`PROTOCOLS`; one per record, one
per export, named in its ``protocol`` field):

* ``"text"`` (the default): the episode as the agent saw it through the text view, every message
  ``{"role", "content"}`` text: the instructions (with the tool schemas and the ``<tool_call>`` /
  ``<answer>`` reply format) as the system message, each observation and tool result as a user
  message, each reply as the text the env parsed (a tool call as its Hermes ``<tool_call>`` block);
  ``tools`` is empty (the schemas are in the system text once). This is what ``verigym train sft``
  trains on and what any chat template renders faithfully (SmolLM2's own included)::

    {"messages": [
        {"role": "system", "content": <the text view's instructions>},
        {"role": "user", "content": <first observation>},
        {"role": "assistant", "content": "<tool_call>{\\"name\\": \\"calculate\\", ...}</tool_call>"},
        {"role": "user", "content": <the env's answer>},
        {"role": "assistant", "content": "<answer>5</answer>"}],
     "tools": [], "protocol": "text", "env_id", "seed", "agent", "score", "length"}

* ``"tools"``: native tool calling, for a tool-aware chat template (TRL's ``qwen2_5``): calls are
  ``tool_calls`` entries whose ``arguments`` is a mapping (as Hugging Face templates expect: they
  serialise it), results are ``tool`` messages, the schemas are in ``tools`` only, and the system
  text is the task without the text protocol
  (:func:`~verigym.agents.llm.trl_adapter.native_tool_instructions`, as under TRL's
  ``environment_factory``); the final ``<answer>X</answer>`` reply is a call of the ``answer`` tool
  (:data:`ANSWER_TOOL`, appended to ``tools``)::

    {"messages": [
        {"role": "system", "content": <the task; call one tool per turn, answer with the answer tool>},
        {"role": "user", "content": <first observation>},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "calculate", "arguments": {"expression": "2 + 3"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": <the env's answer>},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_2", "type": "function",
            "function": {"name": "answer", "arguments": {"answer": "5"}}}]}],
     "tools": [<the env's OpenAI function schemas>, ANSWER_TOOL], "protocol": "tools", ...}

  An env without tools gives the same plain records in both protocols. An episode the tool-calling
  protocol cannot express (instructions that only describe the text protocol, e.g.
  FunctionCalling's; a reply with several calls; a tool named ``answer``) is not exported in it.

What the agent saw is the env's text view (:class:`~verigym.wrappers.LanguageWrapper`): its
instructions, observations and, after a malformed reply, the feedback
(:func:`~verigym.agents.llm.chat.feedback_text`). An action is the text the env parses: a text
action as it was, any other action through the env's ``action_text`` (a GUI click becomes
``click 3``). :func:`demonstration_messages` writes an episode with native ``tool_calls``
(arguments as JSON text, OpenAI's wire form) for a reply that is exactly one Hermes tool call;
:func:`protocol_record` turns that into one of the two protocols above.

Two sources:

* :func:`play_demonstrations` plays an agent (the env's scripted ``oracle``) on training seeds,
  in-process, and keeps its successful episodes (``verigym export --format sft --play oracle``);
* :func:`stored_demonstrations` converts stored episodes of the results store (``verigym export
  --format sft``), refusing rows on evaluation seeds, failed rows and rows without a trajectory.

Both drop every episode whose *task* is an evaluation task, whatever its seed: two seeds can draw
the same task (GuessNumber has 100 secrets), so the split is made on the task's content hash
(:class:`~verigym.leaderboards.heldout.HeldOutTasks`, over every shipped suite's evaluation seeds;
docs/design.md, "Training and evaluation").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from verigym.leaderboards.store import safe_text
from verigym.leaderboards.suite import TRAIN_SEED_END
from verigym.toolcalls import message_to_text, messages_to_text, openai_tool_call, text_to_message

__all__ = [
    "ANSWER_TOOL",
    "EVALUATION_TASK",
    "MAX_EPISODE_STEPS",
    "PROTOCOLS",
    "demonstration_messages",
    "play_demonstrations",
    "protocol_record",
    "stored_demonstrations",
    "tool_call_of",
]

PROTOCOLS = ("text", "tools")
"""The record protocols (see the module docstring): the text view's, or native tool calling."""

ANSWER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "answer",
        "description": "Give your final answer; the episode ends and is scored.",
        "parameters": {
            "type": "object",
            "properties": {
                "answer": {
                    "type": "string",
                    "description": "the final answer, in the format the task asks for.",
                }
            },
            "required": ["answer"],
        },
    },
}
"""The final-answer tool of the ``"tools"`` protocol: the ``answer`` method TRL's
``environment_factory`` offers (:mod:`verigym.agents.llm.trl_adapter`), which plays
``<answer>{answer}</answer>``."""

EVALUATION_TASK = "the task is an evaluation task of a suite (another seed draws the same one); never training data"
"""Why an episode whose task an evaluation seed also poses is not exported."""

MAX_EPISODE_STEPS = 200
"""Episodes longer than this are not turned into demonstrations (a chat of that length does not fit
a small model's context)."""


def tool_call_of(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` when ``text`` is exactly one Hermes tool call, else None.

    Exactly: the reply, stripped, is the :func:`~verigym.toolcalls.message_to_text` rendering of
    the one call :func:`~verigym.toolcalls.text_to_message` reads in it, so the record turns back
    into the text the agent wrote (no text beside the call, no second call, no other layout).

    Args:
        text: a reply, e.g. ``<tool_call>{"name": "calculate", "arguments": {"expression": "1+2"}}</tool_call>``.
    """
    content, calls = text_to_message(text)
    if content is not None or len(calls) != 1:
        return None
    if message_to_text({"tool_calls": calls}) != text.strip():
        return None
    function = calls[0]["function"]
    return function["name"], json.loads(function["arguments"])


def demonstration_messages(
    instructions: str,
    observations: Sequence[str],
    actions: Sequence[str],
) -> list[dict[str, Any]]:
    """An episode as OpenAI chat messages (see the module docstring).

    Args:
        instructions: the text view's instructions (the system message; left out when empty).
        observations: what the agent was shown before each action: ``len(actions)`` user texts
            (the first observation, then each step's feedback).
        actions: the agent's replies as text.

    Returns:
        the messages, ending with the last assistant message.

    Raises:
        ValueError: ``observations`` and ``actions`` differ in length.
    """
    if len(observations) != len(actions):
        raise ValueError(f"{len(observations)} observations for {len(actions)} actions")
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": safe_text(instructions)})
    pending: str | None = None  # the id of the tool call the next observation answers
    for turn, (observation, action) in enumerate(zip(observations, actions), 1):
        if pending is not None:
            messages.append(
                {"role": "tool", "tool_call_id": pending, "content": safe_text(observation)}
            )
        else:
            messages.append({"role": "user", "content": safe_text(observation)})
        call = tool_call_of(action)
        if call is None:
            messages.append({"role": "assistant", "content": safe_text(action)})
            pending = None
        else:
            pending = f"call_{turn}"
            entry = {**openai_tool_call(*call), "id": pending}
            messages.append({"role": "assistant", "content": "", "tool_calls": [entry]})
    return messages


def _action_text(env: Any, action: Any) -> str:
    """The text the text view parses for ``action`` (text as it is; else the env's ``action_text``)."""
    if isinstance(action, str):
        return action
    inner = getattr(env, "unwrapped", env)
    to_text = getattr(inner, "action_text", None)
    if callable(to_text):
        return str(to_text(action))
    return str(env.action_text(action))  # LanguageWrapper: generic spaces


def _answer_of(text: str) -> str | None:
    """The answer when ``text`` is exactly one ``<answer>...</answer>`` (stripped), else None."""
    stripped = text.strip()
    if not (stripped.startswith("<answer>") and stripped.endswith("</answer>")):
        return None
    inner = stripped[len("<answer>") : -len("</answer>")]
    return None if "<answer>" in inner or "</answer>" in inner else inner


def _native_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | str:
    """The ``"tools"`` protocol of :func:`demonstration_messages` output: ``(messages, tools)``,
    or why the episode cannot be written in it."""
    from verigym.agents.llm.trl_adapter import native_tool_instructions

    names = [t.get("function", {}).get("name") for t in tools]
    if "answer" in names:
        return "a tool is named 'answer', the tool-calling protocol's final-answer tool"
    out: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        if message["role"] == "system":
            message["content"] = native_tool_instructions(message["content"])
            if "<tool_call>" in message["content"]:
                return "its instructions describe the text protocol only (<tool_call> blocks)"
        elif message["role"] == "assistant" and message.get("tool_calls"):
            message["tool_calls"] = [
                {
                    **call,
                    "function": {
                        **call["function"],
                        "arguments": json.loads(call["function"]["arguments"]),
                    },
                }
                for call in message["tool_calls"]
            ]
        elif message["role"] == "assistant":
            if "<tool_call>" in message["content"]:
                return "a reply holds tool calls that are not exactly one call"
            answer = _answer_of(message["content"])
            if answer is None and "<answer>" in message["content"].lower():
                return "a reply holds text beside its <answer> (the answer tool takes the answer alone)"
            if answer is not None:
                call_id = f"call_{sum(1 for m in out if m['role'] == 'assistant') + 1}"
                message = {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "answer", "arguments": {"answer": answer}},
                        }
                    ],
                }
        out.append(message)
    return out, [dict(t) for t in tools] + [ANSWER_TOOL]


def protocol_record(
    env_id: str,
    seed: int,
    agent: str,
    score: float,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    protocol: str = "text",
) -> dict[str, Any] | str:
    """An SFT record of an episode in ``protocol`` (see the module docstring).

    Args:
        env_id, seed, agent, score: the episode's provenance and score.
        messages: :func:`demonstration_messages` output (native ``tool_calls``, JSON-text arguments).
        tools: the env's OpenAI function schemas (``info["tools"]``).
        protocol: ``"text"`` or ``"tools"``.

    Returns:
        the record, or (``"tools"`` only) a one-line reason why the episode cannot be written in it.

    Raises:
        ValueError: an unknown protocol.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    uses_tools = bool(tools) or any(m.get("tool_calls") for m in messages)
    if protocol == "text" or not uses_tools:
        messages, tools = messages_to_text(messages), []
    else:
        native = _native_messages(messages, tools)
        if isinstance(native, str):
            return f"not written in the tool-calling protocol: {native}"
        messages, tools = native
    return {
        "messages": messages,
        "tools": tools,
        "protocol": protocol,
        "env_id": env_id,
        "seed": int(seed),
        "agent": agent,
        "score": float(score),
        "length": sum(1 for m in messages if m["role"] == "assistant"),
    }


def play_demonstrations(
    env_ids: Sequence[str],
    seeds: Iterable[int],
    *,
    agent: str = "oracle",
    make_env: Callable[[str], Any] | None = None,
    refused: list[str] | None = None,
    held_out: Any = None,
    protocol: str = "text",
) -> Iterator[dict[str, Any]]:
    """Play ``agent`` on every env and training seed through the text view; yield the successes as SFT records.

    The agent acts on the env itself (the oracle reads its state) and each action is replayed to the
    text view as its text (:func:`_action_text`), so a demonstration is only kept when the text the
    model will learn to write is what solved the episode.

    Args:
        env_ids: registered env ids.
        seeds: reset seeds, each in ``[0, TRAIN_SEED_END)``.
        agent: ``"oracle"`` (the env's scripted solver); the only agent played in-process.
        make_env: ``env_id -> text-view env`` (default: the runner's ``make_env(env_id, {}, True)``).
        refused: when given, ``"env seed: why"`` of each episode not kept (failed, too long, an
            error, an evaluation task).
        held_out: a :class:`~verigym.leaderboards.heldout.HeldOutTasks` (default: one over every
            shipped suite); an episode whose task is one of its evaluation tasks is not played.
        protocol: the records' protocol, ``"text"`` or ``"tools"`` (:data:`PROTOCOLS`); an
            episode the protocol cannot express goes to ``refused``.

    Raises:
        ValueError: a seed outside the training range, an agent other than ``oracle``, or an
            unknown protocol.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if agent != "oracle":
        raise ValueError(
            f"only the oracle is played in-process, got {agent!r}; export stored episodes instead"
        )
    seeds = [int(s) for s in seeds]
    bad = [s for s in seeds if not 0 <= s < TRAIN_SEED_END]
    if bad:
        raise ValueError(
            f"seeds {bad[:5]} are not training seeds [0, {TRAIN_SEED_END}); demonstrations never use evaluation seeds"
        )
    if held_out is None:
        from verigym.leaderboards.heldout import HeldOutTasks

        held_out = HeldOutTasks()
    if make_env is None:
        from verigym.leaderboards.episode import make_env as runner_make_env

        def make_env(env_id: str) -> Any:
            return runner_make_env(env_id, {}, True)

    for env_id in env_ids:
        env = make_env(env_id)
        try:
            oracle = getattr(env.unwrapped, "oracle_action", None)
            if not callable(oracle):
                raise ValueError(f"{env_id} has no oracle_action(); it has no demonstrations")
            for seed in seeds:
                try:
                    if held_out.is_evaluation_task(env_id, env, seed):
                        record = EVALUATION_TASK
                    else:
                        record = _play_one(env, env_id, seed, oracle, protocol)
                except Exception as exc:  # noqa: BLE001 - one bad episode is reported, the rest go on
                    record = f"{type(exc).__name__}: {exc}"
                if isinstance(record, dict):
                    yield record
                elif refused is not None:
                    refused.append(f"{env_id} seed {seed}: {safe_text(record)[:300]}")
        finally:
            env.close()


def _play_one(
    env: Any, env_id: str, seed: int, oracle: Callable[[], Any], protocol: str
) -> dict | str:
    from verigym.agents.llm.chat import feedback_text

    observation, info = env.reset(seed=seed)
    instructions = str(info.get("instructions", ""))
    tools = list(info.get("tools") or [])
    shown, actions = [str(observation)], []
    while True:
        action = _action_text(env, oracle())
        actions.append(action)
        observation, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        if len(actions) >= MAX_EPISODE_STEPS:
            return f"longer than {MAX_EPISODE_STEPS} steps"
        shown.append(feedback_text(observation, info))
    if not info.get("success"):
        return f"not solved (score {info.get('score')})"
    messages = demonstration_messages(instructions, shown, actions)
    score = float(info.get("score", 1.0))
    return protocol_record(env_id, seed, "oracle", score, messages, tools, protocol)


def stored_demonstrations(
    store: Any,
    rows: Iterable[Any],
    refused: list[tuple[Any, str]] | None = None,
    *,
    make_env: Callable[[str, dict[str, Any]], Any] | None = None,
    held_out: Any = None,
    protocol: str = "text",
) -> Iterator[dict[str, Any]]:
    """SFT records of stored successful episodes on training seeds.

    A row is refused (appended to ``refused`` as ``(row, why)``, or raised without it) when its
    seed is an evaluation seed (``>= TRAIN_SEED_END``), it did not succeed, it has no trajectory, or
    its trajectory is not bound to it, or its kwargs are refused
    (:func:`~verigym.leaderboards.trajectories.bound_trajectory` with ``rebuild``: the env is built
    from the row's own kwargs after :func:`verigym.registration.untrusted_kwargs`, never from the
    trajectory's header). The instructions and tools are those of the text view built at the row's seed
    (what an LLM agent is shown), the actions are the recorded ones as text, the observations the
    recorded text views.

    Args:
        store: a :class:`~verigym.leaderboards.store.ResultsStore`.
        rows: the rows.
        refused: see above.
        make_env: ``(env_id, env_kwargs) -> text-view env`` (default: the runner's).
        held_out: a :class:`~verigym.leaderboards.heldout.HeldOutTasks` (default: one over every
            shipped suite); a row whose task is one of its evaluation tasks is refused.
        protocol: the records' protocol (:data:`PROTOCOLS`); a row the protocol cannot express
            is refused.

    Raises:
        ValueError: a row is refused and ``refused`` is None, or an unknown protocol.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    from verigym.agents.llm.chat import feedback_text
    from verigym.leaderboards.trajectories import bound_trajectory, decode_value

    if held_out is None:
        from verigym.leaderboards.heldout import HeldOutTasks

        held_out = HeldOutTasks()
    if make_env is None:
        from verigym.leaderboards.episode import make_env as runner_make_env

        def make_env(env_id: str, env_kwargs: dict[str, Any]) -> Any:
            return runner_make_env(env_id, env_kwargs, True)

    envs: dict[str, Any] = {}
    try:
        for row in rows:
            try:
                if not 0 <= int(row.seed) < TRAIN_SEED_END:
                    raise ValueError(
                        f"seed {row.seed} is an evaluation seed; demonstrations use training seeds only (< {TRAIN_SEED_END})"
                    )
                if row.status != "ok" or not row.success:
                    raise ValueError("the episode did not succeed")
                # the row's own env id, seed and kwargs (through untrusted_kwargs), never the trajectory's
                doc = bound_trajectory(store, row, rebuild=True)
                if doc is None:
                    raise ValueError("no stored trajectory")
                steps = doc["steps"]
                if not steps or len(steps) > MAX_EPISODE_STEPS:
                    raise ValueError(f"{len(steps)} steps (1 to {MAX_EPISODE_STEPS} are exported)")
                key = json.dumps([doc["env_id"], doc["env_kwargs"]], sort_keys=True)
                if key not in envs:
                    envs[key] = make_env(doc["env_id"], decode_value(doc["env_kwargs"]))
                env = envs[key]
                if held_out.is_evaluation_task(row.env_id, env, int(doc["seed"])):
                    raise ValueError(EVALUATION_TASK)
                _, info = env.reset(seed=int(doc["seed"]))
                shown = [_shown(doc["reset"])] + [
                    feedback_text(_shown(step), _plain_info(step.get("info")))
                    for step in steps[:-1]
                ]
                actions = [_action_text(env, decode_value(step["action"])) for step in steps]
                messages = demonstration_messages(str(info.get("instructions", "")), shown, actions)
                record = protocol_record(
                    row.env_id,
                    row.seed,
                    row.agent_spec,
                    row.score,
                    messages,
                    list(info.get("tools") or []),
                    protocol,
                )
                if isinstance(record, str):
                    raise ValueError(record)
            except (ValueError, TypeError, KeyError, RecursionError) as exc:
                why = f"{row.agent_spec} {row.env_id} seed {row.seed}: {safe_text(str(exc))[:300]}"
                if refused is None:
                    raise ValueError(why) from None
                refused.append((row, why))
                continue
            yield record
    finally:
        for env in envs.values():
            env.close()


def _shown(entry: Mapping[str, Any] | None) -> str:
    if not entry:
        return ""
    if isinstance(entry.get("text"), str):
        return entry["text"]
    observation = entry.get("observation")
    return observation if isinstance(observation, str) else json.dumps(observation)[:2000]


def _plain_info(info: Any) -> dict[str, Any]:
    return {"action_error": info.get("action_error")} if isinstance(info, dict) else {}
