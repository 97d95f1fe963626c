"""RepoFix and Terminal go everywhere the other envs go (issue 30, section 4): ``LanguageWrapper``
(text replies), native OpenAI tool-call messages, ``verigym serve-env`` (a real uvicorn server and
the ``verigym.remote`` client), TRL's ``environment_factory`` and ``verigym eval`` with the
standings and episode pages (which show the agent's diff). One oracle episode on each path, with
the verdict fields asserted."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import verigym  # noqa: F401 - registers the ids
from tests.sandbox.support import needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.toolcalls import tool_calls_in
from verigym.wrappers import LanguageWrapper

pytestmark = needs_sandbox  # every episode runs in the sandbox

REPOFIX, TERMINAL = "verigym/RepoFix-v0", "verigym/Terminal-Text-v0"
SWE_IDS = (
    "verigym/RepoFix-v0",
    "verigym/RepoFix-Anywhere-v0",
    "verigym/RepoFix-TwoBugs-v0",
    "verigym/Terminal-v0",
    *(
        f"verigym/Terminal-{group}-v0"
        for group in ("Text", "Data", "Refactor", "Files", "Script", "Git", "Perms", "Repair")
    ),
)
SEED = 3


def _verdict(info: dict[str, Any], env_id: str) -> None:
    """The final info of a solved episode: the verdict and the env's own fields."""
    assert info["success"] is True and info["score"] == 1.0, info
    assert isinstance(info["patch"], str) and info["patch"], "a solved task changed files"
    if "RepoFix" in env_id:
        assert info["fail_to_pass"][0] == info["fail_to_pass"][1] > 0
        assert info["pass_to_pass"][0] == info["pass_to_pass"][1]
        assert info["tampered"] is False and 0.0 <= info["patch_similarity"] <= 1.0
        assert info["patch"].startswith("--- a/")
    else:
        assert info["template"] and isinstance(info["verdict"], str)
        assert info["patch"].startswith("diff --git a/")


def _message(action: str) -> dict[str, Any]:
    """The oracle's ``<tool_call>`` text as an OpenAI assistant message with ``tool_calls``."""
    ((name, arguments),) = tool_calls_in(action)
    call = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_0", "type": "function", "function": call}],
    }


# -- LanguageWrapper: text replies ------------------------------------------------------------------


def _play_text(env_id: str) -> None:
    env = LanguageWrapper(gym.make(env_id))
    try:
        observation, info = env.reset(seed=SEED)
        assert isinstance(observation, str) and "run_shell" in info["instructions"]
        assert "Episode end:" in env.instructions()
        _, reward, terminated, truncated, info = env.step("I think the bug is in the parser.")
        assert reward < 0 and "action_error" in info and not (terminated or truncated)
        ended = False
        for _ in range(40):
            action = env.unwrapped.oracle_action()
            observation, reward, terminated, truncated, info = env.step(action)
            assert "action_error" not in info, info["action_error"]
            ended = terminated or truncated
            if ended:
                break
        assert terminated and ended and reward == 1.0
        _verdict(info, env_id)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", SWE_IDS)
def test_language_wrapper_plays_every_new_id(env_id: str) -> None:
    _play_text(env_id)  # under a second each (an oracle episode, a malformed reply first)


# -- native OpenAI tool calls -----------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [REPOFIX, TERMINAL])
def test_openai_tool_call_messages(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        _, info = env.reset(seed=SEED)
        names = {tool["function"]["name"] for tool in info["tools"]}
        assert {"run_shell", "read_file", "write_file", "apply_patch", "submit"} <= names
        assert all(tool["type"] == "function" for tool in info["tools"])
        bad = {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]}
        _, reward, terminated, _, info = env.step(bad)
        assert reward < 0 and "function" in info["action_error"] and not terminated
        ended, steps = False, 0
        while not ended and steps < 40:
            message = _message(env.unwrapped.oracle_action())
            as_text = steps % 2 == 1  # the message as a dict and as its JSON text
            _, reward, terminated, truncated, info = env.step(
                json.dumps(message) if as_text else message
            )
            assert "action_error" not in info, info["action_error"]
            ended, steps = terminated or truncated, steps + 1
        assert terminated
        _verdict(info, env_id)
    finally:
        env.close()


