"""verigym tasks under TRL's ``GRPOTrainer``: multi-turn environments, or a prompt dataset and a
verifier reward function.

**Multi-turn** (TRL >= 1.x, ``GRPOTrainer(environment_factory=...)``):
:func:`environment_factory` turns any verigym env id into the zero-argument factory TRL expects.
Each instance's public methods are the env's tools (a tool env's own tools plus ``answer``; a
text game gets one generic ``act`` tool), ``reset(**row)`` starts an episode and returns its
instructions and first observation, and ``get_reward()`` is the verifier's score of the episode
(0 while it is unfinished). One protocol per path: TRL offers the tools natively, so a tool env's
reset text drops the text protocol of its instructions (the ``<tool_call>`` format, the schema
list, ``<answer>`` tags; :func:`native_tool_instructions`) and says to call the tools and the
``answer`` tool instead. TRL plays the tool calls turn by turn, so the whole episode is trained
on, not only the first reply::

    import trl
    from verigym.agents.llm.trl_adapter import environment_factory

    trainer = trl.GRPOTrainer(model="path/to/model", environment_factory=environment_factory("verigym/Calculator-v0"),
                              args=trl.GRPOConfig(output_dir="runs/trl", max_steps=100))

**Single-turn**, any TRL version:

For users who outgrow one machine: TRL (with accelerate/DeepSpeed/vLLM) runs the distributed
training, verigym supplies the tasks and the verdicts. Each dataset row is one task -- the
opening chat messages of ``env.reset(seed)`` plus the seed -- and :class:`VerigymReward` replays
that reset, steps the env with the model's completion and returns the verifier's score. This is
exact for single-turn envs (the first reply ends the episode); for a multi-turn env only the first
reply is scored (an episode still running scores ``unfinished_reward``) -- use
:class:`~verigym.agents.llm.grpo.GRPOTrainer` for multi-turn training.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from verigym.agents.llm.trl_adapter import VerigymReward, verigym_dataset

    tasks = ["verigym/GuessNumber-v0"]
    trainer = GRPOTrainer(
        model="path/to/model", reward_funcs=VerigymReward(tasks),
        train_dataset=verigym_dataset(tasks, seeds=range(1000)), args=GRPOConfig(output_dir="runs/trl"),
    )
    trainer.train()

Needs ``pip install "verigym[trl]"``.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from verigym.agents.llm.chat import initial_messages
from verigym.agents.llm.grpo import Task, make_env
from verigym.core import SCORE
from verigym.toolcalls import hermes_call

__all__ = ["VerigymReward", "environment_factory", "native_tool_instructions", "verigym_dataset"]

SEED_COLUMN = "verigym_seed"
TASK_COLUMN = "verigym_task"


def _as_list(tasks: Task | Sequence[Task]) -> list[Task]:
    return list(tasks) if isinstance(tasks, (list, tuple)) else [tasks]


def verigym_dataset(
    tasks: Task | Sequence[Task], seeds: Iterable[int], *, tokenizer: Any = None
) -> Any:
    """A ``datasets.Dataset`` of prompts, one row per (task, seed).

    Columns: ``prompt`` (list of chat messages: the env's instructions and first observation),
    ``verigym_seed`` (int) and ``verigym_task`` (int, index into ``tasks``).

    Args:
        tasks: env ids, env factories or envs (:data:`~verigym.agents.llm.grpo.Task`).
        seeds: reset seeds; every task gets every seed, except a seed whose task is an evaluation
            task of a shipped suite (:class:`~verigym.leaderboards.heldout.HeldOutTasks`: two
            seeds can draw the same task), which is left out.
        tokenizer: the model's tokenizer. When it has no chat template, prompts are plain text in
            the ``System:/User:/Assistant:`` layout of :class:`~verigym.agents.llm.chat.ChatFormat`
            (what :class:`~verigym.agents.llm.grpo.GRPOTrainer` does), since TRL refuses
            conversational prompts without a template.
    """
    from datasets import Dataset

    from verigym.leaderboards.heldout import HeldOutTasks

    rows: dict[str, list[Any]] = {"prompt": [], SEED_COLUMN: [], TASK_COLUMN: []}
    seeds = list(seeds)
    held_out = HeldOutTasks()
    for index, task in enumerate(_as_list(tasks)):
        env = make_env(task)
        env_id = getattr(getattr(env.unwrapped, "spec", None), "id", None)
        try:
            for seed in seeds:
                if env_id is not None and held_out.is_evaluation_task(env_id, env, int(seed)):
                    continue  # the same task as an evaluation seed's: never training data
                observation, info = env.reset(seed=int(seed))
                rows["prompt"].append(
                    initial_messages(str(info.get("instructions", "")), str(observation))
                )
                if tokenizer is not None and not getattr(tokenizer, "chat_template", None):
                    # TRL applies a chat template to conversational prompts and raises without one:
                    # give it the plain layout verigym's own trainer uses (ChatFormat) as text
                    from verigym.agents.llm.chat import ChatFormat

                    rows["prompt"][-1] = ChatFormat(tokenizer).render(rows["prompt"][-1])
                rows[SEED_COLUMN].append(int(seed))
                rows[TASK_COLUMN].append(index)
        finally:
            env.close()
    return Dataset.from_dict(rows)


class VerigymReward:
    """A TRL reward function: the verifier's verdict on each completion.

    Called by TRL as ``reward(prompts=..., completions=..., verigym_seed=[...], verigym_task=[...])``
    (dataset columns arrive as keyword lists). Completions may be strings or lists of chat messages.

    Args:
        tasks: the same tasks, in the same order, as given to :func:`verigym_dataset`.
        reward: ``"score"`` (``info["score"]`` of the ending step) or ``"return"`` (the step reward).
        unfinished_reward: reward when the reply does not end the episode (multi-turn envs).
    """

    def __init__(
        self, tasks: Task | Sequence[Task], *, reward: str = "score", unfinished_reward: float = 0.0
    ):
        if reward not in ("score", "return"):
            raise ValueError(f"reward must be 'score' or 'return', got {reward!r}")
        self.tasks = _as_list(tasks)
        self.reward = reward
        self.unfinished_reward = float(unfinished_reward)
        self.__name__ = "verigym_" + reward
        self._envs: dict[int, Any] = {}

    def _env(self, task: int) -> Any:
        if task not in self._envs:
            self._envs[task] = make_env(self.tasks[task])
        return self._envs[task]

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float]:
        seeds = columns.get(SEED_COLUMN)
        if seeds is None:
            raise KeyError(
                f"the dataset has no {SEED_COLUMN!r} column; build it with verigym_dataset()"
            )
        tasks = columns.get(TASK_COLUMN) or [0] * len(completions)
        rewards = []
        for completion, seed, task in zip(completions, seeds, tasks):
            text = (
                completion
                if isinstance(completion, str)
                else "".join(m.get("content", "") for m in completion)
            )
            env = self._env(int(task))
            env.reset(seed=int(seed))
            _, step_reward, terminated, truncated, info = env.step(text)
            if not (terminated or truncated):
                rewards.append(self.unfinished_reward)
            elif self.reward == "score":
                rewards.append(float(info.get(SCORE, 0.0)))
            else:
                rewards.append(float(step_reward))
        return rewards

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


# -- multi-turn: verigym envs as TRL environments ------------------------------------------------------
_PY_TYPES = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _tool_method(name: str, schema: dict[str, Any]) -> Callable[..., str]:
    """A method named ``name`` whose signature and Google-style docstring spell the tool's JSON schema
    (TRL builds the tool description from them), and which plays the call in the episode."""
    function = schema.get("function", schema)
    parameters = function.get("parameters") or {}
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])

    def method(self: Any, **arguments: Any) -> str:
        return self._step(hermes_call(name, arguments))

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = [(function.get("description") or name).strip(), "", "Args:"]
    for arg, spec in properties.items():
        kind = _PY_TYPES.get(spec.get("type", "string"), str)
        default = inspect.Parameter.empty if arg in required else spec.get("default")
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        annotations[arg] = kind
        lines.append(f"    {arg}: {spec.get('description') or arg}")
    if not properties:
        lines = lines[:1]
    lines += ["", "Returns:", "    The tool's result."]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    return method


_TEXT_PROTOCOL = re.compile(
    r"\n\nTools \(OpenAI function-calling schemas\):\n.*?\n\nEach turn, reply with exactly one "
    r"tool call, .*? You have (\d+) replies; the episode ends at your answer\.",
    re.DOTALL,
)
_ANSWER_TAGS = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def native_tool_instructions(instructions: str) -> str:
    """A tool env's instructions for a model that is offered the tools natively (TRL's
    ``environment_factory``, an OpenAI ``tools`` request): the text protocol -- the schema list,
    the ``<tool_call>{...}</tool_call>`` reply format, ``<answer>...</answer>`` tags -- is replaced
    by "call one tool per turn; give the final answer with the ``answer`` tool".

    Args:
        instructions: the env's ``info["instructions"]`` (:class:`verigym.envs.tool.base` layout).

    Returns:
        the rewritten text; instructions without the tool envs' protocol paragraph come back as
        they are.
    """
    match = _TEXT_PROTOCOL.search(instructions)
    if match is None:
        return instructions
    rule = (
        "\n\nEach turn, call exactly one of the tools, or give your final answer with the answer "
        f"tool (the answer alone). You have {match.group(1)} replies; the episode ends at your answer."
    )
    task = _ANSWER_TAGS.sub(r"\1", instructions[: match.start()])
    return task + rule + instructions[match.end() :]


class _VerigymEnvironment:
    """Base of the generated TRL environment classes (see :func:`environment_factory`)."""

    _task: Any = None
    _unfinished_reward = 0.0
    _native_tools = False

    def __init__(self) -> None:
        self._env = make_env(self._task)
        self._seeds = itertools.count(self._seed_start)
        self._done = False
        self._score = 0.0

    def reset(self, **row: Any) -> str:
        """Start an episode (seed: the row's ``verigym_seed``, else the next training seed); returns
        the instructions and the first observation, which TRL appends to the prompt."""
        seed = row.get(SEED_COLUMN)
        observation, info = self._env.reset(
            seed=int(seed) if seed is not None else next(self._seeds)
        )
        self._done, self._score = False, 0.0
        instructions = str(info.get("instructions", ""))
        if self._native_tools:
            instructions = native_tool_instructions(instructions)
        return f"{instructions}\n\n{observation}" if instructions else str(observation)

    def _step(self, action: str) -> str:
        if self._done:
            return "The episode has ended; no further actions are played."
        observation, _, terminated, truncated, info = self._env.step(action)
        if terminated or truncated:
            self._done = True
            self._score = float(info.get(SCORE, 0.0))
        return str(observation)

    def get_reward(self) -> float:
        """The verifier's score of the episode (``info["score"]``); unfinished episodes score 0."""
        return self._score if self._done else self._unfinished_reward


def _answer(self, answer: str) -> str:  # noqa: ANN001 - no hint on self: TRL reads the hints as the schema
    """Give your final answer; the episode ends and is scored.

    Args:
        answer: the final answer, in the format the task asks for.

    Returns:
        Whether the answer was recorded and correct.
    """
    return self._step(f"<answer>{answer}</answer>")


def _act(self, action: str) -> str:  # noqa: ANN001 - as _answer
    """Play one move of the game (the rules say what a move looks like).

    Args:
        action: the move, written as the rules ask.

    Returns:
        The game's answer to the move.
    """
    return self._step(action)


_answer.__name__ = _answer.__qualname__ = "answer"  # TRL names a tool by its __name__
_act.__name__ = _act.__qualname__ = "act"


def environment_factory(
    env_id: str, *, seed_start: int = 0, unfinished_reward: float = 0.0, **env_kwargs: Any
) -> Callable[[], Any]:
    """The zero-argument factory TRL's ``GRPOTrainer(environment_factory=...)`` expects, for a verigym env.

    The generated class's public methods are the tools TRL offers the model: a tool env's own
    tools (read from ``info["tools"]`` of a probe reset; their JSON schemas become signatures and
    docstrings) and ``answer(answer)``; any other env gets ``act(action)`` that plays its text view.

    Args:
        env_id: a registered verigym id.
        seed_start: the first reset seed when the dataset row has no ``verigym_seed`` (each
            instance counts up from it).
        unfinished_reward: ``get_reward()`` of an episode the model did not finish.
        **env_kwargs: passed to ``gymnasium.make``.

    Returns:
        a callable that builds one environment instance (one per rollout, reused across batches).

    Raises:
        gymnasium.error.Error: ``env_id`` is not registered.
        ValueError: a tool's name is not a Python identifier or clashes with ``reset``/``get_reward``.
    """
    import functools

    import gymnasium as gym

    task = functools.partial(gym.make, env_id, **env_kwargs) if env_kwargs else env_id
    probe = make_env(task)
    try:
        _, info = probe.reset(seed=seed_start)
        schemas = list(info.get("tools") or [])
    finally:
        probe.close()
    namespace: dict[str, Any] = {
        "_task": task,
        "_seed_start": int(seed_start),
        "_unfinished_reward": float(unfinished_reward),
    }
    if schemas:
        for schema in schemas:
            name = schema.get("function", schema).get("name", "")
            if (
                not name.isidentifier()
                or name.startswith("_")
                or name in ("reset", "get_reward", "answer")
            ):
                raise ValueError(f"{env_id}: tool {name!r} cannot be a method of a TRL environment")
            namespace[name] = _tool_method(name, schema)
        namespace["answer"] = _answer
        namespace["_native_tools"] = True
    else:
        namespace["act"] = _act
    short = env_id.rsplit("/", 1)[-1].replace("-", "")
    cls = type(f"Verigym{short}Environment", (_VerigymEnvironment,), namespace)
    cls.__doc__ = f"{env_id} as a TRL environment (tools: {', '.join(n for n in namespace if not n.startswith('_'))})."
    return cls
