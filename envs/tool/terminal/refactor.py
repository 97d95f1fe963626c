"""Terminal templates, group ``refactor``: find-and-fix across many files."""

from __future__ import annotations

import re

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Snapshot,
    Template,
    Verdict,
    choice,
    sample,
    scored,
)


def _exact_files(snap: Snapshot, changed: dict[str, str], unchanged: dict[str, str]) -> Verdict:
    """Items: every file of ``changed`` has its new text; guards: ``unchanged`` files kept."""
    items = [snap.text(p) == text for p, text in sorted(changed.items())]
    guards = [snap.text(p) == text for p, text in sorted(unchanged.items())]
    broken = [p for p, text in sorted(unchanged.items()) if snap.text(p) != text]
    return scored(
        items, guards, f"files that must not change but did: {broken[:5]}" if broken else ""
    )


# -- rename_identifier ---------------------------------------------------------------------------
def _rename_identifier_generate(rng: np.random.Generator):
    a, b, c = sample(rng, WORDS, 3)
    old, new = f"{a}_{b}", f"{a}_{c}"
    decoy = f"{old}_total"  # longer identifier containing the old one: must stay
    files_before, files_after = {}, {}
    modules = sample(rng, WORDS, int(rng.integers(4, 8)))
    for i, mod in enumerate(modules):
        uses = i < len(modules) - 1 or len(modules) < 5  # the last module does not use it
        body = [f'"""The {mod} module."""', ""]
        if i == 0:
            body += [f"def {old}(x):", f"    return x * {int(rng.integers(2, 9))}", ""]
            body += [f"def {decoy}(xs):", f"    return sum({old}(x) for x in xs)", ""]
        elif uses:
            body += [f"from pkg.{modules[0]} import {old}", ""]
            body += [
                f"def {mod}_step(v):",
                f"    # calls {old} once",
                f"    return {old}(v) + {i}",
                "",
            ]
        else:
            body += [f"def {mod}_step(v):", f"    return v - {i}", ""]
        text = "\n".join(body)
        path = f"src/pkg/{mod}.py"
        files_before[path] = text
        files_after[path] = re.sub(rf"\b{old}\b", new, text)
    files_before["src/pkg/__init__.py"] = ""
    files_after["src/pkg/__init__.py"] = ""
    notes = f"Changelog\n- added {old}\n"
    files_before["CHANGELOG.md"] = notes
    changed = {p: t for p, t in files_after.items() if t != files_before[p]}
    unchanged = {p: t for p, t in files_before.items() if p not in changed}
    instruction = (
        f"Rename the Python function `{old}` to `{new}` everywhere under src/ (its definition, imports, calls "
        f"and comments). Only that exact identifier: names that merely contain it, like `{decoy}`, stay as "
        "they are. Do not edit files outside src/."
    )
    return (
        instruction,
        files_before,
        {"changed": changed, "unchanged": unchanged, "old": old, "new": new},
    )


def _exact_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _exact_files(snap, expect["changed"], expect["unchanged"])


def _rename_identifier_oracle(expect: dict) -> list[str]:
    return [
        f"grep -rlw '{expect['old']}' src | xargs sed -i 's/\\b{expect['old']}\\b/{expect['new']}/g'"
    ]


# -- config_key ----------------------------------------------------------------------------------
def _config_key_generate(rng: np.random.Generator):
    old_key, new_key = choice(
        rng,
        (
            ("timeout_sec", "timeout_s"),
            ("max_conn", "max_connections"),
            ("log_lvl", "log_level"),
            ("db_host", "database_host"),
        ),
    )
    services = sample(rng, WORDS, int(rng.integers(5, 10)))
    before, after = {}, {}
    for i, svc in enumerate(services):
        has = i == 0 or rng.random() < 0.7
        lines = [f"[{svc}]", f"name = {svc}", f"port = {int(rng.integers(2000, 9000))}"]
        if has:
            lines.insert(int(rng.integers(1, 4)), f"{old_key} = {int(rng.integers(1, 99))}")
        lines.append(f"# {old_key}_legacy = 0 is not read any more")  # decoy: not the key
        text = "\n".join(lines) + "\n"
        path = f"conf/services/{svc}.ini"
        before[path] = text
        after[path] = re.sub(rf"^{old_key} =", f"{new_key} =", text, flags=re.M)
    changed = {p: t for p, t in after.items() if t != before[p]}
    unchanged = {p: t for p, t in before.items() if p not in changed}
    instruction = (
        f"The service configs conf/services/*.ini use the key `{old_key}`, which the new release reads as "
        f"`{new_key}`. In every config, rename the key `{old_key}` to `{new_key}` (keep its value and its "
        "place); leave everything else, comments included, unchanged."
    )
    return (
        instruction,
        before,
        {"changed": changed, "unchanged": unchanged, "old": old_key, "new": new_key},
    )


def _config_key_oracle(expect: dict) -> list[str]:
    return [f"sed -i 's/^{expect['old']} =/{expect['new']} =/' conf/services/*.ini"]


