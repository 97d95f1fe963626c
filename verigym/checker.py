"""``verigym check``: the conformance checker, stricter than Gymnasium's ``check_env``.

Usable on third-party envs::

    from verigym.checker import check_env
    report = check_env("verigym/GuessNumber-v0")      # an id, an Env, or a zero-argument factory
    print(report.format()); report.raise_for_failures()

Checks (each reports what was tried and what happened):

``gymnasium_check_env``
    Gymnasium's own ``check_env`` on a fresh unwrapped instance (its warnings are shown as notes).
``family``
    ``metadata["family"]`` is a verigym family and matches the registration table.
``determinism``
    two instances, the same seed and the same actions for ``steps`` steps (episodes restarted with
    derived seeds) give equal observations, rewards, ``terminated``/``truncated`` and verdicts;
    every observation is in the observation space and every reward is a finite number; no text
    the env returns (observations, ``info`` values and keys, at reset too) holds a lone surrogate,
    which cannot be encoded to UTF-8 (a tokenizer, the wire and the stores need valid text).
``reset_leak``
    ``reset(seed=s)`` after other play (``min(steps, 60)`` steps from another seed) replays exactly
    like a first ``reset(seed=s)``.
``seed_sensitivity``
    different seeds give different tasks (an env whose reset is legitimately seed-independent sets
    ``metadata["seedless_reset"] = True``).
``fresh_interpreter``
    the same trajectory in a new Python process with another ``PYTHONHASHSEED`` (registered ids).
``pickle_deepcopy``
    ``pickle`` and ``copy.deepcopy`` mid-episode continue identically to the original, and stepping
    a copy leaves the original untouched.
``malformed_actions``
    empty / random / 1 MB / invalid UTF-8 and lone-surrogate text, NaN, inf, out-of-range (an
    integer of 5000 digits too) and wrong-shape and complex-NaN arrays: no exception,
    ``info["action_error"]`` is a non-empty ``str``, the observation stays in its space, the
    reward is finite, and the env keeps working. After an
    action without lone surrogates, the env's text holds none either (after one with them, an
    echo of the agent's own text is allowed).
``verifier_bounds``
    for text actions, the worst reply of :func:`verigym.verifier_bounds.adversarial_replies` (long,
    deeply nested, huge numbers, many variables, repetition counts; bare, in ``<answer>``, in
    ``\\boxed{}`` and as every string argument of every tool) is scored within 2 s and grows the
    process's peak memory by at most 512 MiB.
``text_view``
    ``LanguageWrapper`` gives ``str`` observations and instructions, the action text round-trips
    (``parse_action(action_text(a)) == a``), and both views give the same trajectory; the
    instructions and the text observations hold no lone surrogate.
``episode_end``
    every step that ends an episode carries ``info["success"]`` (bool) and ``info["score"]``
    (float in [0, 1]).
``step_after_end``
    after the step that ends an episode, another ``step`` raises a clear error (a ``RuntimeError``
    or ``gymnasium.error.Error`` whose message says to call ``reset``) instead of paying a second
    terminal reward or changing the verdict -- also on a ``deepcopy`` and a ``pickle`` copy of the
    finished env -- and after ``reset`` the env steps again. The same through the wrappers that can
    answer a step without the env: ``LanguageWrapper`` (a malformed and a valid reply after the
    env's end; the oracle's reply after the wrapper's own truncation on malformed replies) and, for
    text envs that list action candidates, ``CandidateActionWrapper``.
``close_twice``
    ``close()`` can be called twice.

Every call the checker makes into the env (``reset``, ``step``, ``close``, making or copying it)
must return within ``call_timeout`` seconds (default 120): a call that hangs is interrupted, its
check fails naming the call, and the remaining checks are skipped (:class:`_CallWatchdog`; in the
main thread only, where a signal can interrupt it -- the fresh-interpreter check has its own
subprocess timeout).

Determinism is exact by default; ``atol`` (or ``metadata["determinism_atol"]``) sets an absolute
tolerance on floating-point observations and rewards (MuJoCo, for instance).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import (
    ACTION_ERROR,
    ACTION_MASK,
    FAMILIES,
    SCORE,
    SUCCESS,
    OracleInterface,
    TextInterface,
    short_repr,
)

__all__ = [
    "CheckReport",
    "CheckResult",
    "ConformanceError",
    "check_all",
    "check_env",
    "lone_surrogate",
    "print_progress",
]

Status = Literal["pass", "fail", "skip", "warn"]
Progress = Callable[[str, str, Status, float], None]
"""``progress(env_id, check, status, seconds)``: told as each check finishes (:func:`check_env`)."""
EnvSource = str | gym.Env | Callable[[], gym.Env]

ALL_CHECKS = (
    "gymnasium_check_env",
    "family",
    "determinism",
    "reset_leak",
    "seed_sensitivity",
    "fresh_interpreter",
    "pickle_deepcopy",
    "malformed_actions",
    "verifier_bounds",
    "text_view",
    "episode_end",
    "step_after_end",
    "close_twice",
)


class ConformanceError(AssertionError):
    """Raised by :meth:`CheckReport.raise_for_failures` when a check failed."""


@dataclass
class CheckResult:
    """The outcome of one check: ``status`` and a ``detail`` saying what was tried and seen."""

    name: str
    status: Status
    detail: str = ""

    def __post_init__(self) -> None:
        # an env's error text may hold lone surrogates: escape them, so printing the report (or
        # writing it as UTF-8) never fails
        self.detail = _printable(self.detail)


def _printable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` escapes (valid UTF-8)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_SURROGATE_SCAN_ITEMS = 20_000  # strings, keys and items looked at per value, at most


def lone_surrogate(value: Any, field: str) -> str | None:
    """One line naming the first lone surrogate in the text ``value`` holds, or ``None``.

    A lone surrogate (U+D800..U+DFFF not in a pair, e.g. ``"\\ud800"``) is a ``str`` Python holds
    but cannot encode to UTF-8: a tokenizer, JSON written as UTF-8, the env server and the stores
    all fail on it. Strings are looked for in ``str`` values, the keys and values of dicts, the
    items of lists and tuples and text or object arrays (nested 16 deep, the first 20,000 items).

    Args:
        value: an observation, an ``info`` dict, an instruction text...
        field: what ``value`` is, for the message (e.g. ``"the observation at reset(seed=0)"``).

    Returns:
        e.g. ``"the observation at step 3 ['text'] holds a lone surrogate '\\ud800' at index 8:
        it cannot be encoded to UTF-8"``; ``None`` when every string encodes.
    """
    budget = [_SURROGATE_SCAN_ITEMS]
    found = _find_surrogate(value, 0, budget)
    if found is None:
        return None
    where, text, index = found
    return (
        f"{field}{where} holds a lone surrogate {text[index]!r} at index {index}: "
        "it cannot be encoded to UTF-8"
    )


def _find_surrogate(value: Any, depth: int, budget: list[int]) -> tuple[str, str, int] | None:
    """``(where, text, index)`` of the first lone surrogate: ``where`` is the path inside ``value``
    (built only for the one found), ``index`` its position in ``text``."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 16:
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return "", value, exc.start
        return None
    if isinstance(value, dict):
        for key, item in itertools.islice(value.items(), max(budget[0], 0)):
            if isinstance(key, str) and (found := _find_surrogate(key, depth + 1, budget)):
                return " (a key)", found[1], found[2]
            if found := _find_surrogate(item, depth + 1, budget):
                return f"[{_printable(repr(key))[:60]}]{found[0]}", found[1], found[2]
        return None
    if isinstance(value, (list, tuple)):
        items: Iterable[Any] = value
    elif isinstance(value, np.ndarray) and value.dtype.kind in "UO":
        items = itertools.islice(value.flat, max(budget[0], 0) + 1)
    else:
        return None
    for index, item in enumerate(items):
        if budget[0] < 0:
            return None
        if found := _find_surrogate(item, depth + 1, budget):
            return f"[{index}]{found[0]}", found[1], found[2]
    return None


