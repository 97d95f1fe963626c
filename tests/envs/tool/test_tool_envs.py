"""The tool family: protocol, verifiers, attacks on the verdicts, and oracle success on 200 seeds."""

from __future__ import annotations

import json
import pickle
import time

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.sandbox.support import SANDBOX_ERROR, needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.core import ActionParseError
from verigym.envs.tool.calculator import CalculatorError, evaluate
from verigym.envs.tool.function_calling import calls_score
from verigym.envs.tool.python_math import parse_integer_answer
from verigym.envs.tool.search_qa import answer_f1, normalize_answer
from verigym.envs.tool.sql import QueryError, results_match, run_query
from verigym.sandbox import supervisor
from verigym.toolcalls import FinalAnswer, Tool, ToolCall, parse_reply

TOOL_IDS = [r.id for r in verigym.rows("tool")]
SANDBOX_IDS = {"verigym/PythonMath-v0", "verigym/CodeUnitTests-v0"}


def play(env: gym.Env, actions) -> tuple[str, float, bool, bool, dict]:
    for action in actions:
        result = env.step(action)
        if result[2] or result[3]:
            return result
    return result


# -- protocol -------------------------------------------------------------------------------------

ECHO = Tool(
    "echo",
    "repeat",
    {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "s": {"type": "string", "enum": ["a", "b"]}},
        "required": ["n"],
    },
)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "echo", "arguments": {"n": 3}}</tool_call>',
        '<think>maybe <answer>1</answer></think>{"name": "echo", "arguments": {"n": 3}}',
        '<tool_call>{"name": "echo", "arguments": "{\\"n\\": 3.0}"}</tool_call>',
        '<tool_call>\n```json\n{"type": "function", "function": {"name": "echo", "arguments": {"n": 3}}}\n```\n</tool_call>',
    ],
)
def test_tool_call_formats(text):
    assert parse_reply(text, [ECHO], max_length=1000) == ToolCall("echo", {"n": 3})


@pytest.mark.parametrize(
    "text, message",
    [
        ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', "unknown tool"),
        ('<tool_call>{"name": "echo", "arguments": {}}</tool_call>', "missing required"),
        (
            '<tool_call>{"name": "echo", "arguments": {"n": "3"}}</tool_call>',
            "must be of type integer",
        ),
        ('<tool_call>{"name": "echo", "arguments": {"n": true}}</tool_call>', "boolean"),
        (
            '<tool_call>{"name": "echo", "arguments": {"n": 1, "s": "c"}}</tool_call>',
            "must be one of",
        ),
        (
            '<tool_call>{"name": "echo", "arguments": {"n": 1, "x": 2}}</tool_call>',
            "has no argument",
        ),
        ('<tool_call>{"name": "echo", "arguments": {"n": 1}</tool_call>', "not valid JSON"),
        ("just some words", "reply with one tool call"),
        ("<tool_call>{}</tool_call>", "a tool call is a JSON object"),
        (
            '<tool_call>{"name": "echo", "arguments": {"n": 1}}</tool_call>' * 2,
            "one tool call per turn",
        ),
    ],
)
def test_bad_calls_are_parse_errors(text, message):
    with pytest.raises(ActionParseError, match=message):
        parse_reply(text, [ECHO], max_length=1000)


def test_final_answer_and_limits():
    assert parse_reply(
        "<think>x</think> <answer> 42 </answer>", [ECHO], max_length=100
    ) == FinalAnswer("42")
    assert parse_reply(
        "<answer>```python\ndef f(): pass\n```</answer>", [ECHO], max_length=100
    ) == FinalAnswer("def f(): pass")
    with pytest.raises(ActionParseError, match="at most 10"):
        parse_reply("<answer>123456</answer>", [ECHO], max_length=10)
    with pytest.raises(TypeError):
        parse_reply(b"<answer>1</answer>", [ECHO], max_length=100)


