"""Terminal templates, groups ``perms`` (file modes inside the sandbox) and ``repair`` (a config
that fails validation, a build script that fails)."""

from __future__ import annotations

import configparser
import json

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Runner,
    Snapshot,
    Template,
    Verdict,
    choice,
    is_mode,
    sample,
    scored,
)


# -- chmod_scripts -------------------------------------------------------------------------------
def _chmod_generate(rng: np.random.Generator):
    files, expected = {}, {}
    for name in sample(rng, WORDS, int(rng.integers(5, 10))):
        folder = choice(rng, ("scripts", "scripts/ci", "scripts/dev"))
        is_sh = rng.random() < 0.6
        path = f"{folder}/{name}.{'sh' if is_sh else choice(rng, ('txt', 'conf'))}"
        body = "#!/bin/sh\necho " + name + "\n" if is_sh else name + "\n"
        start = 0o644 if is_sh or rng.random() < 0.5 else 0o755
        files[path] = (body, start)
        expected[path] = 0o755 if is_sh else 0o644
    first = next(iter(files))
    if not first.endswith(".sh"):
        files[first] = (files[first][0], 0o755)  # at least one non-script that is executable
    files["scripts/zz.sh"] = ("#!/bin/sh\necho zz\n", 0o644)
    expected["scripts/zz.sh"] = 0o755
    instruction = (
        "Under scripts/ (any depth), every .sh file must be executable: mode 755 (rwxr-xr-x). Every other "
        "file there must not be: mode 644 (rw-r--r--). Set the modes; do not change the contents."
    )
    contents = {p: v[0] for p, v in files.items()}
    todo = {p: m for p, m in expected.items() if files[p][1] != m}
    return instruction, files, {"todo": todo, "modes": expected, "contents": contents}


def _chmod_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [is_mode(snap.entries.get(p), m) for p, m in sorted(expect["todo"].items())]
    guards = [is_mode(snap.entries.get(p), m) for p, m in expect["modes"].items()]
    guards += [snap.text(p) == t for p, t in expect["contents"].items()]
    return scored(items, guards)


def _chmod_oracle(expect: dict) -> list[str]:
    return [
        "find scripts -type f -name '*.sh' -exec chmod 755 {} + && find scripts -type f ! -name '*.sh' -exec chmod 644 {} +"
    ]


# -- private_keys --------------------------------------------------------------------------------
def _private_generate(rng: np.random.Generator):
    files, private, public = {}, [], {}
    owner = choice(rng, WORDS)
    for name in sample(rng, WORDS, int(rng.integers(3, 7))):
        path = f"home/{owner}/.ssh/{name}_key"
        files[path] = (
            f"-----BEGIN KEY-----\n{rng.bytes(24).hex()}\n-----END KEY-----\n",
            choice(rng, (0o644, 0o664, 0o666)),
        )
        private.append(path)
        files[path + ".pub"] = (f"ssh-ed25519 {rng.bytes(16).hex()} {owner}\n", 0o644)
        public[path + ".pub"] = 0o644
    instruction = (
        f"Lock down home/{owner}/.ssh/: the folder itself must get mode 700, every private key in it (the files "
        "without the .pub suffix) mode 600. The .pub files stay readable: keep them at 644. Do not change contents."
    )
    return (
        instruction,
        files,
        {
            "dir": f"home/{owner}/.ssh",
            "private": private,
            "public": public,
            "contents": {p: v[0] for p, v in files.items()},
        },
    )


def _private_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [is_mode(snap.entries.get(expect["dir"]), 0o700)]
    items += [is_mode(snap.entries.get(p), 0o600) for p in expect["private"]]
    guards = [is_mode(snap.entries.get(p), m) for p, m in expect["public"].items()]
    guards += [snap.text(p) == t for p, t in expect["contents"].items()]
    return scored(items, guards)


def _private_oracle(expect: dict) -> list[str]:
    d = expect["dir"]
    return [f"chmod 700 {d} && find {d} -type f ! -name '*.pub' -exec chmod 600 {{}} +"]


# -- fix_json_config -----------------------------------------------------------------------------
def _json_config_generate(rng: np.random.Generator):
    config = {
        "service": choice(rng, WORDS),
        "port": int(rng.integers(1024, 65535)),
        "debug": bool(rng.random() < 0.5),
        "workers": int(rng.integers(1, 17)),
        "allowed_hosts": [f"{w}.example.org" for w in sample(rng, WORDS, int(rng.integers(1, 4)))],
        "database": {"host": f"db-{choice(rng, WORDS)}", "pool": int(rng.integers(1, 50))},
    }
    text = json.dumps(config, indent=2)
    lines = text.split("\n")
    faults = sample(rng, ("trailing_comma", "comment", "single_quotes", "bare_true"), 2)
    hint = []
    if "trailing_comma" in faults:
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith('"pool"'))
        lines[idx] += ","
    if "comment" in faults:
        lines.insert(1, "  // edited by hand, do not touch")
    if "single_quotes" in faults:
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith('"service"'))
        lines[idx] = lines[idx].replace(f'"{config["service"]}"', f"'{config['service']}'")
    if "bare_true" in faults:
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith('"debug"'))
        lines[idx] = lines[idx].replace("true", "True").replace("false", "False")
    hint = ", ".join(sorted(config))
    instruction = (
        "The service does not start: config/app.json is not valid JSON (someone edited it by hand). Repair it so "
        "that it parses as strict JSON (as Python's json.load reads it) and holds the same settings, with the same "
        f"values and types, that the edit intended (top-level keys: {hint}). Nothing else must change."
    )
    return instruction, {"config/app.json": "\n".join(lines) + "\n"}, {"config": config}


