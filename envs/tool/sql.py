"""SQL: questions over a generated SQLite database, answered with a query; execution-match reward."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.kwargs_policy import IntRange, client
from verigym.toolcalls import Tool, ToolCall
from verigym.validation import check_int
from verigym.workers import BoundedWorker, VerifierTimeout

__all__ = [
    "DENIED_FUNCTIONS",
    "EXECUTE_TOOL",
    "QUERY_MEMORY_BYTES",
    "QueryError",
    "SQLEnv",
    "SQLITE_LIMITS",
    "run_query",
    "run_query_bounded",
]

ROW_CAP = 200
"""Rows a query may return (the tool shows at most ``SHOWN_ROWS`` of them)."""
SHOWN_ROWS = 20
QUERY_SECONDS = 0.5
"""CPU-time limit of one query: SQLite's progress handler stops the VM after it, and the worker
process running the query is killed ``HARD_DEADLINE_MARGIN`` seconds of CPU time later whatever it
is doing (one huge function call or expression is invisible to the progress handler). CPU time, not
wall-clock time, so that the same query gets the same answer on an idle and on a loaded machine
(a query that needs milliseconds of CPU can wait half a second for a core)."""
HARD_DEADLINE_MARGIN = 0.5
QUERY_MEMORY_BYTES = 256 << 20
"""Memory a query may use: SQLite's heap limit (``PRAGMA hard_heap_limit``) and the worker's
address-space cap (``RLIMIT_AS`` over its size when the query starts)."""

SQLITE_LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: 1_000_000,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    sqlite3.SQLITE_LIMIT_COLUMN: 100,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 16,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 25_000,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 16,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 1_000,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 16,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}
"""``Connection.setlimit`` values of every query connection: a string or blob (``randomblob``,
``zeroblob``, ``replace``, ``printf('%.*c', ...)``, ``group_concat``) longer than 1 MB is an
error before it is allocated; statement length, expression depth, compound selects, program size
and arguments are bounded too."""

EXECUTE_TOOL = Tool(
    name="execute",
    description=f"Run a read-only SQLite query on the database and see up to {SHOWN_ROWS} result rows.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "one SQL SELECT statement"}},
        "required": ["query"],
    },
)

_SCHEMA = """
CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT NOT NULL, department_id INTEGER REFERENCES departments(id),
                        salary INTEGER NOT NULL, hire_year INTEGER NOT NULL);
CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL, department_id INTEGER REFERENCES departments(id),
                       budget INTEGER NOT NULL, status TEXT NOT NULL);
""".strip()

_CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Quito", "Tunis", "Perth")
_DEPARTMENTS = (
    "Research",
    "Sales",
    "Legal",
    "Support",
    "Design",
    "Finance",
    "Logistics",
    "Marketing",
    "Security",
)
_FIRST = (
    "Ada",
    "Bela",
    "Chen",
    "Dara",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kemal",
    "Lena",
    "Mira",
    "Noor",
    "Omar",
    "Pia",
    "Quinn",
    "Rui",
    "Sana",
    "Tomas",
    "Uma",
    "Vik",
    "Wen",
    "Yara",
    "Zoe",
)
_LAST = (
    "Abe",
    "Berg",
    "Costa",
    "Diaz",
    "Eze",
    "Fox",
    "Gray",
    "Holm",
    "Ito",
    "Jain",
    "Kerr",
    "Lund",
    "Moss",
    "Nash",
    "Ortiz",
)
_STATUS = ("active", "paused", "done")

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}


class QueryError(ActionParseError):
    """A query failed, was not read-only, returned too many rows or ran out of time."""


DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "fts3_tokenizer"})
"""SQL functions no query may call: they load code, touch files, or (``fts3_tokenizer``) read and
overwrite a tokenizer's C function pointer in the process (its two-argument form is enabled in
the SQLite builds of Debian and Ubuntu)."""


def _authorizer(action: int, arg1: Any, arg2: Any, database: Any, trigger: Any) -> int:
    if action in _ALLOWED_ACTIONS and not (
        action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in DENIED_FUNCTIONS
    ):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def run_query(
    connection: sqlite3.Connection,
    query: str,
    *,
    row_cap: int = ROW_CAP,
    seconds: float = QUERY_SECONDS,
) -> tuple[list[str], list[tuple]]:
    """Run one read-only query with a row cap and a time limit.

    Args:
        connection: an SQLite connection (the authorizer and ``query_only`` are installed here).
        query: one SELECT statement.
        row_cap: more rows than this is an error.
        seconds: limit on the process's CPU time (``time.process_time``) spent in the query,
            checked every 1000 SQLite VM instructions.

    Returns:
        (column names, rows).

    Raises:
        QueryError: not a single read-only statement, an SQLite error, too many rows, or too slow.
    """
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty")
    if not sqlite3.complete_statement(query.strip().rstrip(";") + ";") or query.strip().rstrip(
        ";"
    ).count(";"):
        raise QueryError("give exactly one complete SQL statement")
    clock = time.process_time
    deadline = clock() + seconds
    connection.set_authorizer(_authorizer)
    connection.set_progress_handler(lambda: 1 if clock() > deadline else 0, 1000)
    try:
        cursor = connection.execute(query)
        rows = cursor.fetchmany(row_cap + 1)
        columns = [d[0] for d in cursor.description or ()]
    except sqlite3.Error as exc:
        message = str(exc)
        if "interrupted" in message:
            message = f"the query took longer than {seconds:g} s of CPU time"
        elif "not authorized" in message:
            message = "only read-only SELECT queries are allowed"
        raise QueryError(f"SQL error: {message}") from None
    except (OverflowError, ValueError, MemoryError) as exc:
        raise QueryError(f"SQL error: {exc}") from None
    finally:
        connection.set_progress_handler(None, 0)
        connection.set_authorizer(None)
    if len(rows) > row_cap:
        raise QueryError(f"the query returns more than {row_cap} rows; aggregate or add LIMIT")
    return columns, [tuple(row) for row in rows]


def _limited_connection(rows: dict[str, list[tuple]]) -> sqlite3.Connection:
    """A read-only in-memory database with ``rows`` and :data:`SQLITE_LIMITS` applied."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(_SCHEMA)
    for table, table_rows in rows.items():
        if table_rows:
            marks = ",".join("?" * len(table_rows[0]))
            connection.executemany(f"INSERT INTO {table} VALUES ({marks})", table_rows)
    connection.commit()
    connection.execute("PRAGMA query_only = ON")
    for category, value in SQLITE_LIMITS.items():
        connection.setlimit(category, value)
    return connection