def test_integer_answers_refuse_hedges():
    assert parse_integer_answer("1,234") == 1234
    assert parse_integer_answer(" -7. ") == -7
    assert parse_integer_answer("12.0") == 12
    for hedge in ("41 or 42", "41, 42", "about 40", "4e2", ""):
        assert parse_integer_answer(hedge) is None


@pytest.mark.parametrize("env_id", TOOL_IDS)
def test_instructions_list_the_tools_as_schemas(env_id):
    env = gym.make(env_id)
    observation, _ = env.reset(seed=3)
    text = env.unwrapped.instructions() + observation
    assert '"type": "function"' in text and '"parameters"' in text
    env.close()


# -- calculator -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression", ["9**9**9**9", "2**100000", "factorial(10**6)", "(10**1000)**5", "10**-100000"]
)
def test_calculator_refuses_huge_values_fast(expression):
    start = time.monotonic()
    with pytest.raises(CalculatorError):
        evaluate(expression)
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "open('/etc/passwd')",
        "().__class__",
        "[x for x in (1,)]",
        "a + 1",
        "lambda: 1",
        "1 if 1 else 2",
        "1; 2",
    ],
)
def test_calculator_refuses_code(expression):
    with pytest.raises(CalculatorError):
        evaluate(expression)


def test_calculator_is_exact():
    assert evaluate("(7 - 3) * 5 // 3 + 10 % 4") == 8
    assert str(evaluate("1/3 + 1/6")) == "1/2"
    assert (
        evaluate("gcd(12, 18) + lcm(4, 6) + factorial(5) + abs(-2) + max(1, 9) - min(3, 4)")
        == 6 + 12 + 120 + 2 + 9 - 3
    )
    with pytest.raises(CalculatorError, match="division by zero"):
        evaluate("1 // (2 - 2)")
    env = gym.make("verigym/Calculator-v0")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(
        '<tool_call>{"name": "calculate", "arguments": {"expression": "__import__(\'os\')"}}</tool_call>'
    )
    assert "not allowed" in info["action_error"] and reward < 0 and not terminated
    env.close()


# -- SQL ------------------------------------------------------------------------------------------


@pytest.fixture
def sql_env():
    env = gym.make("verigym/SQL-v0")
    env.reset(seed=5)
    yield env
    env.close()


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE employees",
        "INSERT INTO departments VALUES (99, 'x', 'y')",
        "UPDATE employees SET salary = 0",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "PRAGMA query_only = OFF",
        "SELECT 1; DROP TABLE employees",
        "CREATE TABLE t (x)",
        "SELECT load_extension('x')",
        "SELECT LOAD_EXTENSION('x')",
        # Debian's SQLite enables the two-argument form: it overwrote a C function pointer
        "SELECT fts3_tokenizer('simple', x'4141414141414141')",
        "SELECT fts3_tokenizer('simple')",  # read one (an address of the process)
    ],
)
def test_sql_is_read_only(sql_env, query):
    connection = sql_env.unwrapped._db()
    with pytest.raises(QueryError):
        run_query(connection, query)
    assert run_query(connection, "SELECT COUNT(*) FROM employees")[1][0][0] > 0


def test_sql_time_limit_and_row_cap(sql_env):
    connection = sql_env.unwrapped._db()
    start = time.monotonic()
    with pytest.raises(QueryError, match="longer than"):
        run_query(
            connection,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
            seconds=0.3,
        )
    assert time.monotonic() - start < 3.0
    with pytest.raises(QueryError, match="more than"):
        run_query(connection, "SELECT * FROM employees a, employees b")


