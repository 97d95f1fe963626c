"""Small NetHack tasks in the manner of MiniHack, on nle's own engine and level compiler.

A task is one level written in NetHack's level description language (a des-file, below). At the
first use in a process it is compiled by the tools nle ships in its ``nethackdir`` (``lev_comp``;
``makedefs -e`` and ``dgn_comp`` for a dungeon whose first level is that one; ``dlb`` to pack
them with the rest of nle's game data) into a private copy of NetHack's data archive, which
``nle.nethack.Nethack(hackdir=...)`` loads. Nothing of nle is patched or rebuilt, and nothing is
cached between processes (a build takes well under a second), so no file another process could
write is ever loaded.

Each folder is locked (``flock``) by the process that built it for its whole life (its forked
children inherit the lock): a process that ends without its exit handlers (``os._exit`` in a
forked worker, SIGKILL, a crash) leaves its ~1.4 MB folder, and the next build in any process
removes every folder whose lock is free, with nle's play folder linked to it
(:func:`remove_orphans`).

The four tasks (``verigym/NetHack-<Task>-v0``), each seeded by NetHack's own random generators:

- ``room``: cross a lit room from its west side to the down stairs on its east side.
- ``corridor``: two lit rooms joined by a dark corridor (one of three routes); find the stairs.
- ``monster``: cross a lit room past 2-3 gas spores; one that is killed next to you explodes.
  Success needs the stairs taken without a hit point lost.
- ``pickup``: a random wand lies in a lit room; pick it up.

The verdict reads the game's own state: the dungeon depth (the stairs were taken), the hit points
and the inventory's object classes (``blstats`` and ``inv_oclasses``).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from typing import Any, ClassVar

import numpy as np

from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.validation import check_choice, check_int

from .nethack import NetHackEnv, import_nle

__all__ = ["TASKS", "NetHackTaskEnv", "hackdir", "remove_orphans"]

_HEAD = """MAZE: "mylevel", ' '
FLAGS: noteleport
GEOMETRY: center, center
"""
_ROOM_MAP = """MAP
-----------------
|...............|
|...............|
|...............|
|...............|
|...............|
|...............|
|...............|
-----------------
ENDMAP
REGION: (0,0,16,8), lit, "ordinary"
"""
_CORRIDOR_MAP = """MAP
-------                       -------
|.....|                       |.....|
|.....|                       |.....|
|.....|                       |.....|
|.....|                       |.....|
|.....|                       |.....|
-------                       -------
ENDMAP
REGION: (0,0,6,6), lit, "ordinary"
REGION: (30,0,36,6), lit, "ordinary"
SWITCH [ 3 ] {
  CASE 0:
    TERRAIN: (6,1), '.'
    TERRAIN: line (7,1),(15,1), '#'
    TERRAIN: line (15,2),(15,5), '#'
    TERRAIN: line (16,5),(29,5), '#'
    TERRAIN: (30,5), '.'
    BREAK
  CASE 1:
    TERRAIN: (6,5), '.'
    TERRAIN: line (7,5),(22,5), '#'
    TERRAIN: line (22,1),(22,4), '#'
    TERRAIN: line (23,1),(29,1), '#'
    TERRAIN: (30,1), '.'
    BREAK
  CASE 2:
    TERRAIN: (6,3), '.'
    TERRAIN: line (7,3),(10,3), '#'
    TERRAIN: line (10,2),(10,1), '#'
    TERRAIN: line (11,1),(20,1), '#'
    TERRAIN: line (20,2),(20,5), '#'
    TERRAIN: line (21,5),(29,5), '#'
    TERRAIN: (30,5), '.'
    BREAK
}
BRANCH: (1,1,5,5), (0,0,0,0)
STAIR: (31,1,35,5), (0,0,0,0), down
"""
TASKS: dict[str, str] = {
    "room": _HEAD
    + _ROOM_MAP
    + """BRANCH: (1,1,3,7), (0,0,0,0)
STAIR: (13,1,15,7), (0,0,0,0), down
""",
    "corridor": _HEAD + _CORRIDOR_MAP,
    "monster": _HEAD
    + _ROOM_MAP
    + """BRANCH: (1,1,2,7), (0,0,0,0)