def _json_config_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    text = snap.text("config/app.json")
    try:
        got = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # deep nesting is not the JSON asked for
        got = None
    if not isinstance(got, dict):
        return False, 0.0, "config/app.json is missing or still not valid JSON"
    exp = expect["config"]
    items = [
        k in got and json.dumps(got[k], sort_keys=True) == json.dumps(v, sort_keys=True)
        for k, v in exp.items()
    ]
    return scored(items, [set(got) == set(exp)])


def _json_config_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport ast, json, re\nt = open('config/app.json').read()\n"
        "t = '\\n'.join(l for l in t.split('\\n') if not l.strip().startswith('//'))\n"
        "t = re.sub(r',(\\s*[}\\]])', r'\\1', t).replace(': True', ': true').replace(': False', ': false')\n"
        "t = re.sub(r\": '([^']*)'\", r': \"\\1\"', t)\n"
        "json.dump(json.loads(t), open('config/app.json', 'w'), indent=2)\nEOF"
    ]


# -- fix_ini_config ------------------------------------------------------------------------------
VALIDATOR = '''"""Validate settings.ini: exit 0 when it is valid, else print the problems and exit 1."""
import configparser
import sys

REQUIRED = {
    "server": {"host": str, "port": int, "workers": int},
    "database": {"url": str, "pool_size": int},
    "logging": {"level": str},
}
LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR"}

parser = configparser.ConfigParser(interpolation=None)
try:
    parser.read_string(open(sys.argv[1] if len(sys.argv) > 1 else "settings.ini").read())
except configparser.Error as exc:
    sys.exit(f"not an INI file: {exc}")
problems = []
for section, keys in REQUIRED.items():
    if not parser.has_section(section):
        problems.append(f"missing section [{section}]")
        continue
    for key, kind in keys.items():
        value = parser[section].get(key)
        if value is None:
            problems.append(f"[{section}] {key} is missing")
        elif kind is int and not value.strip().isdigit():
            problems.append(f"[{section}] {key} must be an integer, got {value!r}")
if parser.has_option("server", "port") and parser["server"]["port"].isdigit() and not 0 < int(parser["server"]["port"]) < 65536:
    problems.append("[server] port must be in 1..65535")
if parser.has_option("logging", "level") and parser["logging"]["level"] not in LEVELS:
    problems.append(f"[logging] level must be one of {sorted(LEVELS)}")
if parser.has_option("database", "url") and not parser["database"]["url"].startswith(("postgres://", "sqlite:///")):
    problems.append("[database] url must start with postgres:// or sqlite:///")
print("\\n".join(problems) or "OK")
sys.exit(1 if problems else 0)
'''


def _ini_generate(rng: np.random.Generator):
    values = {
        "server": {
            "host": f"{choice(rng, WORDS)}.internal",
            "port": str(int(rng.integers(1024, 65535))),
            "workers": str(int(rng.integers(1, 17))),
        },
        "database": {
            "url": f"postgres://{choice(rng, WORDS)}:5432/{choice(rng, WORDS)}",
            "pool_size": str(int(rng.integers(1, 40))),
        },
        "logging": {"level": choice(rng, ("DEBUG", "INFO", "WARNING", "ERROR"))},
    }
    broken = json.loads(json.dumps(values))
    fault = choice(rng, ("level_case", "port_unit", "missing_header", "url_scheme"))
    body_order = list(values)
    if fault == "level_case":
        broken["logging"]["level"] = values["logging"]["level"].lower()
        how = f"the logging level must be {values['logging']['level']}"
    elif fault == "port_unit":
        broken["server"]["port"] = f"{values['server']['port']}/tcp"
        how = f"the server port is {values['server']['port']}"
    elif fault == "url_scheme":
        broken["database"]["url"] = values["database"]["url"].replace(
            "postgres://", "postgresql+psycopg://"
        )
        how = "the database URL must use the postgres:// scheme (same host, port and database)"
    else:
        how = "the [database] keys are in the file but their section header was lost"
    lines = []
    for section in body_order:
        if not (fault == "missing_header" and section == "database"):
            lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in broken[section].items()]
        lines.append("")
    instruction = (
        "`python3 tools/validate.py settings.ini` rejects settings.ini. Repair settings.ini (not the validator) so that "
        f"it passes, keeping every other setting as it is. What was meant: {how}."
    )
    files = {"settings.ini": "\n".join(lines), "tools/validate.py": VALIDATOR}
    return instruction, files, {"values": values, "fault": fault}