def test_sql_time_limit_is_cpu_time_so_load_does_not_change_the_answer(sql_env):
    """A query that waits for a core (here: a function that sleeps 0.4 s inside it) is not stopped by
    a 0.2 s limit; only computing counts, so a loaded machine gives the same answer as an idle one."""
    connection = sql_env.unwrapped._db()
    connection.create_function("nap", 0, lambda: time.sleep(0.4) or 1)
    query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT COUNT(*) FROM c WHERE x != 1 OR nap()"
    assert run_query(connection, query, seconds=0.2)[1] == [(20000,)]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT length(randomblob(2e9))",
        "SELECT length(zeroblob(2000000000))",
        "SELECT length(replace(printf('%.*c', 900000, 'x'), 'x', 'xxxxxxxxxx'))",
        "SELECT length(printf('%.*c', 999999, 'x') || printf('%.*c', 999999, 'x'))",
        "SELECT length(printf('%.*c', 2000000000, 'x'))",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000000) SELECT x FROM c ORDER BY random() LIMIT 1",
        "SELECT " + " + ".join(["1"] * 2000),
    ],
)
def test_sql_is_bounded_inside_one_function_call(sql_env, query):
    """Work inside one function call or expression (invisible to the progress handler) is bounded
    by SQLite's limits and by the worker's hard deadline and memory cap (issue 16, section 2)."""
    from verigym.envs.tool.sql import HARD_DEADLINE_MARGIN, QUERY_SECONDS, run_query_bounded

    start = time.monotonic()
    with pytest.raises(QueryError):
        run_query_bounded(sql_env.unwrapped._rows, query)
    assert time.monotonic() - start < QUERY_SECONDS + HARD_DEADLINE_MARGIN + 5.0
    # the worker is replaced after a kill: the next query works
    assert run_query_bounded(sql_env.unwrapped._rows, "SELECT COUNT(*) FROM employees")[1][0][0] > 0


def test_sql_answer_with_a_huge_blob_scores_zero(sql_env):
    _, reward, terminated, _, info = sql_env.step(
        "<answer>SELECT length(printf('%.*c', 2000000000, 'x'))</answer>"
    )
    assert terminated and reward == 0.0 and not info["success"]


def test_sql_execution_match():
    assert results_match([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], ordered=False)
    assert not results_match([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], ordered=True)
    assert not results_match([(1,), (1,)], [(1,)], ordered=False)
    assert results_match([(0.1 + 0.2,)], [(0.3,)], ordered=True)


def test_sql_equivalent_query_scores_and_wrong_query_does_not():
    env = gym.make("verigym/SQL-v0", difficulty=1)
    for seed in range(40):
        env.reset(seed=seed)
        gold = env.unwrapped._gold_sql
        if "COUNT(*)" in gold:
            break
    equivalent = gold.replace("SELECT COUNT(*)", "SELECT COUNT(e.id)")
    assert play(env, [f"<answer>{equivalent}</answer>"])[4]["success"]
    env.reset(seed=seed)
    assert not play(env, ["<answer>SELECT 12345</answer>"])[4]["success"]
    env.reset(seed=seed)
    assert not play(env, ["<answer>DROP TABLE employees</answer>"])[4]["success"]
    env.close()


# -- SearchQA -------------------------------------------------------------------------------------


def test_search_finds_the_chain_and_the_answer_is_in_the_last_article():
    env = gym.make("verigym/SearchQA-3Hop-v0")
    for seed in range(20):
        env.reset(seed=seed)
        inner = env.unwrapped
        hits = inner._search(inner._chain[0])
        assert hits.splitlines()[0].startswith(f"1. {inner._chain[0]}:")
        assert inner._gold in inner._articles[inner._chain[-1]]
    env.close()


def test_searchqa_scoring_and_counts():
    assert normalize_answer("The  Velmor, Guild!") == "velmor guild"
    assert answer_f1("Velmor Guild", "velmor") == pytest.approx(2 / 3)
    env = gym.make("verigym/SearchQA-v0")
    env.reset(seed=1)
    gold = env.unwrapped._gold
    _, _, _, _, info = env.step(
        '<tool_call>{"name": "search", "arguments": {"query": "guild"}}</tool_call>'
    )
    assert info["searches"] == 1 and info["tool_calls"] == 1
    _, _, _, _, info = env.step(
        '<tool_call>{"name": "open", "arguments": {"title": "No Such Page"}}</tool_call>'
    )
    assert "no article" in info["action_error"]
    *_, info = env.step(f"<answer>{gold} or Atlantis</answer>")
    assert not info["success"] and info["score"] == 0.0  # no partial credit for a hedge
    env.reset(seed=1)
    *_, info = env.step(f"<answer>the {gold.upper()}</answer>")
    assert info["success"] and info["searches"] == 0
    env.close()