STAIR: (14,1,15,7), (0,0,0,0), down
MONSTER: ('e', "gas spore"), rndcoord(fillrect (6,1,10,7)), hostile
MONSTER: ('e', "gas spore"), rndcoord(fillrect (6,1,10,7)), hostile
[50%]: MONSTER: ('e', "gas spore"), rndcoord(fillrect (6,1,10,7)), hostile
""",
    "pickup": _HEAD
    + _ROOM_MAP
    + """BRANCH: (1,1,15,7), (0,0,0,0)
OBJECT: '/', rndcoord(fillrect (1,1,15,7))
""",
}
"""Task name -> its level's des-file (NetHack 3.6 ``lev_comp`` syntax; map coordinates)."""

_DESCRIPTIONS = {
    "room": "Cross the lit room: walk to the down stairs '>' and go down them ('down').",
    "corridor": "Two rooms are joined by a dark corridor (#). Find the down stairs '>' in the "
    "other room and go down them ('down').",
    "monster": "Cross the lit room to the down stairs '>' and go down them ('down'). Gas "
    "spores (e) float in the room: never attack one (moving into it attacks it); it "
    "explodes when it dies. Losing any hit point fails the task.",
    "pickup": "A wand (/) lies in the lit room: walk onto it and pick it up ('pickup').",
}
_OPTIONS = ("pettype:none", "!autopickup")
"""Replace nle's autopickup options: no pet (it could fight the monsters), nothing picked up by
walking (nle's own options pick wands up: a later ``!autopickup`` does not undo that)."""
_DUNGEON_ANCHOR = 'DUNGEON:\t"The Dungeons of Doom" "D" (25, 5)\n'
_MORE = b"--More--"

_built: dict[tuple[int, str], str] = {}
_lock = threading.Lock()
_FOLDER_PREFIX = "verigym-nethack-"
_OWNER_FILE = ".owner"
"""In each task folder: the file its owner holds an exclusive ``flock`` on, its pid written inside."""
_owner_fds: list[int] = []
"""The owner files' descriptors this process holds (their locks last as long as they are open)."""


