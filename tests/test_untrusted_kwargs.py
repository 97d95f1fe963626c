"""Constructor kwargs from outside the process (issue 28 section 1): a ``serve-env`` client, a stored
row, a suite file. Only what an env declares client-settable gets through, within its bounds; the
operator may widen that by name; ``unsafe`` never gets through."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
import verigym.remote
import verigym.serve
from verigym.core import UnicodeText, episode_end
from verigym.kwargs_policy import (
    MAX_DEPTH,
    MAX_STRING,
    IntRange,
    check_kwargs,
    client,
    declared_kwargs,
    never,
    operator_only,
)
from verigym.registration import KwargsRefused, rows, untrusted_kwargs
from verigym.remote import RemoteEnvError

TEXT, GRID, MATH, RG = (
    "verigym/GuessNumber-v0",
    "verigym/DoorKey-5x5-v0",
    "verigym/PythonMath-v0",
    "verigym/RG-BasicArithmetic-v0",
)


class _Plain(gym.Env):
    """A third-party env that declares nothing."""

    metadata = {"render_modes": [], "family": "tool"}

    def __init__(self, tag: str = "plain", unsafe: bool = False):
        self.tag, self.unsafe = tag, unsafe
        self.observation_space = self.action_space = UnicodeText(16)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        return "done", 1.0, True, False, episode_end({}, success=True, score=1.0)


PLAIN = "verigym_test/PlainKwargs-v0"
if PLAIN not in gym.registry:
    gym.register(PLAIN, entry_point=_Plain)


@pytest.fixture(scope="module")
def server():
    with verigym.serve.start(TEXT, GRID, MATH, RG, PLAIN) as handle:
        yield handle


def _ask(url: str, message: dict) -> dict:
    from websockets.sync.client import connect

    with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        ws.send(json.dumps(message))
        return json.loads(ws.recv(timeout=30))


def _reset(url: str, env_id: str, kwargs: dict) -> dict:
    return _ask(url, {"type": "reset", "data": {"env_id": env_id, "seed": 0, "kwargs": kwargs}})


# --- the function -----------------------------------------------------------------------------------


def test_unsafe_is_refused_even_when_the_operator_allows_it():
    with pytest.raises(KwargsRefused, match="'unsafe' is never accepted"):
        untrusted_kwargs(MATH, {"unsafe": True}, allow=("unsafe",))
    with pytest.raises(
        KwargsRefused, match="'unsafe' is never accepted"
    ):  # a plugin that declares nothing too
        untrusted_kwargs(PLAIN, {"unsafe": True}, allow=("unsafe", "tag"))
    with pytest.raises(ValueError, match="cannot allow unsafe"):
        verigym.serve.ServeConfig(allow_kwargs=("unsafe",))


def test_every_tool_env_declares_unsafe_never_and_its_costs_operator_only():
    for row in rows("tool"):
        declared = declared_kwargs(_class(row.entry_point))
        assert declared["unsafe"].access == "never", row.id
        assert declared["max_turns"].access == "operator", row.id
    assert (
        declared_kwargs(_class("verigym.envs.tool.python_math:PythonMathEnv"))["timeout_s"].access
        == "operator"
    )


def _class(entry_point: str) -> type:
    import importlib

    module, _, name = entry_point.partition(":")
    return getattr(importlib.import_module(module), name)


def test_client_kwargs_within_bounds_pass_and_the_result_is_exactly_them():
    assert untrusted_kwargs(TEXT, {"max_number": 100, "render_mode": "ansi"}) == {
        "max_number": 100,
        "render_mode": "ansi",
    }
    assert untrusted_kwargs(GRID, {"size": 6, "observation": "full"}) == {
        "size": 6,
        "observation": "full",
    }
    assert untrusted_kwargs(MATH, {"difficulty": 2}) == {"difficulty": 2}
    assert untrusted_kwargs(TEXT, {}) == {}


@pytest.mark.parametrize(
    "env_id, kwargs, needle",
    [
        (TEXT, {"max_number": 10**12}, "max_number"),  # out of bounds
        (TEXT, {"max_number": True}, "must be an int"),  # a bool is not an int
        (TEXT, {"render_mode": "human"}, "render_mode"),  # windows on the server
        (GRID, {"max_steps": 5}, "--allow-kwargs max_steps"),  # a cost: operator only
        (GRID, {"max_episode_steps": 10**6}, "max_episode_steps"),
        (MATH, {"timeout_s": 600}, "--allow-kwargs timeout_s"),
        (TEXT, {"no_such_kwarg": 1}, "not declared"),  # closed by default
        (PLAIN, {"tag": "x"}, "--allow-kwargs tag"),
        (RG, {"dataset": "knight_swap"}, "--allow-kwargs dataset"),  # picks a slow generator
        (RG, {"score_timeout": 30.0}, "score_timeout"),
    ],
)
def test_undeclared_operator_only_and_out_of_bounds_kwargs_are_refused(env_id, kwargs, needle):
    with pytest.raises(KwargsRefused, match="refused|never") as caught:
        untrusted_kwargs(env_id, kwargs)
    assert needle in str(caught.value) and caught.value.param == next(iter(kwargs))


@pytest.mark.parametrize(
    "value, needle",
    [
        ("x" * (MAX_STRING + 1), "character limit"),
        ([[[[[[1]]]]]], "nested deeper"),
        (list(range(1000)), "item limit"),
        (float("nan"), "finite"),
        ((1, 2), "not a plain JSON value"),
        ({1: "a"}, "not a string"),
        (b"bytes", "not a plain JSON value"),
    ],
)
def test_values_must_be_small_plain_json_even_when_allowed(value, needle):
    assert MAX_DEPTH < 6
    with pytest.raises(KwargsRefused, match=needle):
        untrusted_kwargs(PLAIN, {"tag": value}, allow=("tag",))


def test_operator_widening_lets_a_named_kwarg_through_within_its_declared_bound():
    assert untrusted_kwargs(GRID, {"max_steps": 20}, allow=("max_steps",)) == {"max_steps": 20}
    assert untrusted_kwargs(PLAIN, {"tag": "x"}, allow=("tag",)) == {"tag": "x"}
    with pytest.raises(KwargsRefused, match="outside"):
        untrusted_kwargs(GRID, {"max_steps": 10**7}, allow=("max_steps",))
    with pytest.raises(
        KwargsRefused, match="--allow-kwargs max_steps"
    ):  # allowing one name allows only it
        untrusted_kwargs(GRID, {"max_steps": 20}, allow=("size",))


def test_reasoning_gym_config_is_bounded_per_declared_field():
    assert untrusted_kwargs(
        RG, {"config": {"max_terms": 3, "min_terms": 2}}, allow=("config",)
    ) == {"config": {"max_terms": 3, "min_terms": 2}}
    for config, needle in (
        ({"size": 10**9}, "field 'size' may not be set"),
        ({"seed": 1}, "field 'seed'"),
        ({"max_terms": 10**6}, "field 'max_terms'"),
        ({"max_digits": 400}, "field 'max_digits'"),
    ):
        with pytest.raises(KwargsRefused, match=needle):
            untrusted_kwargs(RG, {"config": config}, allow=("config",))
    assert untrusted_kwargs(RG, {"dataset": "basic_arithmetic"}) == {
        "dataset": "basic_arithmetic"
    }  # the row's own value


def test_declarations_are_inherited_and_extendable():
    class Base:
        remote_kwargs = {"size": client(IntRange(1, 4)), "cost": operator_only(why="slow")}

    class Child(Base):
        remote_kwargs = {"size": client(IntRange(1, 8)), "secret": never("for tests")}

    declared = declared_kwargs(Child)
    assert (
        declared["size"].bound == IntRange(1, 8)
        and declared["cost"].access == "operator"
        and "render_mode" in declared
    )
    assert check_kwargs(declared, {"size": 8}) == {"size": 8}
    with pytest.raises(KwargsRefused, match="'secret' is never"):
        check_kwargs(declared, {"secret": 1}, allow=("secret",))
    with pytest.raises(KwargsRefused, match="outside"):
        check_kwargs(declared_kwargs(Base), {"size": 8})


def test_a_suite_file_may_set_only_declared_kwargs(tmp_path):
    from leaderboards.suite import load_suite

    def suite(kwargs):
        path = tmp_path / "s.json"
        path.write_text(
            json.dumps(
                {"name": "s", "tasks": [{"env_id": MATH, "episodes": 1, "env_kwargs": kwargs}]}
            )
        )
        return load_suite(path)

    assert suite({"difficulty": 2}).tasks[0].env_kwargs == {"difficulty": 2}
    with pytest.raises(
        ValueError, match="suite s: env_kwargs of verigym/PythonMath-v0: .*'unsafe' is never"
    ):
        suite({"unsafe": True})
    with pytest.raises(ValueError, match="timeout_s"):
        suite({"timeout_s": 600})


# --- over the wire ------------------------------------------------------------------------------------


def test_server_refuses_unsafe_with_invalid_kwargs_even_with_allow_kwargs():
    with verigym.serve.start(MATH, allow_kwargs=("timeout_s", "max_turns")) as handle:
        reply = _reset(handle.url, MATH, {"unsafe": True})
        assert (
            reply["type"] == "error"
            and reply["data"]["code"] == "INVALID_KWARGS"
            and reply["data"]["param"] == "unsafe"
        )
        assert "never accepted" in reply["data"]["message"]
        assert handle.app.state.server.sessions == {}
        with pytest.raises(RemoteEnvError) as caught:
            verigym.remote.make(MATH, url=handle.url, unsafe=True)
        assert caught.value.code == "INVALID_KWARGS"


def test_server_refuses_out_of_bounds_and_cost_kwargs_and_the_session_goes_on(server):
    from websockets.sync.client import connect

    with connect(server.url.replace("http", "ws", 1) + "/ws") as ws:
        for env_id, kwargs in (
            (TEXT, {"max_number": 10**12}),
            (GRID, {"max_steps": 10**5}),
            (MATH, {"timeout_s": 600}),
            (RG, {"config": {"size": 10**9}}),
            (PLAIN, {"tag": "x"}),
            (TEXT, {"no_such_kwarg": 1}),
        ):
            ws.send(json.dumps({"type": "reset", "data": {"env_id": env_id, "kwargs": kwargs}}))
            reply = json.loads(ws.recv(timeout=30))
            assert reply["data"]["code"] == "INVALID_KWARGS", (env_id, kwargs, reply)
            assert reply["data"]["param"] == next(iter(kwargs))
        ws.send(
            json.dumps(
                {
                    "type": "reset",
                    "data": {"env_id": TEXT, "seed": 1, "kwargs": {"max_number": 100}},
                }
            )
        )
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"


def test_schema_refuses_kwargs_with_invalid_kwargs(server):
    query = urllib.parse.urlencode({"env_id": TEXT, "kwargs": json.dumps({"max_number": 10**12})})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.url}/schema?{query}", timeout=30)
    assert caught.value.code == 400 and json.loads(caught.value.read())["code"] == "INVALID_KWARGS"
    query = urllib.parse.urlencode({"env_id": TEXT, "kwargs": json.dumps({"max_number": 100})})
    with urllib.request.urlopen(f"{server.url}/schema?{query}", timeout=30) as response:
        assert response.status == 200


def test_allowed_kwargs_still_work_over_the_wire(server):
    env = verigym.remote.make(GRID, url=server.url, size=6)
    observation, _ = env.reset(seed=0)
    assert env.unwrapped is env and observation.shape  # a real observation came back
    env.close()
    env = verigym.remote.make(RG, url=server.url, render_mode="ansi")  # level, config: operator's
    text, _ = env.reset(seed=0)
    assert isinstance(text, str) and text
    env.close()


def test_operator_widening_over_the_wire():
    with verigym.serve.start(GRID, PLAIN, allow_kwargs=("max_steps", "tag")) as handle:
        env = verigym.remote.make(GRID, url=handle.url, max_steps=3)
        env.reset(seed=0)
        ends = [env.step(0)[3] for _ in range(3)]
        assert ends == [False, False, True]  # truncated at the operator-allowed limit
        env.close()
        assert _reset(handle.url, PLAIN, {"tag": "allowed"})["type"] == "observation"
        assert (
            _reset(handle.url, GRID, {"max_steps": 10**7})["data"]["code"] == "INVALID_KWARGS"
        )  # still bounded
        assert (
            _reset(handle.url, GRID, {"see_through_walls": 1})["data"]["code"] == "INVALID_KWARGS"
        )  # 1 is not a bool