@dataclass
class CheckReport:
    """All check results for one env."""

    env_id: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed (skips and warnings are allowed)."""
        return all(r.status != "fail" for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    def format(self) -> str:
        """A plain-text report, one line per check plus indented details."""
        lines = [f"{self.env_id}: {'PASS' if self.passed else 'FAIL'}"]
        for r in self.results:
            lines.append(f"  [{r.status}] {r.name}")
            if r.detail and r.status != "pass":
                lines.extend("      " + line for line in r.detail.splitlines())
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        """Raise :class:`ConformanceError` listing the failed checks.

        Raises:
            ConformanceError: at least one check failed.
        """
        if not self.passed:
            raise ConformanceError(self.format())


# ---------------------------------------------------------------------------------------------
# Comparing and fingerprinting trajectories
# ---------------------------------------------------------------------------------------------


def same_values(a: Any, b: Any, atol: float = 0.0) -> bool:
    """Deep equality of two observations, rewards or infos, shared by both checkers.

    Arrays compare by shape and value (NaN equals NaN; ``atol`` is an absolute tolerance on
    floating-point values), dicts by keys and values, tuples and lists item by item, strings and
    other scalars with ``==``.
    """
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same_values(a[k], b[k], atol) for k in a)
        )
    if isinstance(a, (tuple, list)) and not isinstance(a, str):
        return (
            isinstance(b, (tuple, list))
            and len(a) == len(b)
            and all(same_values(x, y, atol) for x, y in zip(a, b))
        )
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
    except Exception:
        return a == b
    if x.shape != y.shape:
        return False
    if np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number):
        if atol > 0:
            return bool(np.allclose(x, y, rtol=0.0, atol=atol, equal_nan=True))
        return bool(np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.floating)))
    return bool(np.array_equal(x, y))


def _fingerprint(value: Any) -> Any:
    """A compact, picklable, process-independent stand-in for an observation."""
    if isinstance(value, dict):
        return {k: _fingerprint(v) for k, v in sorted(value.items())}
    if isinstance(value, (tuple, list)):
        return [_fingerprint(v) for v in value]
    if isinstance(value, str):
        return "str:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    array = np.asarray(value)
    if array.dtype == object:
        return "obj:" + repr(value)
    return (
        f"arr:{array.dtype}:{array.shape}:"
        + hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
    )


@dataclass
class _Step:
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    verdict: tuple[Any, Any]
    malformed: bool
    reset: bool = False  # the record of a reset (not compared: a trajectory's layout shows it)

    def same_as(self, other: _Step, atol: float) -> bool:
        return (
            same_values(self.observation, other.observation, atol)
            and same_values(self.reward, other.reward, atol)
            and (self.terminated, self.truncated, self.verdict, self.malformed)
            == (other.terminated, other.truncated, other.verdict, other.malformed)
        )


def _record(
    observation: Any,
    reward: Any,
    terminated: Any,
    truncated: Any,
    info: dict[str, Any],
    fingerprint: bool,
    reset: bool = False,
) -> _Step:
    return _Step(
        observation=_fingerprint(observation) if fingerprint else observation,
        reward=float(reward),
        terminated=bool(terminated),
        truncated=bool(truncated),
        verdict=(info.get(SUCCESS), info.get(SCORE)),
        malformed=ACTION_ERROR in info,
        reset=reset,
    )


class _ActionSource:
    """Reproducible actions: the env's oracle half of the time when it has one, else samples --
    uniform over the legal actions when the last ``info`` has an ``action_mask``."""

    def __init__(self, env: gym.Env, seed: int, *, oracle: bool = True):
        self.env = env
        self.oracle = oracle and isinstance(env.unwrapped, OracleInterface)
        self.rng = np.random.default_rng(seed)
        self.space = copy.deepcopy(env.action_space)
        self.space.seed(seed)

    def __call__(self, info: dict[str, Any] | None = None) -> Any:
        sample = self.space.sample()
        if self.oracle and self.rng.random() < 0.5:
            return self.env.unwrapped.oracle_action()
        mask = None if info is None else info.get(ACTION_MASK)
        if (
            isinstance(self.space, spaces.Discrete)
            and mask is not None
            and np.shape(mask) == (self.space.n,)
            and np.any(mask)
        ):
            return np.int64(self.space.start + self.rng.choice(np.flatnonzero(mask)))
        return sample


def _iter_rollout(
    env: gym.Env,
    seed: int,
    steps: int,
    *,
    fingerprint: bool = False,
    on_step: Callable | None = None,
    action_seed: int | None = None,
    on_reset: Callable | None = None,
) -> Iterator[_Step]:
    """The records of ``steps`` steps from ``reset(seed)``, one at a time (a consumer that stops
    early saves the rest), restarting finished episodes with seeds seed+1, ...

    Actions come from :class:`_ActionSource` seeded with ``action_seed`` (default ``seed``).
    ``on_step(result)`` sees each step's result, ``on_reset(seed, observation, info)`` each reset's.
    """
    actions = _ActionSource(env, seed if action_seed is None else action_seed)
    observation, info = env.reset(seed=seed)
    if on_reset is not None:
        on_reset(seed, observation, info)
    yield _record(observation, 0.0, False, False, {}, fingerprint, reset=True)
    episode = 0
    for _ in range(steps):
        result = env.step(actions(info))
        info = result[4]
        if on_step is not None:
            on_step(result)
        yield _record(*result, fingerprint=fingerprint)
        if result[2] or result[3]:
            episode += 1
            observation, info = env.reset(seed=seed + episode)
            if on_reset is not None:
                on_reset(seed + episode, observation, info)
            yield _record(observation, 0.0, False, False, {}, fingerprint, reset=True)


def _rollout(
    env: gym.Env,
    seed: int,
    steps: int,
    *,
    fingerprint: bool = False,
    on_step: Callable | None = None,
    action_seed: int | None = None,
    on_reset: Callable | None = None,
) -> list[_Step]:
    """:func:`_iter_rollout` as a list."""
    return list(
        _iter_rollout(
            env,
            seed,
            steps,
            fingerprint=fingerprint,
            on_step=on_step,
            action_seed=action_seed,
            on_reset=on_reset,
        )
    )


def _prefix(trajectory: Sequence[_Step], steps: int, fingerprint: bool = False) -> list[_Step]:
    """The records of the first ``steps`` steps of ``trajectory`` (what :func:`_rollout` with
    ``steps`` gives for the same env, seed and actions), fingerprinted if asked."""
    out: list[_Step] = []
    taken = 0
    for record in trajectory:
        if not record.reset:
            if taken == steps:
                break
            taken += 1
        out.append(
            dataclasses.replace(record, observation=_fingerprint(record.observation))
            if fingerprint
            else record
        )
    if taken < steps:
        raise ValueError(f"the trajectory has {taken} steps, fewer than {steps}")
    return out


def _first_difference(a: Sequence[_Step], b: Sequence[_Step], atol: float) -> str | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if not x.same_as(y, atol):
            fields = [
                name
                for name in (
                    "observation",
                    "reward",
                    "terminated",
                    "truncated",
                    "verdict",
                    "malformed",
                )
                if not (same_values(getattr(x, name), getattr(y, name), atol))
            ]
            return f"record {i} differs in {', '.join(fields)}: {_short(getattr(x, fields[0]))} vs {_short(getattr(y, fields[0]))}"
    if len(a) != len(b):
        return f"trajectory lengths differ: {len(a)} vs {len(b)} records"
    return None


def _short(value: Any, limit: int = 120) -> str:
    return short_repr(value, limit)


# ---------------------------------------------------------------------------------------------
# Fresh interpreter
# ---------------------------------------------------------------------------------------------


def _child_main() -> None:
    """Entry of the fresh-interpreter child: read specs from stdin, print trajectories."""
    import verigym  # noqa: F401  (registers the ids)

    request = json.loads(sys.stdin.read())
    out = {}
    held: set[type] = set()
    with contextlib.ExitStack() as resources:  # shared_resources() of each env class, as check_env
        for key, (env_id, kwargs, seed, steps, fingerprint) in request.items():
            try:
                env = gym.make(env_id, disable_env_checker=True, **kwargs)
                kind = type(env.unwrapped)
                if callable(getattr(kind, "shared_resources", None)) and kind not in held:
                    held.add(kind)
                    resources.enter_context(kind.shared_resources())
                out[key] = ("ok", _rollout(env, seed, steps, fingerprint=fingerprint))
                env.close()
            except Exception:
                out[key] = ("error", traceback.format_exc(limit=5))
    sys.stdout.write(base64.b64encode(pickle.dumps(out)).decode("ascii"))


# ``python -c`` puts the working directory first on ``sys.path``, so a folder named ``verigym``
# there (the parent of a clone) would shadow the installed package (even at the end of the path:
# it is a namespace portion to the path finder, which runs before an editable install's finder).
# The child drops it, as ``python -P`` does on 3.11+. Not ``-I``: that would also ignore the
# ``PYTHONHASHSEED`` the child is started with.
_CHILD_CODE = (
    "import os, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]; "
    "from verigym.checker import _child_main; _child_main()"
)


def _fresh_trajectories(
    requests: dict[str, tuple[str, dict[str, Any], int, int, bool]],
    timeout: float = 900.0,
    *,
    workers: int | None = None,
) -> dict[str, tuple[str, Any]]:
    """Run rollouts of registered ids in new interpreters with a different ``PYTHONHASHSEED``.

    The requests are dealt round-robin (so each child gets a share of every family) to
    ``workers`` children running side by side (default: one per CPU core, at most 4); a child that
    fails or overruns ``timeout`` seconds marks only its own requests as errors.

    Returns:
        request key -> ``("ok", trajectory)`` or ``("error", message)``.
    """
    from concurrent.futures import ThreadPoolExecutor

    current = os.environ.get("PYTHONHASHSEED", "")
    other = str((int(current) + 1) % 4294967296) if current.isdigit() else "12345"
    environment = dict(os.environ, PYTHONHASHSEED=other)
    command = [sys.executable, "-c", _CHILD_CODE]
    keys = list(requests)
    count = max(1, min(len(keys), workers if workers is not None else min(4, os.cpu_count() or 1)))
    chunks = [keys[i::count] for i in range(count)]

    def run(chunk: list[str]) -> dict[str, tuple[str, Any]]:
        try:
            done = subprocess.run(
                command,
                input=json.dumps({k: requests[k] for k in chunk}),
                capture_output=True,
                text=True,
                env=environment,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {
                key: ("error", f"the fresh interpreter did not finish within {timeout:.0f} s")
                for key in chunk
            }
        if done.returncode != 0:
            tail = done.stderr[-2000:]
            return {
                key: ("error", f"the fresh interpreter exited with {done.returncode}:\n{tail}")
                for key in chunk
            }
        return pickle.loads(base64.b64decode(done.stdout.strip().splitlines()[-1]))

    if count == 1:
        return run(keys)
    out: dict[str, tuple[str, Any]] = {}
    with ThreadPoolExecutor(count) as pool:  # threads only wait: the children do the work
        for part in pool.map(run, chunks):
            out.update(part)
    return {key: out[key] for key in keys}


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------


def malformed_cases(space: spaces.Space) -> list[tuple[str, Any, bool]]:
    """The malformed actions both checkers try on an action space.

    Returns:
        ``(label, action, must_flag)`` triples; ``must_flag``: the env has to set
        ``info["action_error"]`` for that action (an empty list for a space with no cases).
    """
    if isinstance(space, spaces.Text):
        invalid_utf8 = b"\xff\xfe\xc3(".decode("utf-8", "surrogateescape")
        return [
            ("empty text", "", True),
            ("random text", "q7 ]]{ zx;", False),
            ("1 MB of text", "9" * (1 << 20), True),
            ("invalid UTF-8 (surrogateescape)", invalid_utf8, False),
            ("lone surrogates", "\ud800\udfff\ud83d", False),
            ("NaN", "NaN", False),
            ("inf", "inf", False),
        ]
    if isinstance(space, spaces.Discrete):
        return [
            ("below range", space.start - 1, True),
            ("above range", space.start + space.n, True),
            ("huge integer", 2**63, True),
            ("integer of 5000 digits", 10**5000, True),
            ("NaN", float("nan"), True),
            ("inf", float("inf"), True),
            ("fractional", space.start + 0.5, True),
            ("wrong shape", np.zeros(3, dtype=np.int64), True),
        ]
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        base = np.zeros(space.shape, dtype=np.float64)
        if isinstance(space, spaces.Box):
            base = np.clip(base, space.low, space.high)
            high = np.where(np.isfinite(space.high), space.high, 1e30)
            too_big = np.abs(high) * 10 + 1
        elif isinstance(space, spaces.MultiDiscrete):
            base = space.start.astype(np.float64).copy()
            too_big = (space.start + space.nvec).astype(np.float64)
        else:
            too_big = np.full(space.shape, 2.0)
        cases = [
            ("NaN", np.full(space.shape, np.nan), True),
            ("inf", np.full(space.shape, np.inf), True),
            ("out of range", too_big, True),
            ("wrong shape (extra element)", np.zeros(int(np.prod(space.shape)) + 1), True),
            ("complex NaN", np.full(space.shape, complex(np.nan, 0.0)), True),
            ("empty array", np.zeros((0,)), True),
        ]
        if not isinstance(space, spaces.Box) or np.all(np.isfinite(space.low)):
            cases.append(
                ("below range", base - 1e6 if isinstance(space, spaces.Box) else base - 1, True)
            )
        return cases
    if isinstance(space, spaces.Dict):
        cases = []
        valid = space.sample()
        for key, sub in space.spaces.items():
            for label, bad, must in malformed_cases(sub):
                action = dict(valid)
                action[key] = bad
                cases.append((f"{key}: {label}", action, must))
        return cases
    return []


def _refuses_step(env: gym.Env, action: Any, label: str) -> str | None:
    """``None`` if ``env.step(action)`` raises a clear error telling to reset, else the problem."""
    try:
        observation, reward, terminated, truncated, info = env.step(action)
    except (RuntimeError, gym.error.Error) as exc:
        if "reset" in str(exc).lower():
            return None
        return f"{label}: step raised {type(exc).__name__}: {_short(str(exc))} -- say that reset() is needed"
    except Exception as exc:
        return f"{label}: step raised {type(exc).__name__}: {_short(str(exc))}, not a clear error saying to call reset()"
    verdict = (
        f", success={info.get(SUCCESS)!r}, score={info.get(SCORE)!r}"
        if isinstance(info, dict) and SUCCESS in info
        else ""
    )
    return f"{label}: step ran on (reward {_short(reward)}, terminated={terminated!r}, truncated={truncated!r}{verdict}) instead of raising"


class _CallTimedOut(BaseException):
    """Raised in the main thread by :class:`_CallWatchdog` when an env call overran its deadline (a
    ``BaseException``, so an env's ``except Exception`` cannot swallow it)."""


_HARNESS_FILES = (
    os.path.abspath(__file__),
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "verifier_bounds.py"),
)