def _owned_folder(task: str) -> str:
    """A new private folder for ``task``'s build, locked by this process until it ends."""
    out = tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{task}-")
    fd = os.open(os.path.join(out, _OWNER_FILE), os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # never closed: the kernel releases it when the last holder ends
    os.write(fd, str(os.getpid()).encode())  # written after the lock: an empty file is a folder
    # being made, which remove_orphans leaves alone
    _owner_fds.append(fd)
    return out


def _remove_if_mine(out: str, owner: int) -> None:
    """Exit handler: remove ``out`` in the process that built it, never in a forked copy of it
    (which inherits the handler and may exit while its parent still plays)."""
    if os.getpid() == owner:
        shutil.rmtree(out, True)


def _orphaned(path: str) -> bool:
    """Whether ``path`` is a task folder of this user that no live process holds: its owner file
    is a regular file with a pid in it, and its lock can be taken."""
    try:
        info = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.getuid():
            return False
        fd = os.open(os.path.join(path, _OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone, or no owner file (a folder being made, or not ours)
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False  # held: its owner (or a forked child of it) lives
        return os.read(fd, 32).strip().isdigit()
    finally:
        os.close(fd)


def remove_orphans(root: str | None = None) -> list[str]:
    """Remove the task folders whose owning processes all ended without removing them (a forked
    worker that left through ``os._exit``, a killed process), and nle's play folders
    (``nle*``, made by ``nle.nethack.Nethack``) whose ``nhdat`` link points into one of them.

    Only folders of this user, named as :func:`hackdir` names them, with a free owner lock are
    removed: a folder of a live process (or of its forked children), or one being made, is kept.

    Args:
        root: the folder to look in (default: :func:`tempfile.gettempdir`).

    Returns:
        the paths removed.
    """
    root = root or tempfile.gettempdir()
    pattern = re.compile(rf"{_FOLDER_PREFIX}(?:{'|'.join(TASKS)})-[A-Za-z0-9_]+")
    try:
        names = os.listdir(root)
    except OSError:
        return []
    mine = set(_built.values())
    removed = [
        os.path.join(root, name)
        for name in names
        if pattern.fullmatch(name)
        and os.path.join(root, name) not in mine
        and _orphaned(os.path.join(root, name))
    ]
    for path in removed:
        shutil.rmtree(path, True)
    gone = set(removed)
    for name in names:
        if not name.startswith("nle"):
            continue
        play = os.path.join(root, name)
        try:
            target = os.readlink(os.path.join(play, "nhdat"))
            owned = os.lstat(play).st_uid == os.getuid() and not os.path.islink(play)
        except OSError:
            continue
        if owned and os.path.dirname(target) in gone:
            shutil.rmtree(play, True)
            removed.append(play)
    return removed


def _run(tool: str, *args: str, cwd: str) -> None:
    result = subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{os.path.basename(tool)} {' '.join(args)} failed ({result.returncode}): "
            f"{(result.stdout + result.stderr).strip()[-500:]}"
        )


def _build(task: str, out: str) -> None:
    import_nle()
    from nle.nethack.nethack import HACKDIR as source  # nle's installed NetHack directory

    tools = {
        name: os.path.join(source, name) for name in ("dlb", "makedefs", "dgn_comp", "lev_comp")
    }
    with tempfile.TemporaryDirectory(prefix="verigym-nethack-build-") as work:
        lib, dat, util = (os.path.join(work, name) for name in ("lib", "dat", "util"))
        for path in (lib, dat, util):
            os.mkdir(path)
        _run(tools["dlb"], "xf", os.path.join(source, "nhdat"), cwd=lib)
        with open(os.path.join(source, "dat", "dungeon.def")) as handle:
            dungeon = handle.read()
        if _DUNGEON_ANCHOR not in dungeon:
            raise RuntimeError("nle's dat/dungeon.def has no Dungeons of Doom line to extend")
        # the task's level is the first level of the main dungeon (where the game starts)
        dungeon = dungeon.replace(
            _DUNGEON_ANCHOR, _DUNGEON_ANCHOR + 'LEVEL:\t\t"mylevel" "none" @ (1, 1)\n', 1
        )
        with open(os.path.join(dat, "dungeon.def"), "w") as handle:
            handle.write(dungeon)
        _run(tools["makedefs"], "-e", cwd=util)  # ../dat/dungeon.def -> ../dat/dungeon.pdf
        _run(tools["dgn_comp"], "dungeon.pdf", cwd=dat)
        shutil.copyfile(os.path.join(dat, "dungeon"), os.path.join(lib, "dungeon"))
        with open(os.path.join(lib, "mylevel.des"), "w") as handle:
            handle.write(TASKS[task])
        _run(tools["lev_comp"], "mylevel.des", cwd=lib)
        os.remove(os.path.join(lib, "mylevel.des"))
        if not os.path.exists(os.path.join(lib, "mylevel.lev")):
            raise RuntimeError(f"lev_comp wrote no mylevel.lev for the {task} task")
        _run(tools["dlb"], "cf", os.path.join(out, "nhdat"), *sorted(os.listdir(lib)), cwd=lib)


def hackdir(task: str) -> str:
    """A NetHack directory whose data archive starts the game on ``task``'s level.

    Built once per process (and again in a forked child) in a private temporary directory that
    is removed at exit; the first build also removes the folders that ended processes left
    (:func:`remove_orphans`). Returns its path (``nhdat`` inside).

    Raises:
        ValueError: an unknown task.
        ImportError: nle is not installed.
        RuntimeError: one of nle's level tools failed (its output is in the message).
    """
    check_choice("task", task, tuple(TASKS))
    key = (os.getpid(), task)
    with _lock:
        if key not in _built:
            remove_orphans()
            out = _owned_folder(task)
            atexit.register(_remove_if_mine, out, os.getpid())
            try:
                _build(task, out)
            except BaseException:
                shutil.rmtree(out, True)
                raise
            _built[key] = out
        return _built[key]


class NetHackTaskEnv(NetHackEnv):
    """A small NetHack task (``verigym/NetHack-Room-v0``, ``-Corridor-v0``, ``-Monster-v0``,
    ``-PickUp-v0``), on the level of :data:`TASKS` ``[task]``.

    Observation, action space and text view are :class:`NetHackEnv`'s (the ``uint8 (24, 80)``
    screen, ``Discrete(86)`` named keys). A neutral human Monk without a pet; no monster is
    generated but the level's; walking picks nothing up.

    Reward: 1.0 on the step that succeeds, else 0. ``success`` (and ``score`` 1.0): ``room``,
    ``corridor``: the down stairs were taken (dungeon level 2 reached); ``monster``: the same
    with no hit point ever lost (the first lost hit point ends the episode, failed); ``pickup``:
    a wand is in the inventory. The episode is terminated on success, on failure or at death,
    truncated after ``max_steps`` keys.

    Args:
        task: one of :data:`TASKS`.
        max_steps: keys per episode (200; an operator may allow up to 10000).
        render_mode: ``"ansi"``; another mode renders nothing.

    Raises:
        ImportError: nle is not installed.
        ValueError: an unknown task or an out-of-range ``max_steps``.
        RuntimeError: nle's level tools failed to build the task's level.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "family": "world"}
    remote_kwargs = {
        "task": client(OneOf(tuple(TASKS))),
        "max_steps": operator_only(IntRange(1, 10_000), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, task: str, max_steps: int = 200, render_mode: str | None = None):
        self.task = check_choice("task", task, tuple(TASKS))
        self._chars = np.zeros((21, 79), np.uint8)
        self._classes = np.zeros(55, np.uint8)
        self._hurt = False
        self._visited: set[tuple[int, int]] = set()
        super().__init__(
            goal_depth=2,
            max_steps=check_int("max_steps", max_steps, 1, 10_000),
            render_mode=render_mode,
        )

    def _new_game(self) -> None:
        nethack = import_nle()
        self._game = nethack.Nethack(
            observation_keys=("tty_chars", "blstats", "chars", "inv_oclasses"),
            ttyrec=None,
            copy=True,
            fix_moon_phase=True,
            hackdir=hackdir(self.task),  # this process's own build
            options=(
                *(o for o in nethack.NETHACKOPTIONS if not o.startswith(("autopickup", "pickup_"))),
                *_OPTIONS,
            ),
            spawn_monsters=False,
        )

    def _observe(self, obs: Any) -> None:
        super()._observe(obs)
        chars = np.array(obs[2], np.uint8)
        self._classes = np.array(obs[3], np.uint8)
        nethack = import_nle()
        hp, max_hp = int(self._stats[nethack.NLE_BL_HP]), int(self._stats[nethack.NLE_BL_HPMAX])
        self._hurt = self._hurt or hp < max_hp
        x, y = self._position()
        if 0 <= y < chars.shape[0] and 0 <= x < chars.shape[1] and chars[y, x] == ord("@"):
            chars[y, x] = self._chars[y, x] if self._visited else ord(".")  # what is under @
        self._chars = chars
        self._visited.add((x, y))

    def _start(self) -> None:
        self._hurt = False
        self._visited = set()
        self._chars = np.zeros((21, 79), np.uint8)
        super()._start()

    def _position(self) -> tuple[int, int]:
        """The player's (column, row) on :attr:`_chars` (NetHack's x, y)."""
        nethack = import_nle()
        return int(self._stats[nethack.NLE_BL_X]), int(self._stats[nethack.NLE_BL_Y])

    def _succeeded(self) -> bool:
        if self.task == "pickup":
            return bool((self._classes == import_nle().WAND_CLASS).any())
        return self._max_depth >= 2 and not (self.task == "monster" and self._hurt)

    def _task_over(self) -> bool:
        return self._succeeded() or (self.task == "monster" and self._hurt)

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["task"] = self.task
        return info

    def score(self) -> float:
        """1.0 when the task succeeded, else 0.0."""
        return 1.0 if self._succeeded() else 0.0

    def instructions(self) -> str:
        return (
            f"You play a small NetHack 3.6 task. {_DESCRIPTIONS[self.task]} The screen is 24 "
            "lines: messages on top, the map (@ is you), two status lines. The episode ends on "
            f"success, on failure or after {self.max_steps} keys. Answer '--More--' with "
            "'more'. Reply with exactly one action name: " + ", ".join(self.action_names())
        )

    def task_fingerprint(self) -> dict[str, Any]:
        return {"task": self.task, **super().task_fingerprint()}

    # -- oracle --------------------------------------------------------------------------------
    def oracle_action(self) -> np.int64:
        """The scripted solver's next action (the ``oracle`` agent): answer ``--More--``; go down
        or pick up when on the stairs or the wand (or when no wand is in sight: it lies under
        the player); else step along a shortest path (8 directions,
        never into a monster) to the stairs or the wand when they are on the map, else to the
        nearest unvisited square next to unexplored stone (a doorway, a corridor's end).
        Privileged state: the map's characters, with what lies under the player, and the
        position from NetHack's bottom-line stats."""
        names = self.action_names()
        if _MORE in bytes(self._screen.reshape(-1)):
            return np.int64(names.index("more"))
        x, y = self._position()
        target = ord("/") if self.task == "pickup" else ord(">")
        # in the lit room, a wand nowhere on the map lies under the player (where the game began)
        hidden = self.task == "pickup" and not (self._chars == target).any()
        if self._chars[y, x] == target or hidden:
            return np.int64(names.index("pickup" if self.task == "pickup" else "down"))
        step = self._path_step((x, y), target)
        if step is None:
            return np.int64(names.index("search"))  # boxed in: let the monsters move
        return np.int64(names.index(_DIRECTIONS[(step[0] - x, step[1] - y)]))

    def _path_step(self, start: tuple[int, int], target: int) -> tuple[int, int] | None:
        """The first square of a shortest known path from ``start`` to a ``target`` square or,
        when none is reachable yet, to the nearest frontier square (passable, unvisited, next to
        unexplored stone); None when neither is reachable."""
        chars = self._chars
        rows, cols = chars.shape
        goals = {(int(c), int(r)) for r, c in zip(*np.nonzero(chars == target))}
        step = self._first_step(start, goals)
        if step is not None:
            return step
        stone = np.zeros((rows + 2, cols + 2), bool)
        stone[1:-1, 1:-1] = chars == ord(" ")
        near_stone = np.zeros((rows, cols), bool)
        for dx, dy in _DIRECTIONS:
            near_stone |= stone[1 + dy : rows + 1 + dy, 1 + dx : cols + 1 + dx]
        frontier = np.isin(chars, _PASSABLE) & near_stone
        goals = {(int(c), int(r)) for r, c in zip(*np.nonzero(frontier))} - self._visited
        return self._first_step(start, goals)

    def _first_step(
        self, start: tuple[int, int], goals: set[tuple[int, int]]
    ) -> tuple[int, int] | None:
        """Breadth-first search over passable squares (8 directions) from ``start``."""
        chars = self._chars
        rows, cols = chars.shape
        parent: dict[tuple[int, int], tuple[int, int]] = {start: start}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            if here in goals:
                while parent[here] != start:
                    here = parent[here]
                return here
            for dx, dy in _DIRECTIONS:
                there = (here[0] + dx, here[1] + dy)
                if there in parent or not (0 <= there[0] < cols and 0 <= there[1] < rows):
                    continue
                if int(chars[there[1], there[0]]) not in _PASSABLE:
                    continue  # a wall, stone, or a monster (a letter): never walked into
                parent[there] = here
                queue.append(there)
        return None


_DIRECTIONS = {
    (0, -1): "north",
    (1, -1): "northeast",
    (1, 0): "east",
    (1, 1): "southeast",
    (0, 1): "south",
    (-1, 1): "southwest",
    (-1, 0): "west",
    (-1, -1): "northwest",
}
_PASSABLE = tuple(ord(c) for c in ".#<>/")
"""Map characters the oracle walks on: floor and doorways, corridors, stairs, the wand."""
