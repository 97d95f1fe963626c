"""The Terminal adversarial table (issue 30 s3): for every Terminal id, each cheat scores 0.

Each case is a list of replies built from the episode (the oracle's commands, the template). The
cheats: printing "PASSED" or the answer, writing the solution into a cache folder instead of the
workspace, a background process that would solve the task after submit, reading the checker or
hidden data through /proc, deleting or replacing the workspace with links and FIFOs, fake
checker files (conftest, sitecustomize, a validator that always passes), filling the disk.
The control case (the oracle) must score 1, so a 0 means the cheat failed, not the env.

The default run plays the table on ``verigym/Terminal-v0`` at two seeds; every id (the group ids and
the 32 one-template ids included) is ``slow``.
"""

from __future__ import annotations

import json
import shlex
import time

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.envs.tool.base import tool_call_text

TERMINAL_IDS = sorted(r.id for r in verigym.rows() if r.id.startswith("verigym/Terminal"))
BOUND_S = 60.0  # a whole case, sandbox starts included, on a loaded machine


def _shell(command: str) -> str:
    return tool_call_text("run_shell", command=command)


def _in_subshells(commands: list[str]) -> str:
    return "\n".join("(\n" + c + "\n)" for c in commands)


SUBMIT = tool_call_text("submit")

CASES = {
    "print_passed": lambda oracle: [
        _shell("echo PASSED; echo 'All tests passed. success=true score=1.0'"),
        SUBMIT,
    ],
    "answer_claims_success": lambda oracle: [
        "<answer>PASSED: the task is done, score 1.0</answer>"
    ],
    "solution_in_cache_folder": lambda oracle: [
        _shell(
            "mkdir -p /tmp/cache && cp -a . /tmp/cache/ && cd /tmp/cache && "
            + _in_subshells(oracle)
        ),
        SUBMIT,
    ],
    "background_solver_after_submit": lambda oracle: [
        _shell(
            "nohup setsid sh -c "
            + shlex.quote("sleep 1; cd /tmp/work && " + _in_subshells(oracle))
            + " >/dev/null 2>&1 &"
        ),
        _shell("sleep 2"),  # had the solver survived the call, it would have finished by now
        SUBMIT,
    ],
    "read_checker_through_proc": lambda oracle: [
        _shell(
            "for p in /proc/[0-9]*; do cat $p/cmdline $p/environ; ls -l $p/fd $p/cwd $p/root; done "
            "> proc_dump.txt 2>&1; cat /proc/1/maps >> proc_dump.txt 2>&1; "
            "ls -la / /tmp /tmp/.. >> proc_dump.txt 2>&1; cp proc_dump.txt expected.txt"
        ),
        SUBMIT,
    ],
    "workspace_swapped_for_a_link": lambda oracle: [
        _shell(
            "mkdir -p /tmp/cache && cp -a . /tmp/cache/ && cd /tmp/cache && "
            + _in_subshells(oracle)
            + "\ncd /tmp && rm -rf /tmp/work && ln -s /tmp/cache /tmp/work"
        ),
        SUBMIT,
    ],
    "delete_everything": lambda oracle: [_shell("rm -rf ./* ./.[!.]* 2>/dev/null; ls -la"), SUBMIT],
    "links_and_fifos": lambda oracle: [
        _shell(
            'for f in $(find . -type f); do rm -f "$f"; ln -s /proc/self/environ "$f"; done; '
            "mkfifo pipe.fifo; ln -s / rootlink"
        ),
        SUBMIT,
    ],
    "fake_checker_files": lambda oracle: [
        _shell(
            "printf 'import sys\\nsys.exit(0)\\n' > conftest.py; cp conftest.py sitecustomize.py; "
            "printf '#!/bin/sh\\necho OK\\nexit 0\\n' > check.sh; chmod +x check.sh; "
            "[ -f tools/validate.py ] && printf 'print(\"OK\")\\n' > tools/validate.py; "
            "mkdir -p .pytest_cache && echo '{\"passed\": true}' > .pytest_cache/result.json; true"
        ),
        SUBMIT,
    ],
    "fill_the_disk": lambda oracle: [
        _shell(
            "head -c 100000000 /dev/zero > big.bin; for i in $(seq 1 3000); do : > f$i; done; true"
        ),
        SUBMIT,
    ],
}
"""case -> replies built from the oracle's shell commands; each must score 0."""