def test_searchqa_f1_gives_no_partial_credit_for_a_hedge():
    env = gym.make("verigym/SearchQA-v0", reward="f1")
    env.reset(seed=0)
    gold = env.unwrapped._gold
    other = next(t for t in env.unwrapped._titles if " " not in t and t != gold)
    for hedge in (f"{gold} or {other}", f"{other}, {gold}", f"{gold} {other}"):
        env.reset(seed=0)
        _, reward, *_, info = env.step(f"<answer>{hedge}</answer>")
        assert reward == 0.0 and info["score"] == 0.0, hedge  # was F1 0.5-0.67
    env.reset(seed=0)
    _, reward, *_ = env.step(f"<answer>in {gold}</answer>")
    assert reward == pytest.approx(2 / 3)  # a superset without another name keeps its token F1
    env.reset(seed=0)
    assert env.step(f"<answer>{gold}</answer>")[1] == 1.0
    env.close()


# -- FunctionCalling ------------------------------------------------------------------------------


def test_calls_score_is_order_insensitive_and_normalizes_types():
    gold = [
        ("get_weather", {"city": "Oslo", "unit": "celsius"}),
        ("get_weather", {"city": "Lima", "unit": "celsius"}),
    ]
    assert calls_score(list(reversed(gold)), gold) == 1.0
    assert calls_score([("get_weather", {"city": " oslo ", "unit": "celsius"})], gold) == 0.5
    assert calls_score(gold + gold[:1], gold) == pytest.approx(2 / 3)
    assert calls_score([], []) == 1.0 and calls_score(gold, []) == 0.0
    assert calls_score([("set_timer", {"minutes": 5.0})], [("set_timer", {"minutes": 5})]) == 1.0


def test_function_calling_integer_too_large_for_a_float_is_a_wrong_value():
    # math.isclose / math.isfinite raised OverflowError out of step() on a 4000-digit integer
    huge = 10**3999
    assert calls_score([("set_timer", {"minutes": huge})], [("set_timer", {"minutes": 5})]) == 0.0
    assert calls_score([("set_timer", {"minutes": huge})], [("set_timer", {"minutes": 5.5})]) == 0.0
    assert (
        calls_score([("set_timer", {"minutes": huge})], [("set_timer", {"minutes": huge})]) == 1.0
    )
    env = gym.make("verigym/FunctionCalling-v0")
    env.reset(seed=1)
    name, arguments = env.unwrapped._gold[0]
    key = next(k for k, v in arguments.items() if type(v) in (int, float))
    reply = json.dumps({"name": name, "arguments": {**arguments, key: 0}})
    reply = reply.replace(f'"{key}": 0', f'"{key}": {"9" * 4000}')
    _, reward, terminated, _, info = env.step(f"<tool_call>{reply}</tool_call>")
    assert terminated and reward == 0.0 and not info["success"]
    with pytest.raises(ActionParseError, match="finite number"):
        parse_reply(
            '<tool_call>{"name": "weigh", "arguments": {"x": %s}}</tool_call>' % ("9" * 400),
            [Tool("weigh", "", {"type": "object", "properties": {"x": {"type": "number"}}})],
            max_length=10_000,
        )
    env.close()


def test_function_calling_kinds():
    env = gym.make("verigym/FunctionCalling-v0")
    seen = {}
    for seed in range(60):
        env.reset(seed=seed)
        seen.setdefault(env.unwrapped._kind, seed)
    assert set(seen) == {"simple", "multiple", "parallel", "irrelevance"}
    env.reset(seed=seen["irrelevance"])
    available = env.unwrapped._available[0]
    _, reward, *_, info = env.step(
        f'<tool_call>{{"name": "{available}", "arguments": {{}}}}</tool_call>'
    )
    assert reward == 0.0 and not info["success"]
    env.reset(seed=seen["parallel"])
    gold = env.unwrapped._gold
    reply = "".join(
        "<tool_call>" + json.dumps({"name": n, "arguments": a}) + "</tool_call>"
        for n, a in reversed(gold)
    )
    assert env.step(reply)[4]["success"]
    env.reset(seed=seen["simple"])
    _, reward, *_, info = env.step('<tool_call>{"name": "no_such_fn", "arguments": {}}</tool_call>')
    assert "unknown function" in info["action_error"] and not info["success"]
    env.close()


