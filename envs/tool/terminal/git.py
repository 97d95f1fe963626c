"""Terminal templates, group ``git``: operations on a local repository (only where ``git`` exists
inside the sandbox; otherwise these templates are left out of the draw).

The repository is built at reset by ``setup`` commands with fixed author, committer and dates, so
its commit ids are the same for a seed. The verdict copies the final ``repo/`` (its ``.git``
included) into a new sandbox and asks git there with plumbing commands only (:data:`GIT`); the
working tree is compared from the snapshot itself.
"""

from __future__ import annotations

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Runner,
    Snapshot,
    Template,
    Verdict,
    choice,
    sample,
    scored,
)

GIT = (
    "GIT_CONFIG_NOSYSTEM=1 GIT_ATTR_NOSYSTEM=1 git -c core.hooksPath=/dev/null -c core.fsmonitor=false "
    "-c log.showSignature=false -c core.attributesFile=/dev/null --no-pager"
)
"""git for the checker's queries: only plumbing that reads objects (``log``, ``rev-list``,
``rev-parse``, ``ls-tree``, ``cat-file``, ``diff-index --cached``), nothing that would run a hook,
a filter, a signature program or the fsmonitor named by the agent's configuration."""
_DATE = "GIT_AUTHOR_DATE=2024-01-01T00:00:00Z GIT_COMMITTER_DATE=2024-01-01T00:00:00Z"


def _init(message: str) -> list[str]:
    return [
        "cd repo && git init -q && git symbolic-ref HEAD refs/heads/main && git config user.name 'Dev Eloper' "
        "&& git config user.email dev@example.org && git add -A "
        f"&& {_DATE} git commit -q -m '{message}' && cd ..",
    ]


def _module(rng: np.random.Generator) -> str:
    return "".join(
        f"{w} = {int(rng.integers(100))}\n" for w in sample(rng, WORDS, int(rng.integers(2, 6)))
    )


def _repo_files(snap: Snapshot) -> dict:
    return {p: (e.data, e.mode) for p, e in snap.files("repo").items() if e.data is not None}


def _ask(runner: Runner, snap: Snapshot, queries: dict[str, str]) -> dict[str, str | None]:
    """Run each git query (a command in repo/) in a fresh sandbox; ``{name: stdout or None}``."""
    files = _repo_files(snap)
    if not any(p.startswith("repo/.git/") for p in files):
        return dict.fromkeys(queries)
    parts = ["mkdir -p repo/.git/refs/heads repo/.git/objects out && cd repo"]
    parts += [f"({GIT} {q}) > ../out/{name} 2>/dev/null" for name, q in queries.items()]
    status, _, after = runner.shell(files, "; ".join(parts), timeout=10.0, snapshot=True)
    if after is None:
        return dict.fromkeys(queries)
    return {name: after.text(f"out/{name}") for name in queries}


# -- git_commit ----------------------------------------------------------------------------------
def _commit_generate(rng: np.random.Generator):
    names = sample(rng, WORDS, int(rng.integers(3, 6)))
    v1 = {f"repo/src/{n}.py": _module(rng) for n in names}
    v1["repo/README.md"] = f"# {choice(rng, WORDS)}\n"
    changed = {f".seed/src/{names[0]}.py": _module(rng)}
    new_name = choice(rng, [w for w in WORDS if w not in names])
    changed[f".seed/src/{new_name}.py"] = _module(rng)
    message = f"Add {new_name} and update {names[0]}"
    final = {
        **{p[len("repo/") :]: t for p, t in v1.items()},
        **{p[len(".seed/") :]: t for p, t in changed.items()},
    }
    instruction = (
        "repo/ is a git repository with uncommitted work: a modified file and a new, untracked file. Commit all "
        f"of it on the current branch (main) as one new commit with the message `{message}`, so that "
        "`git status` is clean afterwards."
    )
    return instruction, {**v1, **changed}, {"message": message, "final": final}


def _commit_setup(expect: dict) -> list[str]:
    return _init("Initial commit") + ["cp -r .seed/. repo/ && rm -rf .seed"]


def _commit_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    final = expect["final"]
    names = sorted(final)
    queries = {
        "subject": "log -1 --format=%s main",
        "count": "rev-list --count main",
        "tree": "ls-tree -r --name-only main",
        "staged": "diff-index --cached --name-only main",
    }
    queries.update({f"f{i}": f"cat-file -p 'main:{p}'" for i, p in enumerate(names)})
    got = _ask(runner, snap, queries)
    items = [got["subject"] is not None and got["subject"].strip() == expect["message"]]
    items += [got[f"f{i}"] == final[p] for i, p in enumerate(names)]
    worktree = {
        p[len("repo/") :]: e.data
        for p, e in snap.files("repo").items()
        if not p.startswith("repo/.git/")
    }
    guards = [
        got["count"] is not None and got["count"].strip() == "2",
        got["tree"] is not None and sorted(got["tree"].split()) == names,
        got["staged"] == "",
        worktree == {p: t.encode() for p, t in final.items()},  # nothing left uncommitted
    ]
    return scored(items, guards, f"commits on main: {(got['count'] or '?').strip()}")