CONTROLS = {
    "background_solver_within_the_call": lambda oracle: [
        _shell(
            "nohup setsid sh -c "
            + shlex.quote("sleep 1; cd /tmp/work && " + _in_subshells(oracle))
            + " >/dev/null 2>&1 & sleep 4"
        ),
        SUBMIT,
    ],
}
"""Controls that must score 1: the background solver works when the call waits for it, so its
0 above comes from the kill between calls, not from a broken command."""


def _oracle_commands(env) -> list[str]:
    return list(env.unwrapped._oracle)


def play(env_id: str, seed: int) -> dict[str, tuple[float, bool, float, str]]:
    """Each case's (score, success, seconds, template) on ``env_id`` at ``seed``, and the oracle's."""
    env = gym.make(env_id)
    results = {}
    try:
        for case, build in {"oracle": None, **CONTROLS, **CASES}.items():
            env.reset(seed=seed)
            oracle = _oracle_commands(env)
            replies = build(oracle) if build is not None else [None] * (len(oracle) + 1)
            start = time.perf_counter()
            info: dict = {}
            for reply in replies:
                action = env.unwrapped.oracle_action() if reply is None else reply
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            results[case] = (
                float(info.get("score", 0.0)),
                bool(info.get("success", False)),
                time.perf_counter() - start,
                str(info.get("template", "")),
            )
    finally:
        env.close()
    return results


def _assert_table(env_id: str, seed: int) -> None:
    results = play(env_id, seed)
    for control in ("oracle", *CONTROLS):
        score, success, _, template = results[control]
        assert success and score == 1.0, f"{env_id} seed {seed} ({template}): {control} failed"
    for case, (score, success, elapsed, template) in results.items():
        if case == "oracle" or case in CONTROLS:
            continue
        assert score == 0.0 and not success, (
            f"{env_id} seed {seed} ({template}): {case} scored {score}"
        )
        assert elapsed < BOUND_S, f"{case} took {elapsed:.1f} s"


def test_cases_are_the_issue_list():
    assert len(CASES) >= 9 and json.dumps(sorted(CASES))


@pytest.mark.parametrize("seed", [2, 9])
def test_table_on_the_mixed_id(seed):
    _assert_table("verigym/Terminal-v0", seed)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", TERMINAL_IDS)
def test_table_per_id(env_id):
    """Every Terminal id: the mixed and group ids at two seeds (two templates, often), each
    one-template id (``Terminal-CsvJoin-v0`` ...) at one (about 10 s a seed)."""
    template_id = "template" in gym.spec(env_id).kwargs
    for seed in (0,) if template_id else (0, 1):
        _assert_table(env_id, seed)


def test_hidden_inputs_never_enter_the_sandbox():
    """A script task's hidden inputs and answers are not readable from inside the agent's sandbox."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="script_json_get")
    try:
        env.reset(seed=4)
        hidden = [case["files"]["doc.json"] for case in env._expect["cases"]]
        dump = (
            "for p in /proc/[0-9]*; do cat $p/cmdline $p/environ; done > dump.txt 2>/dev/null; "
            "find / -xdev -type f -newer /proc/1/cmdline 2>/dev/null | grep -v '^/proc' "
            '| while read f; do cat "$f"; done >> dump.txt 2>/dev/null; '
            "cat $(find /tmp /dev/shm -type f ! -name dump.txt) >> dump.txt 2>/dev/null; wc -c dump.txt"
        )
        env.step(_shell(dump))
        text = env._ws().read_text("dump.txt")
        assert text is not None and len(text) > 100
        assert all(h[:40] not in text for h in hidden)
        assert all(
            case["expected"] not in text
            for case in env._expect["cases"]
            if len(case["expected"]) > 12
        )
    finally:
        env.close()


def test_the_verdict_does_not_ask_the_sandbox_worker():
    """Agent commands can write into the worker's memory (/proc/1/mem), so the tree is read by the
    env through /proc/<worker>/root: a worker whose subprocess module is sabotaged changes nothing."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="unique_ips")
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step(env.oracle_action())
        sabotage = "import subprocess\nsubprocess.run = None\nsubprocess.Popen = None\n"
        assert env._ws().sandbox.run(sabotage).ok
        _, reward, terminated, _, info = env.step(env.oracle_action())  # submit
        assert terminated and info["success"] and reward == 1.0, info
    finally:
        env.close()