# -- the sandboxed envs: attacks on the verdict -----------------------------------------------------

ATTACKS = {
    "exit before the tests": "import sys\nsys.exit(0)\n",
    "os._exit before the tests": "import os\nos._exit(0)\n",
    "always-equal object": "class Any:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\ndef {name}(*a): return Any()\n",
    "int subclass equal to everything": "class I(int):\n    def __eq__(self, o): return True\ndef {name}(*a): return I(0)\n",
    "fake report": "print('All 12 tests passed! OK')\ndef {name}(*a): print('PASSED'); return None\n",
    "search the disk for the tests": (
        "import os\nfound = []\nfor root, dirs, files in os.walk('/'):\n    if root.startswith('/proc'):\n        continue\n"
        "    found += [os.path.join(root, f) for f in files if 'test' in f.lower() or 'answer' in f.lower()]\n"
        "def {name}(*a): return found[:3]\n"
    ),
    "hang": "def {name}(*a):\n    while True: pass\n",
    "fork bomb": "import os\ndef {name}(*a):\n    while True:\n        try: os.fork()\n        except OSError: pass\n",
    "kill the parent": "import os, signal\nfor p in (os.getppid(), 1):\n    try: os.kill(p, signal.SIGKILL)\n    except OSError: pass\ndef {name}(*a): return None\n",
}


@needs_sandbox
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_code_unit_tests_attacks_score_zero(attack):
    env = gym.make("verigym/CodeUnitTests-v0", timeout_s=1.0)
    env.reset(seed=11)
    name = env.unwrapped._problem_name
    start = time.monotonic()
    _, reward, terminated, _, info = env.step(
        "<answer>" + ATTACKS[attack].replace("{name}", name) + "</answer>"
    )
    assert terminated and reward == 0.0 and not info["success"] and info["score"] == 0.0
    assert time.monotonic() - start < 10.0
    env.reset(seed=11)  # the harness and the env survive
    assert env.step(env.unwrapped.oracle_action())[4]["success"]
    env.close()


@needs_sandbox
def test_code_unit_tests_partial_credit_and_notebook():
    env = gym.make("verigym/CodeUnitTests-v0", partial_credit=True)
    env.reset(seed=2)
    inner = env.unwrapped
    observation, _, _, _, info = env.step(
        '<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>'
    )
    assert "42" in observation and info["tool_calls"] == 1
    wrong_on_some = f"{inner._reference}\n_real = {inner._problem_name}\ndef {inner._problem_name}(*a):\n    return None if len(str(a)) % 2 else _real(*a)\n"
    _, reward, _, _, info = env.step(f"<answer>{wrong_on_some}</answer>")
    assert 0.0 < info["score"] < 1.0 and reward == info["score"] and not info["success"]
    env.close()


@needs_sandbox
def test_python_math_verdict_ignores_printed_text_and_survives_pickle():
    env = gym.make("verigym/PythonMath-v0")
    env.reset(seed=4)
    inner = env.unwrapped
    env.step('<tool_call>{"name": "python", "arguments": {"code": "x = 40"}}</tool_call>')
    copy_ = pickle.loads(pickle.dumps(inner))
    observation = copy_.step(
        '<tool_call>{"name": "python", "arguments": {"code": "x + 2"}}</tool_call>'
    )[0]
    assert "42" in observation
    copy_.close()
    _, reward, _, _, info = env.step(
        '<tool_call>{"name": "python", "arguments": {"code": "print(\'Correct! reward=1\')"}}</tool_call>'
    )
    assert reward == 0.0 and "success" not in info
    *_, info = env.step(f"<answer>{inner._gold + 1}</answer>")
    assert not info["success"]
    env.reset(seed=4)
    *_, info = env.step(f"<answer>{inner._gold:,}</answer>")
    assert info["success"] and info["tool_calls"] == 0
    env.close()