def _ini_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    text = snap.text("settings.ini")
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text or "")
    except configparser.Error:
        return False, 0.0, "settings.ini is not an INI file"
    if text is None:
        return False, 0.0, "settings.ini is missing"
    values = expect["values"]
    fault_section = {
        "level_case": "logging",
        "port_unit": "server",
        "url_scheme": "database",
        "missing_header": "database",
    }[expect["fault"]]

    def same(section: str) -> bool:
        return parser.has_section(section) and dict(parser[section]) == values[section]

    items = [same(fault_section)]
    guards = [same(s) for s in values] + [set(parser.sections()) == set(values)]
    guards.append(snap.text("tools/validate.py") == VALIDATOR)
    return scored(items, guards)


def _ini_oracle(expect: dict) -> list[str]:
    v = expect["values"]
    body = "".join(
        f"[{s}]\n" + "".join(f"{k} = {x}\n" for k, x in kv.items()) + "\n" for s, kv in v.items()
    )
    return [f"cat > settings.ini <<'EOF'\n{body}EOF", "python3 tools/validate.py settings.ini"]


# -- fix_build -----------------------------------------------------------------------------------
BUILD = '''"""Bundle the chapters: every src/*.txt, sorted by file name, into dist/book.txt.

Each chapter is preceded by a line `== <file name without .txt> ==`; chapters are separated by one
empty line. Run from the project root: python3 build.py
"""
import os

SRC, OUT = "src", "dist/book.txt"


def chapters(folder):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".txt"))
    for name in names:
        with open(os.path.join(folder, name)) as handle:
            yield name[: -len(".txt")], handle.read().strip("\\n")


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    parts = [f"== {title} ==\\n{body}" for title, body in chapters(SRC)]
    with open(OUT, "w") as handle:
        handle.write("\\n\\n".join(parts) + "\\n")


if __name__ == "__main__":
    main()
'''

BUGS = {
    "folder": ('SRC, OUT = "src", "dist/book.txt"', 'SRC, OUT = "source", "dist/book.txt"'),
    "suffix": ('if n.endswith(".txt")', 'if n.endswith(".text")'),
    "name": ("for title, body in chapters(SRC)", "for title, body in chapter(SRC)"),
    "makedirs": (
        "os.makedirs(os.path.dirname(OUT), exist_ok=True)",
        "os.makedirs(os.path.dirname(OUT))\n    os.rmdir(os.path.dirname(OUT))",
    ),
}


def _book(chapters: dict[str, str]) -> str:
    return (
        "\n\n".join(f"== {n[:-4]} ==\n{t.strip(chr(10))}" for n, t in sorted(chapters.items()))
        + "\n"
    )


def _chapters(rng: np.random.Generator) -> dict[str, str]:
    return {
        f"{i:02d}-{w}.txt": "".join(
            " ".join(sample(rng, WORDS, 6)) + "\n" for _ in range(int(rng.integers(1, 4)))
        )
        for i, w in enumerate(sample(rng, WORDS, int(rng.integers(2, 6))), 1)
    }


def _build_generate(rng: np.random.Generator):
    bug = choice(rng, sorted(BUGS))
    good, bad = BUGS[bug]
    chapters = _chapters(rng)
    hidden = [_chapters(rng) for _ in range(2)]
    files = {"build.py": BUILD.replace(good, bad), **{f"src/{n}": t for n, t in chapters.items()}}
    files["src/notes.md"] = "not a chapter\n"
    instruction = (
        "`python3 build.py` should bundle the chapters src/*.txt into dist/book.txt (its docstring says how), but it "
        "fails or writes the wrong thing. Fix build.py, then run it so that dist/book.txt is up to date. The fixed "
        "build.py will also be run on other chapters."
    )
    return (
        instruction,
        files,
        {
            "book": _book(chapters),
            "hidden": [{"chapters": h, "book": _book(h)} for h in hidden],
        },
    )


def _build_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    items = [snap.text("dist/book.txt") == expect["book"]]
    build = snap.data("build.py")
    if build is None:
        return scored([False] * 3)
    for case in expect["hidden"]:
        files = {"build.py": build, **{f"src/{n}": t for n, t in case["chapters"].items()}}
        status, _, after = runner.shell(files, "python3 build.py", timeout=10.0, snapshot=True)
        items.append(
            after is not None and status == 0 and after.text("dist/book.txt") == case["book"]
        )
    return scored(items, detail="dist/book.txt and two builds of new chapters")


def _build_oracle(expect: dict) -> list[str]:
    return [
        "cat > build.py <<'VERIGYM_EOF'\n" + BUILD + "VERIGYM_EOF",
        "python3 build.py",
    ]


TEMPLATES = [
    Template("chmod_scripts", "perms", _chmod_generate, _chmod_check, _chmod_oracle),
    Template("private_keys", "perms", _private_generate, _private_check, _private_oracle),
    Template(
        "fix_json_config", "repair", _json_config_generate, _json_config_check, _json_config_oracle
    ),
    Template("fix_ini_config", "repair", _ini_generate, _ini_check, _ini_oracle),
    Template("fix_build", "repair", _build_generate, _build_check, _build_oracle),
]
