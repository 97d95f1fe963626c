"""The Terminal adversarial table (issue 30 s3): for every Terminal id, each cheat scores 0.

Each case is a list of replies built from the episode (the oracle's commands, the template). The
cheats: printing "PASSED" or the answer, writing the solution into a cache folder instead of the
workspace, a background process that would solve the task after submit, reading the checker or
hidden data through /proc, deleting or replacing the workspace with links and FIFOs, fake
checker files (conftest, sitecustomize, a validator that always passes), filling the disk, the git
forge (issue 43: the honest commit's objects hidden, and a program named by the repository's own
config -- ``core.sshCommand`` behind a partial clone's lazy fetch, ``core.fsmonitor``, hooks, a
pager or signature program -- that would bring them back inside the checker's sandbox), a tar bomb
(a GNU long-name header declaring 1 GiB in a ~1 MB ``.tar.gz``).
The control case (the oracle) must score 1, so a 0 means the cheat failed, not the env.

The default run plays the table on ``verigym/Terminal-v0`` at two seeds; every id (the group ids and
the 32 one-template ids included) is ``slow``.
"""

from __future__ import annotations

import json
import re
import resource
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

CHECK_ROOT = "/tmp/check"
"""Where the checker's sandbox puts the files (``Runner.ROOT``): the forge's program looks there."""

GIT_TRIGGERS = {
    "ssh": (
        "git config core.repositoryformatversion 1 && git config extensions.partialClone origin && "
        "git config remote.origin.url ssh://example.invalid/x && git config remote.origin.promisor true && "
        "git config core.sshCommand 'sh {script}'"
    ),
    "fsmonitor": "git config core.fsmonitor 'sh {script}' && git config core.untrackedCache true",
    "hooks": (
        "mkdir -p .git/myhooks && for h in post-checkout pre-commit reference-transaction "
        "post-index-change pre-auto-gc; do cp .git/f.sh .git/myhooks/$h; cp .git/f.sh .git/hooks/$h; "
        "done && git config core.hooksPath .git/myhooks"
    ),
    "pager_and_signature": (
        "git config core.pager 'sh {script}; cat' && git config log.showSignature true && "
        "git config gpg.program 'sh {script}' && git config diff.external 'sh {script}' && "
        "printf '* diff=x\\n' > .gitattributes && git config diff.x.textconv 'sh {script}'"
    ),
}
"""What makes the checker's ``git`` run the forge's program (one repository config each)."""


def git_forge(oracle: list[str], trigger: str = "ssh") -> str:
    """A shell command: where ``repo/.git`` exists, the oracle's honest work is done, then every
    object is moved into ``.git/stash.tar`` and deleted, and a program that restores them
    (``.git/f.sh``) is named by the repository's config (``GIT_TRIGGERS[trigger]``). A checker that
    ran the program would see the full solution (score 1, as before issue 43 for ``ssh``); one that
    never does sees refs to missing objects (score 0)."""
    script = f"{CHECK_ROOT}/repo/.git/f.sh"
    restore = [
        "#!/bin/sh",
        f"cd {CHECK_ROOT}/repo/.git && python3 -c "
        + shlex.quote("import tarfile; tarfile.open('stash.tar').extractall('.')"),
        "exit 1",
    ]
    forge = (
        " && ".join("(\n" + c + "\n)" for c in oracle)
        + " && cd repo && find .git/objects -type f -path '.git/objects/??/*' > /tmp/.new && "
        'python3 -c "import tarfile; '
        "t = tarfile.open('.git/stash.tar', 'w'); "
        "[t.add(p.strip(), arcname=p.strip()[5:]) for p in open('/tmp/.new')]; t.close()\" && "
        "xargs rm -f < /tmp/.new && "
        f"printf '%s\\n' {' '.join(map(shlex.quote, restore))} > .git/f.sh && chmod 755 .git/f.sh && "
        + GIT_TRIGGERS[trigger].format(script=script)
    )
    return f"if [ -d repo/.git ]; then {forge}; fi; true"


TAR_BOMB = (
    "import gzip, sys, tarfile\n"
    "head = tarfile.TarInfo('././@LongLink')\n"
    "head.type, head.size = tarfile.GNUTYPE_LONGNAME, 1 << 30\n"
    "zeros = gzip.compress(bytes(1 << 20), 9)  # gzip members concatenate: 1 GiB in ~1 MB\n"
    "open(sys.argv[1], 'wb').write(gzip.compress(head.tobuf(format=tarfile.GNU_FORMAT)) + zeros * 1024)\n"
)
"""A ``.tar.gz`` whose first header is a GNU long name that declares 1 GiB (of zeros)."""


def tar_bomb(oracle: list[str]) -> str:
    """A shell command: where the task asks for a ``.tar.gz`` (the oracle's ``tar -czf PATH``),
    :data:`TAR_BOMB` is written at that path; elsewhere nothing."""
    found = re.search(r"tar -czf (\S+) ", " ".join(oracle))
    if found is None:
        return "true"
    path = found.group(1)
    return (
        f"mkdir -p $(dirname {path}) && python3 -c {shlex.quote(TAR_BOMB)} {path} && ls -l {path}"
    )


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
    "git_forge_lazy_fetch": lambda oracle: [_shell(git_forge(oracle, "ssh")), SUBMIT],
    "git_forge_fsmonitor": lambda oracle: [_shell(git_forge(oracle, "fsmonitor")), SUBMIT],
    "git_forge_hooks": lambda oracle: [_shell(git_forge(oracle, "hooks")), SUBMIT],
    "git_forge_pager_and_signature": lambda oracle: [
        _shell(git_forge(oracle, "pager_and_signature")),
        SUBMIT,
    ],
    "tar_bomb": lambda oracle: [_shell(tar_bomb(oracle)), SUBMIT],
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
    assert len(CASES) >= 15 and json.dumps(sorted(CASES))
    assert {"git_forge_lazy_fetch", "tar_bomb"} <= set(CASES)