class _CallWatchdog:
    """Bounds each call from the checker into env code to ``seconds`` of wall-clock time.

    A watcher thread samples the main thread's stack every ``min(1, seconds / 4)`` s. The frame
    just inside the innermost checker frame is the env call in flight (``env.step``, a ``copy``, a
    factory...); when the same frame object is still there after ``seconds``, the watcher sends
    ``SIGUSR2`` to the main thread, whose handler raises :class:`_CallTimedOut` there. A signal
    interrupts Python loops and blocking system calls (``sleep``, a socket read); C code that
    never returns to the interpreter cannot be interrupted in-process. Inactive off the main thread
    or with ``seconds`` ``None``/``0``.

    Args:
        seconds: the deadline of one call.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = float(seconds) if seconds else 0.0
        self.active = self.seconds > 0 and threading.current_thread() is threading.main_thread()
        self.tripped: str | None = None
        """What overran its deadline, once something did."""
        self._armed = False
        self._culprit = ""
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._previous: Any = None

    def __enter__(self) -> _CallWatchdog:
        if self.active:
            self._previous = signal.signal(signal.SIGUSR2, self._interrupt)
            threading.Thread(target=self._watch, name="verigym-check-watchdog", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            self._stop.set()
            self._armed = False
            signal.signal(signal.SIGUSR2, self._previous)

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self._armed:  # a signal that lands after the call returned is ignored
            raise _CallTimedOut(self._culprit)

    def _in_flight(self) -> tuple[Any, Any]:
        """The frame of the env call the checker is waiting for and the innermost frame (where the
        call is now), or ``(None, None)``."""
        innermost = frame = sys._current_frames().get(self._main)
        inner = None
        while frame is not None:
            if frame.f_code.co_filename in _HARNESS_FILES:
                return inner, innermost
            inner, frame = frame, frame.f_back
        return None, None

    def _watch(self) -> None:
        held, since = None, time.monotonic()
        while not self._stop.wait(min(1.0, self.seconds / 4)):
            frame, innermost = self._in_flight() if self._armed else (None, None)
            now = time.monotonic()
            if frame is None or frame is not held:
                held, since = frame, now
            elif now - since > self.seconds:
                self._culprit = f"an env call ({_where(frame)}, now in {_where(innermost)})"
                signal.pthread_kill(self._main, signal.SIGUSR2)
                held, since = (
                    None,
                    now,
                )  # still stuck after another period (a close() in a finally): again
            del frame, innermost

    def run(
        self, name: str, call: Callable[[], tuple[Status, str]], *, bounded: bool = True
    ) -> tuple[Status, str]:
        """``call()`` with each env call bounded; a ``fail`` naming the call that hung, or a
        ``skip`` once an earlier call hung."""
        if self.tripped is not None:
            return "skip", f"not run: {self.tripped} hung in an earlier check"
        self._armed = self.active and bounded
        try:
            return call()
        except _CallTimedOut as exc:
            self.tripped = str(exc)
            return "fail", (
                f"{exc} did not return within {self.seconds:g} s (call_timeout) during the {name} check and was "
                "interrupted: reset, step and close must not hang; the remaining checks were skipped"
            )
        finally:
            self._armed = False


def _where(frame: Any) -> str:
    """``Qualified.name (file.py:line)`` of a frame."""
    code = frame.f_code
    return f"{getattr(code, 'co_qualname', code.co_name)} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"


def _reply_text(text_env: Any) -> Callable[[Any], str] | None:
    """How to write an action of the env inside ``text_env`` (a LanguageWrapper) as a reply: as is
    for a natively text env, the env's own ``action_text`` when it parses replies itself, else the
    wrapper's generic formatter; ``None`` when the env parses replies but cannot write them."""
    if text_env._native_text:
        return lambda action: action
    inner = text_env.unwrapped
    if isinstance(inner, TextInterface):
        return inner.action_text if callable(getattr(inner, "action_text", None)) else None
    return text_env.action_text