_WORKER_CONNECTIONS: OrderedDict[str, sqlite3.Connection] = OrderedDict()
_SQL_WORKER = BoundedWorker(start_method="fork", memory_bytes=QUERY_MEMORY_BYTES + (64 << 20))


def _query_in_worker(
    key: str, rows: dict[str, list[tuple]], query: str, row_cap: int, seconds: float
) -> tuple[Any, ...]:
    """Worker side of :func:`run_query_bounded`: ``("ok", columns, rows)`` or ``("error", message)``."""
    connection = _WORKER_CONNECTIONS.get(key)
    if connection is None:
        if not _WORKER_CONNECTIONS:  # first call in this worker: SQLite's own heap limit
            sqlite3.connect(":memory:").execute(
                f"PRAGMA hard_heap_limit = {QUERY_MEMORY_BYTES}"
            ).close()
        connection = _WORKER_CONNECTIONS[key] = _limited_connection(rows)
        while len(_WORKER_CONNECTIONS) > 8:
            _WORKER_CONNECTIONS.popitem(last=False)[1].close()
    _WORKER_CONNECTIONS.move_to_end(key)
    try:
        columns, result = run_query(connection, query, row_cap=row_cap, seconds=seconds)
    except QueryError as exc:
        return ("error", str(exc))
    return ("ok", columns, result)


def run_query_bounded(
    rows: dict[str, list[tuple]],
    query: str,
    *,
    row_cap: int = ROW_CAP,
    seconds: float = QUERY_SECONDS,
) -> tuple[list[str], list[tuple]]:
    """:func:`run_query` on a database of ``rows``, in a worker process with a hard deadline and a
    memory cap, so that no query (one huge function call included) can stall or exhaust the caller.

    Args:
        rows: table name -> rows (the generated database).
        query: one SELECT statement.
        row_cap: more rows than this is an error.
        seconds: SQLite's progress-handler limit (CPU time); the worker is killed
            ``HARD_DEADLINE_MARGIN`` CPU seconds after it.

    Returns:
        (column names, rows).

    Raises:
        QueryError: as :func:`run_query`, and when the worker overran its deadline or memory cap.
    """
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty")
    key = hashlib.sha256(repr(sorted(rows.items())).encode()).hexdigest()
    try:
        answer = _SQL_WORKER.call(
            _query_in_worker, (key, rows, query, row_cap, seconds), seconds + HARD_DEADLINE_MARGIN
        )
    except VerifierTimeout:
        raise QueryError(
            f"SQL error: the query took longer than {seconds:g} s of CPU time and was stopped"
        ) from None
    except RuntimeError as exc:
        if "MemoryError" in str(exc):
            raise QueryError(
                f"SQL error: the query needed more than {QUERY_MEMORY_BYTES >> 20} MiB of memory"
            ) from None
        raise QueryError(f"SQL error: {exc}") from None
    if answer[0] == "error":
        raise QueryError(answer[1])
    return list(answer[1]), [tuple(row) for row in answer[2]]