# -- verigym serve-env and the remote client ---------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    import verigym.serve

    with verigym.serve.start(REPOFIX, TERMINAL) as handle:
        yield handle


@pytest.mark.parametrize("env_id", [REPOFIX, TERMINAL])
def test_serve_env_plays_the_same_episode_remotely(server, env_id: str) -> None:
    import verigym.remote

    local, remote = gym.make(env_id), verigym.remote.make(env_id, url=server.url)
    try:
        first, _ = local.reset(seed=SEED)
        remote_first, remote_info = remote.reset(seed=SEED)
        assert remote_first == first and remote_info["tools"]
        ended = False
        for _ in range(40):
            action = local.unwrapped.oracle_action()  # the remote env has no oracle: mirror it
            mine = local.step(action)
            theirs = remote.step(json.dumps(_message(action)))
            assert theirs[:4] == mine[:4]
            ended = theirs[2] or theirs[3]
            if ended:
                break
        assert ended
        info = theirs[4]
        _verdict(info, env_id)
        assert info["patch"] == mine[4]["patch"]  # computed by the server's env, the same diff
    finally:
        remote.close()
        local.close()


# -- TRL environment_factory -------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [REPOFIX, TERMINAL])
def test_trl_environment_factory_exposes_the_tools_and_scores(env_id: str) -> None:
    from verigym.agents.llm.trl_adapter import environment_factory

    factory = environment_factory(env_id)
    environment = factory()
    try:
        for name in ("run_shell", "read_file", "write_file", "apply_patch", "submit", "answer"):
            assert callable(getattr(environment, name)), name
        prompt = environment.reset(verigym_seed=SEED)
        assert "<tool_call>" not in prompt  # TRL offers the tools natively
        assert environment.get_reward() == 0.0  # unfinished
        for _ in range(40):
            ((name, arguments),) = tool_calls_in(environment._env.unwrapped.oracle_action())
            result = getattr(environment, name)(**arguments)
            if environment._done:
                break
        assert "Correct." in result and environment.get_reward() == 1.0
    finally:
        environment._env.close()


# -- verigym eval, the standings and the episode viewer ----------------------------------------------


def _eval(tmp: Path, agent: str, env_id: str, episodes: int) -> str:
    from verigym.cli import main

    argv = ["eval", "--agent", agent, "--env", env_id, "--episodes", str(episodes)]
    argv += ["--workers", "1", "--out", str(tmp), "--no-progress"]
    assert main(argv) == 0
    return agent


def test_eval_oracle_and_random_then_the_pages_show_the_diff(tmp_path: Path, capsys) -> None:
    from verigym.cli import main
    from verigym.leaderboards.store import ResultsStore
    from verigym.leaderboards.viewer import episode_filename

    _eval(tmp_path, "oracle", REPOFIX, 1)
    _eval(tmp_path, "random", REPOFIX, 1)
    _eval(tmp_path, "oracle", TERMINAL, 1)
    capsys.readouterr()
    with ResultsStore(tmp_path) as store:
        rows = store.rows()
    oracle = [r for r in rows if r.agent_spec == "oracle"]
    assert len(oracle) == 2 and all(r.success and r.score == 1.0 for r in oracle)
    random = [r for r in rows if r.agent_spec == "random"]
    assert len(random) == 1 and random[0].status == "ok" and not random[0].success
    assert main(["leaderboard", "--out", str(tmp_path)]) == 0
    standings = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    assert REPOFIX in standings and "episodes/index.html" in standings
    for row in oracle:
        page = (tmp_path / "episodes" / episode_filename(row)).read_text(encoding="utf-8")
        block = re.search(r'<pre class="diff" id="diff">(.*?)</pre>', page, re.S)
        assert block is not None, f"no diff on the page of {row.env_id} seed {row.seed}"
        kinds = re.findall(r'<span class="(\w+)">', block.group(1))
        assert "file" in kinds and ("add" in kinds or "del" in kinds)
        first = html.unescape(re.search(r"<span[^>]*>(.*?)</span>", block.group(1)).group(1))
        assert first.startswith("--- a/" if "RepoFix" in row.env_id else "diff --git a/")
    page = (tmp_path / "episodes" / episode_filename(random[0])).read_text(encoding="utf-8")
    assert "No file was changed." in page  # random text never edits the repository