def _commit_oracle(expect: dict) -> list[str]:
    return [f"cd repo && git add -A && git commit -q -m '{expect['message']}'"]


# -- git_branch ----------------------------------------------------------------------------------
def _branch_generate(rng: np.random.Generator):
    names = sample(rng, WORDS, int(rng.integers(2, 5)))
    v1 = {f"repo/{n}.txt": "".join(w + "\n" for w in sample(rng, WORDS, 4)) for n in names}
    branch = f"feature/{choice(rng, WORDS)}-{int(rng.integers(10, 99))}"
    path = f"notes/{choice(rng, WORDS)}.md"
    content = f"# Plan\n\n{' '.join(sample(rng, WORDS, 8))}\n"
    message = f"Add {path}"
    instruction = (
        f"In the git repository repo/, create a branch `{branch}` from main, and on that branch commit a new "
        f"file {path} with exactly this content:\n```\n{content}```\nwith the message `{message}`. main itself "
        "must not change."
    )
    return instruction, v1, {"branch": branch, "path": path, "content": content, "message": message}


def _branch_setup(expect: dict) -> list[str]:
    return _init("Initial commit")


def _branch_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    b = expect["branch"]
    got = _ask(
        runner,
        snap,
        {
            "file": f"cat-file -p '{b}:{expect['path']}'",
            "subject": f"log -1 --format=%s '{b}'",
            "parent": f"rev-parse '{b}^'",
            "main": "rev-parse main",
            "main_count": "rev-list --count main",
        },
    )
    items = [
        got["file"] == expect["content"],
        got["subject"] is not None and got["subject"].strip() == expect["message"],
        got["parent"] is not None and got["parent"] == got["main"],
    ]
    guards = [got["main_count"] is not None and got["main_count"].strip() == "1"]
    return scored(items, guards)


def _branch_oracle(expect: dict) -> list[str]:
    return [
        f"cd repo && git checkout -q -b '{expect['branch']}' && mkdir -p $(dirname {expect['path']}) "
        f"&& cat > {expect['path']} <<'EOF'\n{expect['content']}EOF",
        f"cd repo && git add {expect['path']} && git commit -q -m '{expect['message']}'",
    ]


# -- git_restore ---------------------------------------------------------------------------------
def _restore_generate(rng: np.random.Generator):
    names = sample(rng, WORDS, int(rng.integers(3, 6)))
    v1 = {f"repo/{n}.cfg": _module(rng) for n in names}
    broken, kept = names[0], names[1]
    seed_broken, seed_kept = _module(rng), _module(rng)
    files = {**v1, f".seed/{broken}.cfg": seed_broken, f".seed/{kept}.cfg": seed_kept}
    instruction = (
        f"In the git repository repo/, the uncommitted changes to {broken}.cfg were a mistake: bring that file "
        f"back to its last committed version. The uncommitted changes to {kept}.cfg are wanted: keep them as they "
        "are (do not commit anything)."
    )
    return (
        instruction,
        files,
        {
            "restored": {f"repo/{broken}.cfg": v1[f"repo/{broken}.cfg"]},
            "kept": {f"repo/{kept}.cfg": seed_kept},
            "broken": f"{broken}.cfg",
        },
    )


def _restore_setup(expect: dict) -> list[str]:
    return _commit_setup(expect)


def _restore_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    items = [snap.text(p) == t for p, t in expect["restored"].items()]
    guards = [snap.text(p) == t for p, t in expect["kept"].items()]
    got = _ask(runner, snap, {"count": "rev-list --count main"})
    guards.append(got["count"] is not None and got["count"].strip() == "1")
    return scored(items, guards)


def _restore_oracle(expect: dict) -> list[str]:
    return [f"cd repo && git checkout -- {expect['broken']}"]


TEMPLATES = [
    Template(
        "git_commit",
        "git",
        _commit_generate,
        _commit_check,
        _commit_oracle,
        ("git",),
        _commit_setup,
    ),
    Template(
        "git_branch",
        "git",
        _branch_generate,
        _branch_check,
        _branch_oracle,
        ("git",),
        _branch_setup,
    ),
    Template(
        "git_restore",
        "git",
        _restore_generate,
        _restore_check,
        _restore_oracle,
        ("git",),
        _restore_setup,
    ),
]