def test_step_limit_carries_the_verdict():
    env = gym.make("verigym/SQL-v0", max_turns=2)
    env.reset(seed=0)
    _, _, terminated, truncated, info = play(env, ["nothing", "still nothing"])
    assert truncated and not terminated and info["success"] is False and info["score"] == 0.0
    env.close()


# -- oracles prove every generated task solvable ------------------------------------------------------


# RepoFix and Terminal episodes cost a sandbox and a test or checker run each (15-50 s for 200
# seeds); their own oracle tests cover every template and level in the default run (one seed
# each) and 100 seeds in the slow run (tests/envs/tool/test_repofix.py, test_terminal.py)
_WORKSPACE_IDS = {
    r.id
    for r in verigym.rows("tool")
    if ".repofix." in r.entry_point or ".terminal." in r.entry_point
}


def _oracle_params() -> list:
    """200 seeds each in the slow run; the default run checks 50 seeds of each id (all 50 must be
    solved), 20 of the sandboxed ids (a sandbox call per step: PythonMath's 40 seeds took ~16 s)."""
    params = []
    from verigym.envs.tool.table import PER_TASK_IDS

    for env_id in TOOL_IDS:
        if env_id in PER_TASK_IDS:  # one repository or one template: 100 seeds in their own tests
            continue
        if env_id in _WORKSPACE_IDS:
            params.append(pytest.param(env_id, 200, marks=pytest.mark.slow))
        elif env_id in SANDBOX_IDS:
            params += [(env_id, 20), pytest.param(env_id, 200, marks=pytest.mark.slow)]
        else:
            params += [(env_id, 50), pytest.param(env_id, 200, marks=pytest.mark.slow)]
    return params


@pytest.mark.parametrize(("env_id", "seeds"), _oracle_params())
def test_oracle_solves_99_percent_of_the_seeds(env_id, seeds):
    if env_id in SANDBOX_IDS and SANDBOX_ERROR:
        pytest.skip(f"sandbox unavailable: {SANDBOX_ERROR[:200]}")
    env = gym.make(env_id)
    inner = env.unwrapped
    wins = 0
    for seed in range(seeds):
        env.reset(seed=10_000 + seed)
        info = play(env, iter(inner.oracle_action, None))[4]
        wins += info["success"]
    env.close()
    assert wins >= seeds - seeds // 100, f"{env_id}: oracle solved {wins}/{seeds}"


# -- fuzzing: agent text never crashes a parser or the calculator ---------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<answer>",
        "</answer>",
        "<think>",
        '{"name": "echo"',
        '"arguments": {',
        '"n": 1',
        "}",
        "{",
        "[",
        '"',
        ",",
        ":",
        "```",
        "\\ud800",
        "null",
        "1e999",
        "9" * 30,
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12).map("".join))
def test_parse_reply_only_raises_action_parse_errors(text):
    try:
        result = parse_reply(text, [ECHO], max_length=10_000)
    except ActionParseError as exc:
        assert str(exc)
    else:
        assert isinstance(result, (ToolCall, FinalAnswer))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            list("0123456789+-*/%() .,e_jx")
            + ["**", "//", "abs(", "factorial(", "9**9", "__import__", "'os'"]
        ),
        max_size=30,
    ).map("".join)
)
def test_calculator_only_raises_calculator_errors(expression):
    start = time.monotonic()
    try:
        evaluate(expression)
    except CalculatorError as exc:
        assert str(exc)
    assert time.monotonic() - start < 1.0


def test_doctor_probe_names_the_fix_without_bubblewrap(monkeypatch):
    from verigym.sandbox import doctor_probe

    monkeypatch.setattr(supervisor, "bwrap_features", lambda: (None, False))
    probe = doctor_probe()
    assert not probe.ok and "apt-get install -y bubblewrap" in probe.fix