# -- replace_url ---------------------------------------------------------------------------------
def _replace_url_generate(rng: np.random.Generator):
    host = choice(rng, WORDS)
    old, new = f"http://{host}.example.internal", f"https://{host}.example.org"
    before, after = {}, {}
    for name in sample(rng, WORDS, int(rng.integers(4, 8))):
        ext = choice(rng, (".md", ".txt"))
        lines = [f"# {name.capitalize()}", ""]
        for _ in range(int(rng.integers(2, 6))):
            if rng.random() < 0.5:
                lines.append(f"See {old}/{choice(rng, WORDS)} for details.")
            else:
                lines.append(" ".join(sample(rng, WORDS, 6)))
        text = "\n".join(lines) + "\n"
        path = f"docs/{choice(rng, ('guide', 'ref'))}/{name}{ext}"
        before[path] = text
        after[path] = text.replace(old, new)
    first = next(iter(before))
    before[first] += f"Mirror: {old}/mirror\n"
    after[first] += f"Mirror: {new}/mirror\n"
    before["docs/archive/old.md.bak"] = f"Old link {old}/legacy\n"  # backups stay as they are
    after["docs/archive/old.md.bak"] = before["docs/archive/old.md.bak"]
    changed = {p: t for p, t in after.items() if t != before[p]}
    unchanged = {p: t for p, t in before.items() if p not in changed}
    instruction = (
        f"The documentation moved host. In every .md and .txt file under docs/ (any depth), replace each "
        f"`{old}` with `{new}`. Do not touch other files (backups such as *.bak stay as they are)."
    )
    return instruction, before, {"changed": changed, "unchanged": unchanged, "old": old, "new": new}


def _replace_url_oracle(expect: dict) -> list[str]:
    old = expect["old"].replace(".", "\\.").replace("/", "\\/")
    new = expect["new"].replace("/", "\\/")
    return [
        f"find docs -type f \\( -name '*.md' -o -name '*.txt' \\) -exec sed -i 's/{old}/{new}/g' {{}} +"
    ]


# -- trailing_whitespace -------------------------------------------------------------------------
def _trailing_ws_generate(rng: np.random.Generator):
    before, after = {}, {}
    for name in sample(rng, WORDS, int(rng.integers(4, 8))):
        lines = []
        for k in range(int(rng.integers(4, 12))):
            line = f"{'    ' * int(rng.integers(0, 2))}value_{k} = {int(rng.integers(100))}"
            lines.append(line + choice(rng, ("", "", " ", "  ", "\t", " \t")))
        lines[0] += "   "  # at least one
        body = "\n".join(lines)
        before[f"app/{name}.py"] = body + choice(rng, ("\n", "", "\n\n"))
        after[f"app/{name}.py"] = "\n".join(line.rstrip() for line in lines) + "\n"
    before["app/data.txt"] = "keep   \n"
    changed = {p: t for p, t in after.items() if t != before[p]}
    unchanged = {p: t for p, t in before.items() if p not in changed}
    instruction = (
        "Clean the Python files app/*.py: remove trailing spaces and tabs at the end of every line, and make each "
        "file end with exactly one newline (no blank lines at the end). Other files stay as they are."
    )
    return instruction, before, {"changed": changed, "unchanged": unchanged}


def _trailing_ws_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport glob\nfor p in glob.glob('app/*.py'):\n"
        "    lines = [l.rstrip() for l in open(p).read().split('\\n')]\n"
        "    while lines and lines[-1] == '':\n        lines.pop()\n"
        "    open(p, 'w').write('\\n'.join(lines) + '\\n')\nEOF"
    ]


# -- bump_version --------------------------------------------------------------------------------
def _bump_version_generate(rng: np.random.Generator):
    major, minor, patch = (int(v) for v in rng.integers(0, 10, 3))
    old = f"{major}.{minor}.{patch}"
    new = f"{major}.{minor}.{patch + 1}" if rng.random() < 0.5 else f"{major}.{minor + 1}.0"
    name = choice(rng, WORDS)
    before = {
        "pyproject.toml": f'[project]\nname = "{name}"\nversion = "{old}"\n',
        f"src/{name}/__init__.py": f'__version__ = "{old}"\n',
        "README.md": f"# {name}\n\nInstall version {old} with pip.\n",
        "docs/conf.py": f'release = "{old}"\nproject = "{name}"\n',
    }
    deps = f"requests=={old}\n"  # a dependency pinned to the same string: not ours
    before["requirements.txt"] = deps
    after = {p: t.replace(old, new) for p, t in before.items()}
    after["requirements.txt"] = deps
    changed = {p: t for p, t in after.items() if t != before[p]}
    unchanged = {p: t for p, t in before.items() if p not in changed}
    instruction = (
        f"Release {new} of {name}: every mention of the project's version {old} (pyproject.toml, the package's "
        f"__init__.py, README.md, docs/conf.py) must become {new}. requirements.txt pins another package and "
        "must not change."
    )
    return instruction, before, {"changed": changed, "unchanged": unchanged, "old": old, "new": new}


def _bump_version_oracle(expect: dict) -> list[str]:
    old = expect["old"].replace(".", "\\.")
    return [
        f"grep -rl '{old}' --exclude=requirements.txt . | xargs sed -i 's/{old}/{expect['new']}/g'"
    ]


TEMPLATES = [
    Template(
        "rename_identifier",
        "refactor",
        _rename_identifier_generate,
        _exact_check,
        _rename_identifier_oracle,
    ),
    Template("config_key", "refactor", _config_key_generate, _exact_check, _config_key_oracle),
    Template("replace_url", "refactor", _replace_url_generate, _exact_check, _replace_url_oracle),
    Template(
        "trailing_whitespace", "refactor", _trailing_ws_generate, _exact_check, _trailing_ws_oracle
    ),
    Template(
        "bump_version", "refactor", _bump_version_generate, _exact_check, _bump_version_oracle
    ),
]
