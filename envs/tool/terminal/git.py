"""Terminal templates, group ``git``: operations on a local repository (only where ``git`` exists
inside the sandbox; otherwise these templates are left out of the draw).

The repository is built at reset by ``setup`` commands with fixed author, committer and dates, so
its commit ids are the same for a seed. The verdict copies the final ``repo/`` (its ``.git``
included) into a new sandbox and asks git there with plumbing commands only (:data:`GIT`); the
working tree is compared from the snapshot itself.
"""

from __future__ import annotations

import re

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

GIT_ENV = (
    "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent LANG=C.UTF-8 "
    "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_SYSTEM=/dev/null GIT_CONFIG_GLOBAL=/dev/null "
    "GIT_ATTR_NOSYSTEM=1 GIT_NO_LAZY_FETCH=1 GIT_NO_REPLACE_OBJECTS=1 GIT_TERMINAL_PROMPT=0 "
    "GIT_OPTIONAL_LOCKS=0 GIT_PROTOCOL_FROM_USER=0 GIT_ALLOW_PROTOCOL=none GIT_ASKPASS=/bin/false "
    "SSH_ASKPASS=/bin/false GIT_SSH_COMMAND=/bin/false GIT_PAGER=cat"
)
"""The environment of every checker ``git``: nothing inherited (``env -i``), no system, global or
``GIT_CONFIG_*`` configuration, no lazy fetch, no replace refs, no prompt, no ssh program."""

GIT = (
    "git -c core.sshCommand=/bin/false -c protocol.allow=never -c core.hooksPath=/dev/null "
    "-c core.fsmonitor=false -c core.untrackedCache=false -c core.pager=cat -c log.showSignature=false "
    "-c core.attributesFile=/dev/null --no-pager --no-replace-objects"
)
"""git for the checker's queries (after :data:`GIT_ENV`): only plumbing that reads objects
(``log``, ``rev-list``, ``rev-parse``, ``ls-tree``, ``cat-file``, ``diff-index --cached``)."""

GIT_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    "\tlogallrefupdates = false\n"
)
"""The only configuration a checker's copy of a repository has (the agent's is never copied)."""

_GIT_PARTS = re.compile(
    r"^(?:HEAD|packed-refs|index|refs/(?:heads|tags)/[A-Za-z0-9._@+/-]{1,200}"
    r"|objects/[0-9a-f]{2}/[0-9a-f]{38}|objects/pack/pack-[0-9a-f]{40}\.(?:pack|idx))$"
)
"""The paths of ``.git`` a checker copies: the head, the refs (branches and tags only: no replace
refs), the index and the object database (loose objects and packs; no alternates, no promisor
marks, no ``info/grafts``). Config, hooks, attributes, ``info/``, ``objects/info/`` are left out."""
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


def git_files(snap: Snapshot, repo: str = "repo") -> dict[str, tuple[bytes, int]]:
    """The parts of ``repo/.git`` a checker may let git read (:data:`_GIT_PARTS`), as initial files
    (mode ``0o644``) with :data:`GIT_CONFIG` in place of the agent's configuration; ``{}`` when the
    snapshot holds no ``repo/.git/HEAD``. The working tree is not copied: checkers compare it from
    the snapshot itself."""
    prefix = f"{repo}/.git/"
    out = {
        path: (entry.data, 0o644)
        for path, entry in snap.files(f"{repo}/.git").items()
        if entry.data is not None and _GIT_PARTS.match(path[len(prefix) :])
    }
    if f"{prefix}HEAD" not in out:
        return {}
    out[f"{prefix}config"] = (GIT_CONFIG.encode("ascii"), 0o644)
    return out


def ask_git(
    runner: Runner, snap: Snapshot, queries: dict[str, str], repo: str = "repo"
) -> dict[str, str | None]:
    """Answers of git about the agent's repository ``repo/`` in the snapshot, without running
    anything the agent configured; ``{name: stdout or None}``.

    The only helper through which a checker reads a repository. A new sandbox (``runner``) gets a
    copy of the object database, refs, ``HEAD`` and index only (:func:`git_files`) under a config
    of ours, and each query (the arguments of one read-only git command, e.g. ``"rev-list --count
    main"``) runs as ``GIT_ENV GIT <query>`` there: the repository's own config (``core.sshCommand``,
    ``extensions.partialClone`` and promisor remotes, ``core.fsmonitor``, hooks, pagers, diff and
    textconv drivers, includes), the user's and the system's are never read; a missing object is an
    error (never a fetch), replace refs and grafts are ignored. A query whose command fails, or a
    repository that is not there, gives ``None``.
    """
    files = git_files(snap, repo)
    if not files:
        return dict.fromkeys(queries)
    parts = [
        f"mkdir -p {repo}/.git/refs/heads {repo}/.git/refs/tags {repo}/.git/objects/pack out "
        f"&& cd {repo} || exit 1",
        "top=$(pwd)",
    ]
    for name, query in queries.items():
        if not re.fullmatch(r"[A-Za-z0-9_]{1,40}", name):
            raise ValueError(f"query name {name!r} is not a plain word")
        parts.append(
            f'({GIT_ENV} GIT_DIR="$top/.git" GIT_WORK_TREE="$top" '
            f'GIT_CEILING_DIRECTORIES="$top" {GIT} {query}) > ../out/{name} 2>/dev/null '
            f"|| rm -f ../out/{name}"
        )
    _, _, after = runner.shell(files, "; ".join(parts), timeout=10.0, snapshot=True)
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
        "staged": "diff-index --cached --no-ext-diff --no-textconv --name-only main",
    }
    queries.update({f"f{i}": f"cat-file -p 'main:{p}'" for i, p in enumerate(names)})
    got = ask_git(runner, snap, queries)
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
    got = ask_git(
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
    got = ask_git(runner, snap, {"count": "rev-list --count main"})
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