def _normalize(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) + 0.0
    if isinstance(value, bytes):
        return value.hex()
    return value


def results_match(got: Sequence[tuple], gold: Sequence[tuple], *, ordered: bool) -> bool:
    """Execution match: same rows (floats to 1e-6), as a multiset unless ``ordered``."""
    a = [tuple(_normalize(v) for v in row) for row in got]
    b = [tuple(_normalize(v) for v in row) for row in gold]
    return a == b if ordered else Counter(a) == Counter(b)


# Question templates: (rng, database facts) -> (question, gold SQL, ordered).
Facts = dict[str, Any]
Template = Callable[[np.random.Generator, Facts], tuple[str, str, bool]]


def _count_in_department(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    dept = facts["departments"][int(rng.integers(len(facts["departments"])))]
    return (
        f"How many employees work in the {dept} department?",
        f"SELECT COUNT(*) FROM employees e JOIN departments d ON e.department_id = d.id WHERE d.name = '{dept}'",
        False,
    )


def _hired_after(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    year = int(rng.integers(2005, 2020))
    return (
        f"List the names of employees hired after {year} with a salary above 60000.",
        f"SELECT name FROM employees WHERE hire_year > {year} AND salary > 60000",
        False,
    )


def _average_by_city(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    return (
        "For each city, give the city and the average salary of the employees working in departments there, "
        "ordered from the highest average to the lowest.",
        "SELECT d.city, AVG(e.salary) FROM employees e JOIN departments d ON e.department_id = d.id "
        "GROUP BY d.city ORDER BY AVG(e.salary) DESC",
        True,
    )


def _top_paid(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    k = int(rng.integers(3, 7))
    return (
        f"Give the names and salaries of the {k} best-paid employees, highest salary first (ties broken by name A to Z).",
        f"SELECT name, salary FROM employees ORDER BY salary DESC, name ASC LIMIT {k}",
        True,
    )


def _project_budget(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    status = _STATUS[int(rng.integers(len(_STATUS)))]
    return (
        f"For each department that has at least one {status} project, give the department name and the total budget of its {status} projects.",
        f"SELECT d.name, SUM(p.budget) FROM projects p JOIN departments d ON p.department_id = d.id "
        f"WHERE p.status = '{status}' GROUP BY d.name",
        False,
    )


def _without_projects(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    return (
        "Which departments (names) have no projects at all?",
        "SELECT name FROM departments WHERE id NOT IN (SELECT department_id FROM projects)",
        False,
    )


def _above_department_average(rng: np.random.Generator, facts: Facts) -> tuple[str, str, bool]:
    return (
        "How many employees earn more than the average salary of their own department?",
        "SELECT COUNT(*) FROM employees e WHERE e.salary > (SELECT AVG(salary) FROM employees WHERE department_id = e.department_id)",
        False,
    )


LEVELS: dict[int, Sequence[Template]] = {
    1: (_count_in_department, _hired_after),
    2: (_top_paid, _project_budget, _without_projects),
    3: (_average_by_city, _above_department_average, _project_budget),
}


class SQLEnv(ToolEnv):
    """Answer a question about a generated SQLite database with a query (Spider/BIRD-style).

    ## Description
    Each reset generates a database (departments, employees, projects; 5-9 departments, 30-80
    employees) from the seed and asks a question with a gold query. The agent explores with the
    ``execute`` tool (read-only through an SQLite authorizer, at most ``ROW_CAP`` rows) and answers
    with a query. Every agent query runs in a worker process bounded in time (``QUERY_SECONDS``
    through SQLite's progress handler, and a hard kill shortly after for work inside one function
    call) and memory (:data:`SQLITE_LIMITS` on string/blob length and statement size, SQLite's heap
    limit and an address-space cap of the worker).

    ## Action Space
    ``UnicodeText``: ``<tool_call>{"name": "execute", "arguments": {"query": "SELECT ..."}}</tool_call>``
    or the final query ``<answer>SELECT ...</answer>``.

    ## Observation Space
    ``UnicodeText``: the schema and question on reset; then result rows or an SQL error.

    ## Rewards
    ``1`` when the submitted query's result equals the gold query's result (execution match: same
    rows as a multiset, floats to 1e-6; in order when the question asks for an order), ``0``
    otherwise (also when the query fails); ``invalid_action_reward`` for a malformed reply or a
    failing ``execute`` call.

    ## Starting State
    Database contents and question from the reset seed.

    ## Episode End
    Terminated at the final answer; truncated after ``max_turns`` replies (``score=0``).

    ## Arguments
    * ``difficulty`` (int, 1-3): question templates (filters; joins, grouping, ordering; subqueries).
    * ``max_turns``, ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version. Fix (same version): ``fts3_tokenizer`` is refused like
      ``load_extension`` (``SELECT fts3_tokenizer('simple', x'41...')`` overwrote a C function
      pointer in the query worker, and its one-argument form read one).
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {"difficulty": client(IntRange(1, 3))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, difficulty: int = 2, **kwargs: Any):
        super().__init__(**kwargs)
        self.difficulty = check_int("difficulty", difficulty, 1, 3)
        self._rows: dict[str, list[tuple]] = {}
        self._connection: sqlite3.Connection | None = None
        self._gold_sql = ""
        self._ordered = False
        self._gold: list[tuple] = []
        self._explored = False

    # an sqlite3 connection does not pickle: rebuild it from the generated rows
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_connection"] = None
        return state

    def _db(self) -> sqlite3.Connection:
        """The in-process database (gold queries only; agent queries run in the worker)."""
        if self._connection is None:
            self._connection = _limited_connection(self._rows)
        return self._connection

    def _task_instructions(self) -> str:
        return (
            "Answer the question about the SQLite database with ONE SQL query. Explore with the execute tool, then "
            "give the final query: <answer>SELECT ...</answer>. Your query's result is compared with the correct "
            "result (row order matters only when the question asks for an order)."
        )

    def _tools(self) -> Sequence[Tool]:
        return (EXECUTE_TOOL,)

    def _generate(self) -> str:
        rng = self.np_random
        cities = list(rng.choice(_CITIES, size=4, replace=False))
        names = list(rng.choice(_DEPARTMENTS, size=int(rng.integers(5, 10)), replace=False))
        departments = [
            (i + 1, str(n), str(cities[int(rng.integers(len(cities)))]))
            for i, n in enumerate(names)
        ]
        people = sorted(
            {
                f"{_FIRST[int(rng.integers(len(_FIRST)))]} {_LAST[int(rng.integers(len(_LAST)))]}"
                for _ in range(int(rng.integers(30, 81)))
            }
        )
        employees = [
            (
                i + 1,
                p,
                int(rng.integers(1, len(departments) + 1)),
                int(rng.integers(30, 140)) * 1000 + int(rng.integers(0, 10)) * 100,
                int(rng.integers(2000, 2025)),
            )
            for i, p in enumerate(people)
        ]
        with_projects = rng.choice(
            len(departments), size=max(1, len(departments) - int(rng.integers(1, 3))), replace=False
        )
        projects = [
            (
                i + 1,
                f"Project {chr(65 + i % 26)}{i // 26 + 1}",
                int(with_projects[int(rng.integers(len(with_projects)))]) + 1,
                int(rng.integers(5, 500)) * 1000,
                _STATUS[int(rng.integers(len(_STATUS)))],
            )
            for i in range(int(rng.integers(8, 25)))
        ]
        self._rows = {"departments": departments, "employees": employees, "projects": projects}
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        templates = LEVELS[self.difficulty]
        for _ in range(
            20
        ):  # a question whose answer is empty (or all zero) is redrawn: too easy to match
            question, self._gold_sql, self._ordered = templates[int(rng.integers(len(templates)))](
                rng, {"departments": names}
            )
            self._gold = run_query(self._db(), self._gold_sql)[1]
            if self._gold and self._gold != [(0,)]:
                break
        self._explored = False
        return f"Database schema:\n{_SCHEMA}\n\nQuestion: {question}"

    def _call_tool(self, call: ToolCall) -> str:
        query = call.arguments["query"]
        columns, rows = run_query_bounded(self._rows, query)
        if query == self._gold_sql:
            self._explored = True
        lines = [" | ".join(columns)] + [
            " | ".join(str(v) for v in row) for row in rows[:SHOWN_ROWS]
        ]
        if len(rows) > SHOWN_ROWS:
            lines.append(f"... {len(rows) - SHOWN_ROWS} more rows")
        return "\n".join(lines) + f"\n({len(rows)} rows)"

    def _verify(self, answer: str) -> tuple[bool, float]:
        try:
            rows = run_query_bounded(self._rows, answer)[1]
        except QueryError:
            return False, 0.0
        correct = results_match(rows, self._gold, ordered=self._ordered)
        return correct, 1.0 if correct else 0.0

    def oracle_action(self) -> str:
        """Run the gold query once, then submit it."""
        if not self._explored:
            return tool_call_text("execute", query=self._gold_sql)
        return f"<answer>{self._gold_sql}</answer>"

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        super().close()
