"""Registration rows of the tool family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

# One id per task kind (plus a harder row where cheap): every id runs the full ``verigym check`` in
# the default test run. Other levels are constructor kwargs: gym.make("verigym/SQL-v0", difficulty=1).
_PACKAGE = "verigym.envs.tool"

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
]
