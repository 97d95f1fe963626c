"""Registration rows of the tool family (imported by ``import verigym``; keep it light)."""

from importlib.util import find_spec

from verigym.registration import EnvRow, variants

# One id per task kind (plus a harder row where cheap): every id runs the full ``verigym check`` in
# the default test run. Other levels are constructor kwargs: gym.make("verigym/SQL-v0", difficulty=1).
# RepoFix and Terminal also have one id per repository and per template (issue 30: a user can train
# or evaluate on one of them, or hold some out); those variants run ``verigym check`` in the slow run.
_PACKAGE = "verigym.envs.tool"

REPOFIX_PROJECTS: dict[str, tuple[str, str]] = {
    "cmdline": ("CmdLine", "a command-line argument parser"),
    "csvlite": ("CsvLite", "a CSV reader and writer"),
    "durations": ("Durations", "duration parsing and formatting"),
    "exprcalc": ("ExprCalc", "an arithmetic expression evaluator"),
    "fsm": ("Fsm", "a finite state machine"),
    "graphs": ("Graphs", "graph algorithms"),
    "intervals": ("Intervals", "an interval tree"),
    "jsonpointer": ("JsonPointer", "JSON Pointer (RFC 6901)"),
    "lrucache": ("LruCache", "an LRU cache"),
    "matrix": ("Matrix", "exact rational matrices"),
    "semver": ("SemVer", "semantic versions"),
    "textkit": ("TextKit", "text utilities"),
}
"""RepoFix project (``project=`` kwarg) -> (id name, what it is); ``RepoFix-<id name>-v0``. Kept here
as literals (this module must stay light); a test compares it with ``repofix.env.PROJECTS``."""

TERMINAL_TEMPLATES: dict[str, tuple[str, str]] = {
    "error_counts": ("text", "count ERROR lines per service over log files"),
    "unique_ips": ("text", "the distinct client IPs of 404s in an access log"),
    "top_words": ("text", "the most frequent words of a text"),
    "slow_requests": ("text", "the ids of slow requests in a log"),
    "dedupe_lines": ("text", "remove repeated lines in place, order kept"),
    "csv_filter": ("data", "filter CSV rows by two conditions"),
    "csv_aggregate": ("data", "sum a CSV column per category into JSON"),
    "json_to_csv": ("data", "a JSON list of records to a filtered, sorted CSV"),
    "jsonl_latest": ("data", "the latest version of each key over JSON-lines files"),
    "csv_join": ("data", "an inner join of two CSV files"),
    "rename_identifier": ("refactor", "rename a Python function everywhere, exact name only"),
    "config_key": ("refactor", "rename a key in every INI config"),
    "replace_url": ("refactor", "replace a URL in the docs, other files untouched"),
    "trailing_whitespace": ("refactor", "strip trailing whitespace and fix final newlines"),
    "bump_version": ("refactor", "bump a project's version everywhere it is stated"),
    "tar_create": ("files", "a tar.gz of the .txt files of a tree"),
    "tar_extract": ("files", "extract a tar.gz into a folder"),
    "zip_select": ("files", "extract only the .csv files of a zip, flattened"),
    "flatten_dir": ("files", "move every file of a nested tree into one folder"),
    "dedupe_content": ("files", "delete files with duplicate contents, first path kept"),
    "sort_by_extension": ("files", "sort files into folders by extension"),
    "script_colsum": ("script", "a CSV column-sum program, run on hidden inputs"),
    "script_errors": ("script", "an executable log filter, run on hidden inputs"),
    "script_json_get": ("script", "a JSON key-path program, run on hidden inputs"),
    "git_commit": ("git", "commit modified and untracked work (needs git)"),
    "git_branch": ("git", "a branch with a new commit (needs git)"),
    "git_restore": ("git", "restore one file, keep another's changes (needs git)"),
    "chmod_scripts": ("perms", "set script and file modes under a tree"),
    "private_keys": ("perms", "lock down an .ssh folder's modes"),
    "fix_json_config": ("repair", "repair an invalid JSON config"),
    "fix_ini_config": ("repair", "repair an INI file a validator rejects"),
    "fix_build": ("repair", "fix a failing build script and run it"),
}
"""Terminal template (``template=`` kwarg) -> (group, what it asks); ``Terminal-<CamelCase>-v0``.
Literals for the same reason; a test compares them with ``terminal.templates.TEMPLATES``."""


def terminal_id_name(template: str) -> str:
    """The id name of a Terminal template: ``csv_join`` -> ``CsvJoin``."""
    return "".join(part.capitalize() for part in template.split("_"))