def _play_one(env, seed: int, replies: list[str]) -> dict:
    env.reset(seed=seed)
    info: dict = {}
    for reply in replies:
        _, _, terminated, truncated, info = env.step(reply)
        if terminated or truncated:
            break
    return info


@pytest.mark.parametrize(
    ("template", "seed"),
    [("git_commit", 0), ("git_branch", 1), pytest.param("git_commit", 5, marks=pytest.mark.slow)],
)
def test_the_git_forge_never_runs_in_the_checker(template, seed):
    """Issue 43: the lazy-fetch forge (``extensions.partialClone``, a promisor remote,
    ``core.sshCommand`` naming the agent's script, ``main`` at an object that only the script can
    bring) scored 1 on 5/5 seeds while the checker's git read the repository's config. The checker
    now copies only objects, refs, HEAD and the index under a config of its own: 0."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template=template)
    try:
        env.reset(seed=seed)
        oracle = list(env._oracle)
        info = _play_one(env, seed, [_shell(git_forge(oracle, "ssh")), SUBMIT])
        assert info["score"] == 0.0 and not info["success"], info
        # the control: the same honest commit without the hiding scores 1
        info = _play_one(env, seed, [_shell(_in_subshells(oracle)), SUBMIT])
        assert info["score"] == 1.0 and info["success"], info
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("trigger", sorted(GIT_TRIGGERS))
@pytest.mark.parametrize("template", ["git_commit", "git_branch", "git_restore"])
def test_no_git_trigger_runs_in_the_checker(template, trigger):
    """Every way of naming a program in the repository (lazy fetch, fsmonitor, hooks, pager, gpg,
    external diff, textconv) scores 0 on every git template, at three seeds."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template=template)
    try:
        for seed in range(3):
            env.reset(seed=seed)
            info = _play_one(env, seed, [_shell(git_forge(list(env._oracle), trigger)), SUBMIT])
            assert info["score"] == 0.0 and not info["success"], (seed, info)
    finally:
        env.close()


def test_the_tar_bomb_scores_zero_and_costs_the_env_little():
    """Issue 43: a GNU long-name header declaring 1 GiB in a ~1 MB .tar.gz cost the env process
    1 GiB. It is now refused at the read cap: the episode's peak RSS grows by < 64 MiB."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="tar_create")
    try:
        env.reset(seed=3)
        command = tar_bomb(list(env._oracle))
        assert command != "true"
        env.step(_shell(command))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        _, reward, terminated, _, info = env.step(SUBMIT)
        grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert terminated and reward == 0.0 and not info["success"], info
        assert "not a readable tar" in info["verdict"], info["verdict"]
        assert grown_mib < 64, f"the verdict grew the peak RSS by {grown_mib:.0f} MiB"
    finally:
        env.close()


# seed 9 in the default run; seed 2 (another template, ~15 s) and every id's table in the slow run
@pytest.mark.parametrize("seed", [pytest.param(2, marks=pytest.mark.slow), 9])
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


def test_a_worker_whose_root_cannot_be_read_is_never_asked_for_the_tree(monkeypatch):
    """Where the env cannot read ``/proc/<worker>/root`` (a non-root host once agent code made the
    worker non-dumpable: shell commands can write into its memory), the tree was read by a process
    the worker starts and answered through the worker: a worker taken over answered a solved tree
    kept elsewhere. Simulated here: the root reads as missing, the worker's ``exec`` is rebound."""
    from verigym.envs.tool.terminal import core
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="unique_ips")
    try:
        env.reset(seed=0)
        env.step(env.oracle_action())  # solved...
        env.step(_shell("cp -a /tmp/work /tmp/solved && rm web/ips.txt"))  # ...elsewhere only
        takeover = (
            "import builtins\n"
            "real_exec = builtins.exec\n"
            "def exec_and_forge(code, namespace=None, *rest):\n"
            "    real_exec(code, namespace, *rest)\n"
            "    honest = namespace.get('_vg_fresh_snapshot')\n"
            "    if honest is not None and not getattr(honest, 'forged', False):\n"
            "        def forged(source, root, *args):\n"
            "            return honest(source, '/tmp/solved', *args)\n"
            "        forged.forged = True\n"
            "        namespace['_vg_fresh_snapshot'] = forged\n"
            "builtins.exec = exec_and_forge\n"
        )
        assert env._ws().sandbox.run(takeover).ok
        real_isdir = core.os.path.isdir
        monkeypatch.setattr(
            core.os.path, "isdir", lambda p: not str(p).startswith("/proc/") and real_isdir(p)
        )
        _, reward, terminated, _, info = env.step(env.oracle_action())  # submit
        assert terminated and reward == 0.0 and not info["success"], info
        assert "could not be read" in info["verdict"], info["verdict"]
    finally:
        env.close()


def test_file_names_that_are_not_utf8_leave_no_lone_surrogate_in_the_info():
    """A file or link name of bytes that are not UTF-8 reached ``info["patch"]`` as a lone
    surrogate (the env contract, ``verigym check``, allows none: UTF-8 writers of the info fail)."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="unique_ips")
    try:
        env.reset(seed=0)
        env.step(_shell("printf x > \"$(printf 'bad\\377name')\"; ln -s x \"$(printf 'l\\376')\""))
        *_, info = env.step(tool_call_text("submit"))
        for key in ("patch", "verdict"):
            info[key].encode("utf-8")  # raises on a lone surrogate
        assert "bad\\udcffname" in info["patch"] and "l\\udcfe" in info["patch"], info["patch"]
    finally:
        env.close()