def _play_to_end(
    env: gym.Env, act: Callable[[dict[str, Any]], Any], seed: int, budget: int
) -> tuple | None:
    """Reset ``env`` with ``seed`` and step it with ``act(info)`` until an episode ends; the last
    step's result, or ``None`` when none ended within ``budget`` steps."""
    _, info = env.reset(seed=seed)
    for _ in range(budget):
        result = env.step(act(info))
        if result[2] or result[3]:
            return result
        info = result[4]
    return None


class _Checker:
    def __init__(
        self,
        source: EnvSource,
        *,
        steps: int,
        seed: int,
        atol: float | None,
        env_kwargs: dict[str, Any],
    ):
        self.steps = steps
        self.seed = seed
        self.env_kwargs = env_kwargs
        self.env_id: str | None = None
        if isinstance(source, str):
            self.env_id = source
            self.factory: Callable[[], gym.Env] = lambda: gym.make(
                source, disable_env_checker=True, **env_kwargs
            )
        elif isinstance(source, gym.Env):
            template = source
            if template.spec is not None and template.spec.id in gym.registry:
                spec = template.spec
                self.env_id = spec.id
                self.env_kwargs = dict(env_kwargs or {})
                self.factory = lambda: gym.make(spec, disable_env_checker=True)
            else:
                self.factory = lambda: copy.deepcopy(template)
        elif callable(source):
            self.factory = source
        else:
            raise TypeError(
                f"check_env takes an env id, a gymnasium.Env or a factory, got {type(source).__name__}"
            )
        probe = self.factory()
        self.name = self.env_id or type(probe.unwrapped).__name__
        self.metadata = dict(getattr(probe.unwrapped, "metadata", {}) or {})
        self.atol = float(atol if atol is not None else self.metadata.get("determinism_atol", 0.0))
        self.nondeterministic = bool(getattr(probe.spec, "nondeterministic", False))
        self.action_space = probe.action_space
        self.observation_space = probe.observation_space
        self.resources = contextlib.ExitStack()  # what the env class shares between instances,
        hold = getattr(type(probe.unwrapped), "shared_resources", None)  # held across the checks
        if callable(hold):
            self.resources.enter_context(hold())
        probe.close()
        self.episode_end_problems: list[str] = []
        self.episode_ends = 0
        self._first: list[_Step] | None = (
            None  # the determinism check's first rollout, reused by later checks
        )

    def _seeded(self, steps: int, *, fingerprint: bool = False) -> list[_Step]:
        """The rollout of a fresh instance from ``reset(seed=self.seed)`` for ``steps`` steps (the
        same actions as every seeded rollout): a prefix of the determinism check's first rollout
        when it ran (determinism makes that equal to a new one), else rolled out now."""
        if self._first is not None and steps <= self.steps:
            return _prefix(self._first, steps, fingerprint)
        env = self.factory()
        try:
            return _rollout(env, self.seed, steps, fingerprint=fingerprint)
        finally:
            env.close()

    # each check returns (status, detail)
    def gymnasium_check_env(self) -> tuple[Status, str]:
        from gymnasium.utils.env_checker import check_env as gym_check_env

        env = self.factory()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                gym_check_env(env.unwrapped, skip_render_check=True)
        except Exception as exc:
            return (
                "fail",
                f"gymnasium.utils.env_checker.check_env raised {type(exc).__name__}: {exc}",
            )
        finally:
            env.close()
        notes = sorted({str(w.message) for w in caught})
        return ("warn", "\n".join(notes)) if notes else ("pass", "")

    def family(self) -> tuple[Status, str]:
        family = self.metadata.get("family")
        if family not in FAMILIES:
            return (
                "fail",
                f"metadata['family'] is {family!r}; set it to one of {FAMILIES} in the class metadata",
            )
        if self.env_id is not None:  # verigym's ids and plugins' are in the registration table
            from verigym.registration import row

            try:
                registered = row(self.env_id).family
            except KeyError:
                if self.env_id.startswith("verigym/"):
                    return "warn", f"{self.env_id} is not in verigym's registration table"
                return "pass", ""
            if registered != family:
                return (
                    "fail",
                    f"metadata['family'] is {family!r} but the registration table says {registered!r}",
                )
        return "pass", ""

    def _check_episode_end(self, result: tuple) -> None:
        _, _, terminated, truncated, info = result
        if not (terminated or truncated):
            return
        self.episode_ends += 1
        success, score = info.get(SUCCESS), info.get(SCORE)
        problem = None
        if not isinstance(success, (bool, np.bool_)):
            problem = f"info['success'] is {success!r}, not a bool"
        elif (
            not isinstance(score, (float, int, np.floating, np.integer))
            or isinstance(score, bool)
            or not 0.0 <= float(score) <= 1.0
        ):
            problem = f"info['score'] is {score!r}, not a float in [0, 1]"
        if problem and len(self.episode_end_problems) < 3:
            how = "terminated" if terminated else "truncated"
            hint = (
                " (a TimeLimit wrapper truncated it? enforce the step limit in the env so its own step reports the verdict)"
                if truncated and SUCCESS not in info
                else ""
            )
            self.episode_end_problems.append(
                f"episode {self.episode_ends} ({how}): {problem}{hint}"
            )

    def _observation_problems(
        self, result: tuple, space: spaces.Space, *, text: str | None = "the observation"
    ) -> str | None:
        """What is wrong with one step's result (``None``: nothing). ``text`` names the step for
        the lone-surrogate scan of the observation and ``info``; ``None`` skips that scan."""
        observation, reward, terminated, truncated, info = result
        if not space.contains(observation):
            return f"observation {_short(observation)} is not in {space}"
        if text is not None and (
            problem := lone_surrogate(observation, text)
            or lone_surrogate(info, text.replace("the observation", "info", 1))
        ):
            return problem
        if (
            isinstance(reward, bool)
            or not isinstance(reward, (int, float, np.integer, np.floating))
            or not math.isfinite(float(reward))
        ):
            return f"reward {reward!r} is not a finite number"
        if not isinstance(terminated, (bool, np.bool_)) or not isinstance(
            truncated, (bool, np.bool_)
        ):
            return f"terminated/truncated are {terminated!r}/{truncated!r}, not bools"
        if not isinstance(info, dict):
            return f"info is {type(info).__name__}, not dict"
        if ACTION_ERROR in info and not (
            isinstance(info[ACTION_ERROR], str) and info[ACTION_ERROR]
        ):
            return f"info['action_error'] is {info[ACTION_ERROR]!r}, not a non-empty str"
        return None

    def determinism(self) -> tuple[Status, str]:
        problems: list[str] = []
        surrogates: list[str] = []  # the first lone surrogate only: an env repeats it every step
        steps = [0]

        def watch(result: tuple) -> None:
            self._check_episode_end(result)
            steps[0] += 1
            if len(problems) < 3 and (
                problem := self._observation_problems(result, self.observation_space, text=None)
            ):
                problems.append(problem)
            if not surrogates and (
                problem := lone_surrogate(result[0], f"the observation at step {steps[0]}")
                or lone_surrogate(result[4], f"info at step {steps[0]}")
            ):
                surrogates.append(problem)

        def watch_reset(seed: int, observation: Any, info: Any) -> None:
            where = f"at reset(seed={seed})"
            if not surrogates and (
                problem := lone_surrogate(observation, f"the observation {where}")
                or lone_surrogate(info, f"info {where}")
            ):
                surrogates.append(problem)

        a, b = self.factory(), self.factory()
        try:
            first = _rollout(a, self.seed, self.steps, on_step=watch, on_reset=watch_reset)
            second = _rollout(b, self.seed, self.steps)
            # make sure at least one episode ends, for the episode_end check
            extra = 0
            while self.episode_ends == 0 and extra < 20 * max(self.steps, 100):
                result = a.step(_ActionSource(a, self.seed + extra)())
                watch(result)
                extra += 1
        finally:
            a.close()
            b.close()
        if problems or surrogates:
            return "fail", "; ".join(surrogates + problems)
        if self.nondeterministic:
            return "skip", "the spec says nondeterministic=True"
        difference = _first_difference(first, second, self.atol)
        if difference:
            return (
                "fail",
                f"two instances, seed {self.seed}, same {self.steps} actions: {difference} (does the env draw all randomness from self.np_random, seeded in reset?)",
            )
        self._first = first
        return (
            "pass",
            f"{self.steps} steps, {sum(1 for s in first if s.terminated or s.truncated)} episode ends",
        )

    def reset_leak(self) -> tuple[Status, str]:
        if self.nondeterministic:
            return "skip", "the spec says nondeterministic=True"
        reference = self._seeded(25)  # what a fresh instance plays
        other = min(self.steps, 60)  # as long as the determinism rollouts, up to 60 steps
        env = self.factory()
        try:
            _rollout(env, self.seed + 1000, other)
            again = _rollout(env, self.seed, 25)
        finally:
            env.close()
        difference = _first_difference(reference, again, self.atol)
        if difference:
            return (
                "fail",
                f"reset(seed={self.seed}) after {other} other steps does not replay the first episode: {difference} (is some state kept across reset?)",
            )
        return "pass", ""

    def seed_sensitivity(self) -> tuple[Status, str]:
        if self.metadata.get("seedless_reset"):
            return "skip", "metadata['seedless_reset'] is True"
        reference = self._seeded(30, fingerprint=True)
        env = self.factory()
        try:
            for k in range(1, 8):  # stops at the first record that differs from seed 0's run
                run = _iter_rollout(env, self.seed + k, 30, fingerprint=True, action_seed=self.seed)
                for i, (got, expected) in enumerate(itertools.zip_longest(run, reference)):
                    if got is None or expected is None or not got.same_as(expected, 0.0):
                        return (
                            "pass",
                            f"seed {self.seed + k} differs from seed {self.seed} at record {i}",
                        )
        finally:
            env.close()
        return (
            "fail",
            "8 different reset seeds with the same 30 actions gave the same trajectory: does reset ignore its seed? (set metadata['seedless_reset'] = True if the task is fixed by design)",
        )

    def fresh_interpreter(self, precomputed: tuple[str, Any] | None = None) -> tuple[Status, str]:
        if self.nondeterministic:
            return "skip", "the spec says nondeterministic=True"
        if self.env_id is None:
            return "skip", "needs a registered env id to rebuild the env in a new process"
        fingerprint = self.atol == 0.0
        if precomputed is None:
            precomputed = _fresh_trajectories(
                {"x": (self.env_id, self.env_kwargs, self.seed, self.steps, fingerprint)}
            )["x"]
        status, payload = precomputed
        if status != "ok":
            return "fail", f"the fresh interpreter could not run {self.env_id}: {payload}"
        local = self._seeded(self.steps, fingerprint=fingerprint)
        difference = _first_difference(local, payload, self.atol)
        if difference:
            return (
                "fail",
                f"a new interpreter with another PYTHONHASHSEED gives another trajectory: {difference} (set iteration order? hash()? global RNG?)",
            )
        return "pass", ""

    def pickle_deepcopy(self) -> tuple[Status, str]:
        prefix, tail = 7, 25
        reference = self.factory()
        original = self.factory()
        copies: list[gym.Env] = []
        try:
            # masked random actions (no oracle: its choice could depend on hidden state), chosen
            # along an uninterrupted reference episode and replayed on the original and its copies
            source = _ActionSource(reference, self.seed, oracle=False)
            _, info = reference.reset(seed=self.seed)
            actions, expected = [], []
            for _ in range(prefix + tail):
                action = source(info)
                actions.append(action)
                result = reference.step(action)
                info = result[4]
                expected.append(_record(*result, fingerprint=False))
                if result[2] or result[3]:
                    break
            if len(expected) < 2:
                return "skip", "the episode ended after one step; nothing to copy mid-episode"
            prefix = min(prefix, len(expected) // 2)  # copy mid-episode, also in short games
            original.reset(seed=self.seed)
            for action in actions[:prefix]:
                original.step(action)
            try:
                pickled = pickle.loads(pickle.dumps(original))
                copies.append(pickled)
            except Exception as exc:
                return (
                    "fail",
                    f"pickle.dumps(env) after {prefix} steps raised {type(exc).__name__}: {exc}",
                )
            try:
                deep = copy.deepcopy(original)
                copies.append(deep)
            except Exception as exc:
                return (
                    "fail",
                    f"copy.deepcopy(env) after {prefix} steps raised {type(exc).__name__}: {exc}",
                )
            for label, env in (
                ("the pickled copy", pickled),
                ("the deep copy", deep),
                ("the original (after its copies were stepped)", original),
            ):
                got = []
                for action in actions[prefix : len(expected)]:
                    got.append(_record(*env.step(action), fingerprint=False))
                difference = _first_difference(got, expected[prefix:], self.atol)
                if difference:
                    return (
                        "fail",
                        f"{label} does not continue like an uninterrupted episode: {difference}",
                    )
        finally:
            for env in (reference, original, *copies):
                env.close()
        return "pass", ""

    def malformed_actions(self) -> tuple[Status, str]:
        cases = malformed_cases(self.action_space)
        if not cases:
            return "skip", f"no malformed cases for {self.action_space}"
        problems = []
        env = self.factory()
        try:
            for label, action, must_flag in cases:
                env.reset(seed=self.seed)
                try:
                    result = env.step(action)
                except Exception as exc:
                    problems.append(
                        f"{label}: step raised {type(exc).__name__}: {_short(str(exc))}"
                    )
                    continue
                echo_allowed = lone_surrogate(action, "") is not None  # the agent's own text
                if problem := self._observation_problems(
                    result,
                    self.observation_space,
                    text=None if echo_allowed else "the observation after it",
                ):
                    problems.append(f"{label}: {problem}")
                elif must_flag and not result[4].get(ACTION_ERROR):
                    problems.append(f"{label}: no info['action_error'] was set")
                elif not (result[2] or result[3]):
                    try:
                        env.step(self.action_space.sample())
                    except Exception as exc:
                        problems.append(
                            f"{label}: the next valid step raised {type(exc).__name__}: {_short(str(exc))}"
                        )
        finally:
            env.close()
        if problems:
            return "fail", "\n".join(problems)
        return "pass", f"{len(cases)} cases"

    def verifier_bounds(self) -> tuple[Status, str]:
        from verigym.verifier_bounds import measure_worst_case

        if not isinstance(self.action_space, spaces.Text):
            return "skip", f"the action space {self.action_space} is not text"
        worst = measure_worst_case(self.factory, seed=self.seed)
        if worst is None:  # pragma: no cover - the factory made an env with another space
            return "skip", "the action space is not text"
        summary = (
            f"{worst.replies} adversarial replies; slowest {worst.seconds:.2f} s ({worst.slowest}, "
            f"{worst.wall_seconds:.2f} s wall clock), "
            f"largest peak-memory growth {worst.memory_bytes >> 20} MiB ({worst.hungriest or 'none'})"
        )
        if worst.problems:
            return "fail", summary + "\n" + "\n".join(worst.problems)
        return "pass", summary

    def text_view(self) -> tuple[Status, str]:
        from verigym.wrappers.language import LanguageWrapper

        tensor_env, text_env = self.factory(), LanguageWrapper(self.factory())
        try:
            observation, info = text_env.reset(seed=self.seed)
            if not isinstance(observation, str):
                return "fail", f"LanguageWrapper.reset gave {type(observation).__name__}, not str"
            if not isinstance(text_env.instructions(), str) or not text_env.instructions().strip():
                return "fail", "instructions() is empty"
            if problem := lone_surrogate(
                text_env.instructions(), "LanguageWrapper.instructions()"
            ) or lone_surrogate(
                observation, f"LanguageWrapper.reset(seed={self.seed})'s observation"
            ):
                return "fail", problem
            result = text_env.step("\u2603 not an action \u2603")
            if not isinstance(result[0], str):
                return (
                    "fail",
                    f"LanguageWrapper.step on garbage gave a {type(result[0]).__name__} observation",
                )
            if problem := lone_surrogate(
                result[0], "LanguageWrapper.step's observation after a garbage reply"
            ):
                return "fail", problem
            if text_env._native_text:
                return "pass", "natively text"
            inner = tensor_env.unwrapped
            if isinstance(inner, TextInterface) and not callable(
                getattr(inner, "action_text", None)
            ):
                return (
                    "skip",
                    "the env has its own parse_action but no action_text(action) to round-trip with",
                )
            to_text = (
                inner.action_text if isinstance(inner, TextInterface) else text_env.action_text
            )
            space = copy.deepcopy(tensor_env.action_space)
            space.seed(self.seed)
            for _ in range(50):
                action = space.sample()
                parsed = text_env.parse_action(to_text(action))
                if not same_values(parsed, action):
                    return (
                        "fail",
                        f"parse_action(action_text({_short(action)})) gave {_short(parsed)}",
                    )
            tensor_obs, _ = tensor_env.reset(seed=self.seed)
            text_obs, _ = text_env.reset(seed=self.seed)
            for step in range(50):
                if text_env.observation_text(tensor_obs) != text_obs:
                    return (
                        "fail",
                        f"step {step}: the text view shows another state than the tensor view with the same seed",
                    )
                action = space.sample()
                t = tensor_env.step(action)
                w = text_env.step(to_text(action))
                if not same_values(t[1:4], w[1:4]):
                    return (
                        "fail",
                        f"step {step}: reward/terminated/truncated differ between views: {t[1:4]} vs {w[1:4]}",
                    )
                tensor_obs, text_obs = t[0], w[0]
                if t[2] or t[3]:
                    break
        except Exception as exc:
            return "fail", f"the text view raised {type(exc).__name__}: {exc}"
        finally:
            tensor_env.close()
            text_env.close()
        return "pass", ""

    def episode_end(self) -> tuple[Status, str]:
        if self.episode_ends == 0:
            return (
                "fail",
                f"no episode ended within {self.steps + 20 * max(self.steps, 100)} random steps: give the env a step limit",
            )
        if self.episode_end_problems:
            return "fail", "\n".join(self.episode_end_problems)
        return "pass", f"{self.episode_ends} episode ends checked"

    def step_after_end(self) -> tuple[Status, str]:
        budget = 20 * max(self.steps, 100)
        env = self.factory()
        copies: list[gym.Env] = []
        try:
            source = _ActionSource(env, self.seed)
            _, info = env.reset(seed=self.seed)
            taken, result = 0, None
            while result is None or not (result[2] or result[3]):
                if taken == budget:
                    return (
                        "skip",
                        f"no episode ended within {budget} steps (see the episode_end check)",
                    )
                result = env.step(source(info))
                info, taken = result[4], taken + 1
            ended = f"step {taken} {'terminated' if result[2] else 'truncated'} the episode"
            after = _ActionSource(
                env, self.seed + 1, oracle=False
            )  # an oracle may not answer after the end
            problems = []
            for label, make_copy in (
                ("its deep copy", copy.deepcopy),
                ("its pickled copy", lambda e: pickle.loads(pickle.dumps(e))),
            ):
                try:
                    copies.append(make_copy(env))
                except Exception:  # reported by the pickle_deepcopy check
                    continue
                if problem := _refuses_step(copies[-1], after(info), label):
                    problems.append(problem)
            if problem := _refuses_step(env, after(info), "the env"):
                problems.insert(0, problem)
            if problems:
                return "fail", f"{ended}; then " + "\n".join(problems) + (
                    "\nA finished episode must stay finished: raise an error until reset() (derive the env from "
                    "verigym.core.EpisodeGuard, or raise gymnasium.error.ResetNeeded in step)"
                )
            _, info = env.reset(seed=self.seed + 1)
            try:
                env.step(after(info))
            except Exception as exc:
                return (
                    "fail",
                    f"{ended}; after reset() the next step still raised {type(exc).__name__}: {_short(str(exc))}",
                )
        finally:
            for item in (env, *copies):
                item.close()
        problems, notes = self._step_after_end_wrapped(budget)
        if problems:
            return (
                "fail",
                f"{ended}; the env refused the next step, but through a wrapper:\n"
                + "\n".join(problems)
                + (
                    "\nA wrapper that answers a step itself (a malformed reply, its own truncation) must keep the "
                    "episode boundary too: derive it from verigym.core.EpisodeGuard"
                ),
            )
        return "pass", "; ".join([f"{ended}; the next step raised", *notes])

    def _step_after_end_wrapped(self, budget: int) -> tuple[list[str], list[str]]:
        """Step after the end through the wrappers that can answer a step without the env:
        :class:`~verigym.wrappers.LanguageWrapper` (the env's end, then the wrapper's own
        truncation after malformed replies) and, for envs that list action candidates,
        :class:`~verigym.wrappers.CandidateActionWrapper`.

        Returns:
            ``(problems, notes)``: what ran on after the end, and what was checked or skipped.
        """
        from verigym.wrappers.language import LanguageWrapper
        from verigym.wrappers.tensor_view import CandidateActionWrapper

        problems: list[str] = []
        notes: list[str] = []
        garbage = "\u2603 not an action \u2603"
        text_env = LanguageWrapper(self.factory())
        try:
            to_text = _reply_text(text_env)
            if to_text is None:
                notes.append(
                    "LanguageWrapper not checked: the env has its own parse_action but no action_text"
                )
            else:
                inner = text_env.env
                source = _ActionSource(inner, self.seed)
                end = _play_to_end(text_env, lambda info: to_text(source(info)), self.seed, budget)
                if end is None:
                    notes.append(f"LanguageWrapper: no episode ended within {budget} steps")
                else:
                    how = "terminated" if end[2] else "truncated"
                    valid = to_text(_ActionSource(inner, self.seed + 1, oracle=False)(end[4]))
                    for label, reply in (("a malformed reply", garbage), ("a valid reply", valid)):
                        if problem := _refuses_step(
                            text_env,
                            reply,
                            f"LanguageWrapper, after the env {how} the episode, {label}",
                        ):
                            problems.append(problem)
                    notes.append("LanguageWrapper refused too")
                limit = text_env.max_invalid_actions
                if not text_env._native_text and limit is not None:
                    _, info = text_env.reset(seed=self.seed + 1)
                    result = None
                    for _ in range(limit):
                        result = text_env.step(garbage)
                    if result is None or not result[3]:
                        problems.append(
                            f"LanguageWrapper did not truncate after {limit} malformed replies in a row"
                        )
                    else:
                        oracle = isinstance(text_env.unwrapped, OracleInterface)
                        action = (
                            text_env.unwrapped.oracle_action()
                            if oracle
                            else _ActionSource(inner, self.seed, oracle=False)(info)
                        )
                        label = f"LanguageWrapper, after its own truncation ({limit} malformed replies), {'the oracle' if oracle else 'a valid'} reply"
                        if problem := _refuses_step(text_env, to_text(action), label):
                            problems.append(problem)
        finally:
            text_env.close()
        candidates = self._candidate_wrapper(CandidateActionWrapper)
        if candidates is not None:
            try:
                try:
                    end = _play_to_end(
                        candidates,
                        _ActionSource(candidates, self.seed, oracle=False),
                        self.seed,
                        budget,
                    )
                except (
                    ValueError
                ) as exc:  # the env lists more candidates later than at the probe reset
                    end = None
                    notes.append(f"CandidateActionWrapper not checked: {exc}")
                if end is not None:
                    how = "terminated" if end[2] else "truncated"
                    for label, index in (
                        ("an index with no candidate", candidates.action_space.n),
                        ("index 0", 0),
                    ):
                        if problem := _refuses_step(
                            candidates,
                            index,
                            f"CandidateActionWrapper, after the env {how} the episode, {label}",
                        ):
                            problems.append(problem)
                    notes.append("CandidateActionWrapper refused too")
            finally:
                candidates.close()
        return problems, notes

    def _candidate_wrapper(self, wrapper: type) -> gym.Env | None:
        """A new env in ``wrapper`` (CandidateActionWrapper) when it is a text env that lists action
        candidates, else ``None``."""
        if not isinstance(self.action_space, spaces.Text):
            return None
        env = self.factory()
        try:
            return wrapper(env)
        except ValueError:  # no candidates: no tensor view through this wrapper
            env.close()
            return None

    def close_twice(self) -> tuple[Status, str]:
        env = self.factory()
        env.reset(seed=self.seed)
        try:
            env.close()
            env.close()
        except Exception as exc:
            return "fail", f"the second close() raised {type(exc).__name__}: {exc}"
        return "pass", ""


def check_env(
    env: EnvSource,
    *,
    steps: int = 200,
    seed: int = 0,
    atol: float | None = None,
    checks: Iterable[str] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    call_timeout: float | None = 120.0,
    progress: Progress | None = None,
    _fresh: tuple[str, Any] | None = None,
) -> CheckReport:
    """Run the conformance checks (module docstring) on one env.

    Args:
        env: a registered id, a ``gymnasium.Env`` instance, or a zero-argument factory.
        steps: length of the determinism rollouts (and of the other play before the replay in
            ``reset_leak``, up to 60 steps).
        seed: the first reset seed.
        atol: absolute tolerance for float observations/rewards; default
            ``metadata["determinism_atol"]`` or 0 (exact).
        checks: names from :data:`ALL_CHECKS` to run (default: all).
        env_kwargs: constructor overrides when ``env`` is an id.
        call_timeout: seconds one call into the env (make, ``reset``, ``step``, ``close``, a copy)
            may take before it is interrupted and its check fails (``None`` or 0: unbounded; only
            enforced when called from the main thread).
        progress: called as each check finishes (``progress(env_id, check, status, seconds)``,
            making the env included); :func:`print_progress` writes one line to stderr.

    Returns:
        The report; call :meth:`CheckReport.raise_for_failures` to turn failures into an error.

    Raises:
        TypeError: ``env`` is none of the accepted kinds.
        ValueError: an unknown check name.
    """
    selected = list(ALL_CHECKS if checks is None else checks)
    unknown = [c for c in selected if c not in ALL_CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose from {ALL_CHECKS}")
    if isinstance(env, str):
        import verigym  # noqa: F401  (registers the verigym ids)

        if env not in gym.registry:
            from verigym.registration import unknown_id_message

            report = CheckReport(env)
            report.results.append(CheckResult("make", "fail", unknown_id_message(env)))
            return report
    with _CallWatchdog(call_timeout) as watchdog:
        made: list[_Checker] = []

        def make() -> tuple[Status, str]:
            made.append(
                _Checker(env, steps=steps, seed=seed, atol=atol, env_kwargs=dict(env_kwargs or {}))
            )
            return "pass", ""

        started = time.perf_counter()
        try:
            status, detail = watchdog.run("make", make)
        except Exception as exc:
            status, detail = "fail", f"making the env raised {type(exc).__name__}: {exc}"
        if progress is not None:
            name = made[0].name if made else env if isinstance(env, str) else type(env).__name__
            progress(name, "make", status, time.perf_counter() - started)
        if status != "pass":
            report = CheckReport(env if isinstance(env, str) else type(env).__name__)
            report.results.append(CheckResult("make", "fail", detail))
            return report
        checker = made[0]
        report = CheckReport(checker.name)
        if "episode_end" in selected and "determinism" not in selected:
            selected.insert(selected.index("episode_end"), "determinism")

        def run(name: str) -> tuple[Status, str]:
            if name == "fresh_interpreter":  # a subprocess with its own timeout
                return watchdog.run(name, lambda: checker.fresh_interpreter(_fresh), bounded=False)
            return watchdog.run(name, getattr(checker, name))

        with checker.resources:
            names = [name for name in ALL_CHECKS if name in selected]
            return run_checks(report, names, run, progress=progress)


def print_progress(env_id: str, check: str, status: Status, seconds: float) -> None:
    """A :data:`Progress` that writes ``env_id check: status (seconds s)`` to stderr (``verigym
    check`` passes it: a browser id's checks take minutes)."""
    print(f"{env_id} {check}: {status} ({seconds:.1f} s)", file=sys.stderr, flush=True)


def run_checks(
    report: CheckReport,
    names: Iterable[str],
    run: Callable[[str], tuple[Status, str]],
    progress: Progress | None = None,
) -> CheckReport:
    """Run each named check in order and append its result to ``report``; a check that raises is a
    ``fail`` whose detail holds the exception and a short traceback (the checkers never raise).
    ``progress`` is told each result as it comes (see :func:`check_env`)."""
    for name in names:
        started = time.perf_counter()
        try:
            status, detail = run(name)
        except Exception as exc:
            status, detail = (
                "fail",
                f"raised {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}",
            )
        report.results.append(CheckResult(name, status, detail))
        if progress is not None:
            progress(report.env_id, name, status, time.perf_counter() - started)
    return report


def check_all(
    env_ids: Sequence[str] | None = None,
    *,
    family: str | None = None,
    steps: int = 200,
    seed: int = 0,
    on_report: Callable[[CheckReport], None] | None = None,
    progress: Progress | None = None,
) -> list[CheckReport]:
    """Check many registered ids; the fresh-interpreter rollouts of all of them share one process.

    Args:
        env_ids: ids to check (default: every verigym Gymnasium id, optionally of ``family``).
        family: restrict the default ids to one family.
        steps, seed: as in :func:`check_env`.
        on_report: called with each report as soon as it is ready (progress output).
        progress: as in :func:`check_env`, for each id's checks.
    """
    from verigym.registration import rows

    if env_ids is None:
        env_ids = [r.id for r in rows(family) if r.api == "gymnasium"]
    requests = {}
    for env_id in env_ids:
        if env_id in gym.registry:
            env = gym.make(env_id, disable_env_checker=True)
            atol = float(env.unwrapped.metadata.get("determinism_atol", 0.0))
            env.close()
            requests[env_id] = (env_id, {}, seed, steps, atol == 0.0)
    fresh = _fresh_trajectories(requests) if requests else {}
    reports = []
    for env_id in env_ids:
        report = check_env(
            env_id, steps=steps, seed=seed, progress=progress, _fresh=fresh.get(env_id)
        )
        if on_report is not None:
            on_report(report)
        reports.append(report)
    return reports