ROWS: list[EnvRow] = [
    *variants(
        "verigym/PythonMath{}-v0",
        f"{_PACKAGE}.python_math:PythonMathEnv",
        family="tool",
        rows={"": {}},
        description="Math word problems with a sandboxed Python tool; integer answer verified.",
    ),
    *variants(
        "verigym/CodeUnitTests{}-v0",
        f"{_PACKAGE}.code_unit_tests:CodeUnitTestsEnv",
        family="tool",
        rows={"": {}},
        description="Write a function from a spec; hidden unit tests run in a fresh sandbox.",
    ),
    *variants(
        "verigym/SQL{}-v0",
        f"{_PACKAGE}.sql:SQLEnv",
        family="tool",
        rows={"": {}, "-Hard": {"difficulty": 3}},
        description="Questions over a generated SQLite database; execution match of the submitted query.",
    ),
    *variants(
        "verigym/SearchQA{}-v0",
        f"{_PACKAGE}.search_qa:SearchQAEnv",
        family="tool",
        rows={"": {}, "-3Hop": {"hops": 3, "corpus_size": 40}},
        description="Multi-hop QA over a generated fictional encyclopedia with BM25 search and open tools.",
    ),
    *variants(
        "verigym/FunctionCalling{}-v0",
        f"{_PACKAGE}.function_calling:FunctionCallingEnv",
        family="tool",
        rows={"": {}},
        description="User requests plus function schemas; structured match of the calls (simple, multiple, parallel, none).",
    ),
    *variants(
        "verigym/Calculator{}-v0",
        f"{_PACKAGE}.calculator:CalculatorEnv",
        family="tool",
        rows={"": {}, "-Hard": {"difficulty": 3}},
        description="Exact integer arithmetic with an AST allow-list calculator tool.",
    ),
    *variants(
        "verigym/RepoFix{}-v0",
        f"{_PACKAGE}.repofix.env:RepoFixEnv",
        family="tool",
        rows={
            "": {"level": "file"},
            "-Anywhere": {"level": "anywhere"},
            "-TwoBugs": {"level": "pair"},
        },
        description="Fix a synthesized bug in a small Python repository (SWE-smith style); hidden tests in a fresh sandbox.",
    ),
    *(
        EnvRow(
            id=f"verigym/RepoFix-{name}-v0",
            entry_point=f"{_PACKAGE}.repofix.env:RepoFixEnv",
            family="tool",
            kwargs={"project": project},
            description=f"RepoFix on one repository, {what}: one bug, its file named (level= for the others).",
        )
        for project, (name, what) in REPOFIX_PROJECTS.items()
    ),
    *variants(
        "verigym/RepoFix{}-v0",
        f"{_PACKAGE}.repofix.real_env:RepoFixRealEnv",
        family="tool",
        rows={
            "-Real": {},
            "-Boltons": {"library": "boltons"},
            "-Cachetools": {"library": "cachetools"},
            "-Click": {"library": "click"},
            "-Idna": {"library": "idna"},
            "-Inflection": {"library": "inflection"},
            "-Itsdangerous": {"library": "itsdangerous"},
            "-MoreItertools": {"library": "more-itertools"},
            "-Pyparsing": {"library": "pyparsing"},
            # semver's repository is python-semver (RepoFix-SemVer-v0 is RepoFix-v0's toy project)
            "-PythonSemver": {"library": "semver"},
            "-Tabulate": {"library": "tabulate"},
            "-Toolz": {"library": "toolz"},
            "-Webcolors": {"library": "webcolors"},
            # attrs' suite needs hypothesis (MPL-2.0, not vendored: the test extra): only then
            **({"-Attrs": {"library": "attrs"}} if find_spec("hypothesis") else {}),
        },
        description="RepoFix on real vendored libraries (PyPI sdists): a synthesized bug proven by the library's own pytest suite (issue 40).",
    ),
    *variants(
        "verigym/Terminal{}-v0",
        f"{_PACKAGE}.terminal.env:TerminalEnv",
        family="tool",
        rows={
            "": {},
            **{
                f"-{group.capitalize()}": {"group": group}
                for group in (
                    "text",
                    "data",
                    "refactor",
                    "files",
                    "script",
                    "git",
                    "perms",
                    "repair",
                )
            },
        },
        description="Shell tasks (Terminal-Bench style) in the sandbox, judged by the files they leave.",
    ),
    *(
        EnvRow(
            id=f"verigym/Terminal-{terminal_id_name(template)}-v0",
            entry_point=f"{_PACKAGE}.terminal.env:TerminalEnv",
            family="tool",
            kwargs={"template": template},
            description=f"Terminal task {template} ({group}): {what}.",
        )
        for template, (group, what) in TERMINAL_TEMPLATES.items()
    ),
]

PER_TASK_IDS: frozenset[str] = frozenset(
    row.id
    for row in ROWS
    if ("project" in row.kwargs and ".repofix." in row.entry_point)
    or ("template" in row.kwargs and ".terminal." in row.entry_point)
)
"""The one-repository RepoFix ids and the one-template Terminal ids: their tests that replay the same
code as ``RepoFix-v0`` / ``Terminal-v0`` (conformance, the pinned adversarial replies) run in the
slow run."""
