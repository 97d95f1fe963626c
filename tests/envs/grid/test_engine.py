"""The grid engine: encoding, egocentric visibility, text and RGB views, planning, the base env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.envs.grid import engine
from verigym.envs.grid.engine import (
    AGENT,
    DOOR,
    EMPTY,
    GOAL,
    KEY,
    LOCKED,
    OPEN,
    UNSEEN,
    WALL,
    YELLOW,
    Grid,
    bfs_plan,
    grid_text,
    render_rgb,
    standing_goal,
)


def test_grid_padding_is_walls_and_cells_is_a_view():
    grid = Grid(5, 6, pad=3)
    assert grid.cells.shape == (5, 6, 3) and grid.padded.shape == (11, 12, 3)
    assert np.all(grid.cells[..., 0] == EMPTY)
    grid.set(2, 3, KEY, YELLOW)
    assert tuple(grid.padded[5, 6]) == (KEY, YELLOW, 0)
    assert np.all(grid.padded[:3, :, 0] == WALL)


def test_ego_view_orientation_and_border():
    grid = Grid(9, 9, pad=6)
    grid.set(4, 6, KEY, YELLOW)  # two cells east of the agent
    view = grid.ego_view(4, 4, engine.EAST, 7)
    assert view.shape == (7, 7, 3) and view.dtype == np.uint8
    assert tuple(view[4, 3]) == (KEY, YELLOW, 0)  # ahead 2, straight on
    view = grid.ego_view(4, 4, engine.NORTH, 7)
    assert tuple(view[6, 5]) == (KEY, YELLOW, 0)  # facing north, the key is 2 to the right
    # near the border the padding reads as walls
    corner = grid.ego_view(0, 0, engine.NORTH, 7)
    assert corner[5, 3, 0] == WALL and corner[0, 3, 0] == UNSEEN  # the wall hides what is beyond


def test_walls_hide_what_is_behind_them():
    grid = Grid(9, 9, pad=6)
    grid.set(2, 4, WALL)
    grid.set(1, 4, KEY, YELLOW)
    view = grid.ego_view(4, 4, engine.NORTH, 7)
    assert view[4, 3, 0] == WALL  # the wall 2 ahead is seen
    assert view[3, 3, 0] == UNSEEN  # the key behind it is not
    assert grid.ego_view(4, 4, engine.NORTH, 7, see_through_walls=True)[3, 3, 0] == KEY
    grid.set(2, 4, DOOR, YELLOW, OPEN)  # an open door does not hide
    assert grid.ego_view(4, 4, engine.NORTH, 7)[3, 3, 0] == KEY


def test_grid_pickles_as_a_working_view():
    import pickle

    grid = Grid(5, 5, pad=2)
    copy = pickle.loads(pickle.dumps(grid))
    copy.set(1, 1, GOAL)
    assert copy.padded[3, 3, 0] == GOAL and grid.cells[1, 1, 0] == EMPTY


def test_bfs_plan_is_shortest_and_respects_walls():
    passable = np.ones((5, 5), dtype=bool)
    passable[:, 2] = False
    passable[4, 2] = True
    goal = standing_goal(5, 5, [(0, 4)])
    plan = bfs_plan(passable, (0, 0, engine.EAST), goal, "cardinal")
    assert plan is not None and len(plan) == 12  # down 4, right 4, up 4
    walled = passable.copy()
    walled[4, 2] = False
    assert bfs_plan(walled, (0, 0, engine.EAST), goal, "minigrid") is None


def test_render_and_text_of_encoded_cells():
    cells = np.zeros((3, 4, 3), dtype=np.uint8)
    cells[..., 0] = WALL
    cells[1, 1] = (AGENT, EMPTY, engine.EAST)
    cells[1, 2] = (DOOR, YELLOW, LOCKED)
    image = render_rgb(cells, tile_size=8, agents=[(0, 0, engine.SOUTH, engine.BLUE)])
    assert image.shape == (24, 32, 3) and image.dtype == np.uint8
    assert not np.array_equal(image[8:16, 8:16], image[8:16, 24:32])
    text = grid_text(cells)
    assert text.splitlines()[1] == "##> Ly##"


def test_observation_modes_and_spaces():
    env = gym.make("verigym/DoorKey-8x8-v0", observation="full")
    obs, info = env.reset(seed=1)
    assert obs.shape == (8, 8, 3) and env.observation_space.contains(obs)
    assert (obs[..., 0] == AGENT).sum() == 1
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (7,)
    partial = gym.make("verigym/DoorKey-8x8-v0", view_size=5)
    obs, _ = partial.reset(seed=1)
    assert obs.shape == (5, 5, 3) and partial.observation_space.contains(obs)
    with pytest.raises(ValueError, match="view_size"):
        gym.make("verigym/DoorKey-8x8-v0", view_size=4)
    with pytest.raises(ValueError, match="observation"):
        gym.make("verigym/DoorKey-8x8-v0", observation="fog")


def test_doorkey_dynamics_locked_door_needs_key():
    env = gym.make("verigym/DoorKey-5x5-v0", observation="full").unwrapped
    env.reset(seed=0)
    door = tuple(env.grid.find(DOOR)[0])
    env.agent_pos, env.agent_dir = (door[0], door[1] - 1), engine.EAST
    assert env.action_mask()[5] == 0  # toggle is illegal without the key
    env.step(5)
    assert env.grid.cells[door][2] == LOCKED
    env.carrying = (KEY, YELLOW, 0)
    env.step(5)
    assert env.grid.cells[door][2] == OPEN
    env.step(2)
    assert env.agent_pos == door


def test_malformed_action_is_flagged_not_raised():
    env = gym.make("verigym/FourRooms-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(99)
    assert "action_error" in info and "forward" in info["action_error"]
    assert env.observation_space.contains(obs) and reward == 0.0


def test_text_view_parses_names_and_numbers():
    env = gym.make("verigym/DoorKey-6x6-v0").unwrapped
    env.reset(seed=0)
    assert env.parse_action("I will turn LEFT") == 0
    assert env.parse_action("toggle") == 5
    assert env.parse_action("action 2") == 2
    with pytest.raises(verigym.ActionParseError):
        env.parse_action("jump")
    assert "Mission:" in env.instructions() and "toggle" in env.instructions()


def test_cardinal_action_set_turns_when_blocked():
    env = gym.make("verigym/Empty-5x5-v0", action_set="cardinal", observation="full").unwrapped
    env.reset(seed=0)
    env.agent_pos, env.agent_dir = (1, 1), engine.EAST
    env.step(0)  # up: a wall; the agent turns north and stays
    assert env.agent_pos == (1, 1) and env.agent_dir == engine.NORTH
    env.step(2)  # down
    assert env.agent_pos == (2, 1) and env.agent_dir == engine.SOUTH


def test_partial_text_view_shows_the_carried_object():
    env = gym.make("verigym/DoorKey-5x5-v0").unwrapped
    obs, _ = env.reset(seed=0)
    assert "Carrying: nothing" in env.observation_text(obs)
    env.carrying = (KEY, YELLOW, 0)
    text = env.observation_text(env.observation())
    assert "Carrying: a yellow key" in text and "^" in text.splitlines()[-2]


@pytest.mark.parametrize(
    "env_id",
    ["verigym/DoorKey-6x6-v0", "verigym/MultiRoom-N2-S4-v0", "verigym/KeyCorridor-S3R1-v0"],
)
def test_cached_visibility_equals_a_fresh_computation(env_id):
    env = gym.make(env_id).unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for step in range(300):
        action = env.oracle_action() if rng.random() < 0.5 else int(rng.integers(7))
        obs, _, terminated, truncated, _ = env.step(action)
        r, c = env.agent_pos
        fresh = env.grid.ego_view(r, c, env.agent_dir, env.view_size)
        fresh[-1, env.view_size // 2] = env.carrying if env.carrying[0] else (EMPTY, 0, 0)
        assert np.array_equal(obs, fresh), f"step {step}"
        if terminated or truncated:
            env.reset(seed=step)


@pytest.mark.parametrize(
    "module", ["encoding", "grid", "visibility", "rendering", "planning", "base", "engine"]
)
def test_each_engine_module_imports_on_its_own(module):
    """The split modules have no import cycle: each one imports first in a fresh interpreter."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", f"import verigym.envs.grid.{module}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_engine_reexports_the_objects_of_the_split_modules():
    import importlib

    homes = [
        importlib.import_module(f"verigym.envs.grid.{m}")
        for m in ("encoding", "grid", "visibility", "rendering", "planning", "base")
    ]
    homes.append(importlib.import_module("verigym.validation"))
    for name in engine.__all__:
        owners = [home for home in homes if name in vars(home)]
        assert owners, f"{name} has no home module"
        assert getattr(engine, name) is getattr(owners[0], name), name
