"""Household: an ALFWorld-style text world of receptacles, objects with states and goals."""

from __future__ import annotations

import re
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["HouseholdEnv"]

# receptacle kind -> openable
_RECEPTACLES = {
    "cabinet": True,
    "drawer": True,
    "fridge": True,
    "microwave": True,
    "countertop": False,
    "table": False,
    "shelf": False,
    "sinkbasin": False,
    "stoveburner": False,
    "dresser": False,
}
_OBJECTS = (
    "mug",
    "plate",
    "bowl",
    "cup",
    "apple",
    "tomato",
    "potato",
    "egg",
    "knife",
    "spoon",
    "pan",
    "bread",
)
_APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_ADJECTIVE = {"clean": "clean", "heat": "hot", "cool": "cold"}
# difficulty -> (receptacles besides the appliances, objects, goal transforms, step limit)
_LEVELS = {
    "easy": (4, 6, ("none",), 30),
    "medium": (6, 9, ("none", "clean", "heat", "cool"), 40),
    "hard": (9, 14, ("clean", "heat", "cool"), 50),
}
_PLACES = ("cabinet", "drawer", "countertop", "table", "shelf", "dresser", "stoveburner")


class HouseholdEnv(TextGameEnv):
    """A procedurally generated household in the manner of ALFWorld/TextWorld.

    ## Description
    A room holds numbered receptacles (cabinets and drawers that open and close, a fridge that
    cools, a microwave that heats, a sink basin that cleans, tables, shelves ...) and objects
    with states (clean/dirty, hot/cold/room temperature). The goal is a predicate on the world
    state, e.g. "put a clean mug in cabinet 2" or "put a hot apple on table 1"; the verifier
    evaluates it on the state, never on the agent's text. ``info["admissible_commands"]`` (and
    ``info["action_candidates"]``) list every valid command. The oracle is a planner: find an
    object of the goal type, take it, apply the transform at its appliance, put it in place.

    ## Action Space
    ``UnicodeText(8192)``: one command (the last line of the reply): ``go to <r>``,
    ``open <r>``, ``close <r>``, ``take <o> from <r>``, ``put <o> in/on <r>``,
    ``clean|heat|cool <o> with <r>``, ``examine <r>``, ``look``, ``inventory``.

    ## Observation Space
    ``UnicodeText``: the goal and what the agent sees after each command.

    ## Rewards
    ``+1`` when the goal predicate holds; ``invalid_action_reward`` (default ``-0.05``) for a command
    that is not admissible ("Nothing happens."); ``0`` otherwise.

    ## Starting State
    Levels (receptacles besides the sink/microwave/fridge, objects, goal transforms, step limit):
    easy (4, 6, pick and place, 30), medium (6, 9, none/clean/heat/cool, 40), hard (9, 14,
    clean/heat/cool, 50). Objects start dirty with probability 0.5 and at room temperature;
    closed receptacles hide their contents.

    ## Episode End
    Terminated when the goal holds (success); truncated after the step limit (score 0.5 when the
    agent holds an object of the goal type in the goal state, else 0).

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``invalid_action_reward`` (float).

    ## Version History
    * v0: initial version.

    References: M. Shridhar et al., "ALFWorld: Aligning Text and Embodied Environments for
    Interactive Learning", ICLR 2021; M.-A. Côté et al., "TextWorld", 2018.
    """

    def __init__(
        self,
        *,
        difficulty: str = "medium",
        invalid_action_reward: float = -0.05,
        render_mode: str | None = None,
    ):
        self.difficulty = check_choice("difficulty", difficulty, DIFFICULTIES)
        self.receptacle_count, self.object_count, self.transforms, limit = _LEVELS[difficulty]
        self._init_base(
            max_turns=limit, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self._where: dict[str, str] = {}  # object -> receptacle or "agent"
        self._open: dict[str, bool] = {}
        self._clean: dict[str, bool] = {}
        self._temperature: dict[str, str] = {}
        self._at = ""
        self._goal: tuple[str, str, str] = ("mug", "none", "table 1")

    # -- world ---------------------------------------------------------------------------------------
    def _new_task(self) -> str:
        kinds = [
            _PLACES[int(i)]
            for i in self.np_random.integers(len(_PLACES), size=self.receptacle_count)
        ]
        counts: dict[str, int] = {}
        receptacles = []
        for kind in ["sinkbasin", "microwave", "fridge", *kinds]:
            counts[kind] = counts.get(kind, 0) + 1
            receptacles.append(f"{kind} {counts[kind]}")
        self._open = {r: not _RECEPTACLES[r.split()[0]] for r in receptacles}
        holders = [r for r in receptacles if r.split()[0] not in ("microwave", "sinkbasin")]
        object_counts: dict[str, int] = {}
        self._where, self._clean, self._temperature = {}, {}, {}
        for _ in range(self.object_count):
            kind = _OBJECTS[int(self.np_random.integers(len(_OBJECTS)))]
            object_counts[kind] = object_counts.get(kind, 0) + 1
            name = f"{kind} {object_counts[kind]}"
            self._where[name] = holders[int(self.np_random.integers(len(holders)))]
            self._clean[name] = bool(self.np_random.random() < 0.5)
            self._temperature[name] = "room"
        goal_kind = sorted(object_counts)[int(self.np_random.integers(len(object_counts)))]
        transform = self.transforms[int(self.np_random.integers(len(self.transforms)))]
        targets = [r for r in receptacles if r.split()[0] in _PLACES]
        target = targets[int(self.np_random.integers(len(targets)))]
        self._goal = (goal_kind, transform, target)
        self._at = ""
        return f"{self.instructions()}\nYou are in the middle of a room. Around you: {', '.join(receptacles)}."

    def _goal_text(self) -> str:
        kind, transform, target = self._goal
        state = f"{_ADJECTIVE[transform]} " if transform != "none" else ""
        return f"put a {state}{kind} in/on {target}"

    def instructions(self) -> str:
        return (
            f"Your task is to: {self._goal_text()}. Commands: go to <place>, open <place>, close "
            "<place>, take <object> from <place>, put <object> in/on <place>, clean <object> with "
            "sinkbasin 1, heat <object> with microwave 1, cool <object> with fridge 1, examine "
            "<place>, look, inventory. info['admissible_commands'] lists the valid ones."
        )

    def _holds(self, name: str) -> bool:
        kind, transform, target = self._goal
        return name.split()[0] == kind and self._in_state(name, transform)

    def _in_state(self, name: str, transform: str) -> bool:
        return {
            "none": True,
            "clean": self._clean[name],
            "heat": self._temperature[name] == "hot",
            "cool": self._temperature[name] == "cold",
        }[transform]

    def _solved(self) -> bool:
        return any(self._where[o] == self._goal[2] and self._holds(o) for o in self._where)

    def _contents(self, receptacle: str) -> list[str]:
        return sorted(o for o, r in self._where.items() if r == receptacle)

    def _describe(self, receptacle: str) -> str:
        if not self._open[receptacle]:
            return f"The {receptacle} is closed."
        items = self._contents(receptacle)
        return f"On/in the {receptacle} you see {', '.join(items) if items else 'nothing'}."

    def _receptacles(self) -> list[str]:
        return list(self._open)

    def _held(self) -> str | None:
        return next((o for o, r in self._where.items() if r == "agent"), None)

    def admissible_commands(self) -> list[str]:
        """Every command that changes something or looks, in a fixed order."""
        commands = ["look", "inventory"]
        commands += [f"go to {r}" for r in self._receptacles() if r != self._at]
        here, held = self._at, self._held()
        if here:
            commands.append(f"examine {here}")
            if _RECEPTACLES[here.split()[0]]:
                commands.append(f"{'close' if self._open[here] else 'open'} {here}")
            if self._open[here]:
                if held is None:
                    commands += [f"take {o} from {here}" for o in self._contents(here)]
                elif here.split()[0] not in ("microwave", "sinkbasin"):
                    commands.append(f"put {held} in/on {here}")
            if held is not None:
                for verb, appliance in _APPLIANCE.items():
                    if here.split()[0] == appliance:
                        commands.append(f"{verb} {held} with {here}")
        return commands

    def action_candidates(self) -> list[str]:
        return self.admissible_commands()

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["admissible_commands"] = info["action_candidates"]
        return info

    # -- moves ---------------------------------------------------------------------------------------
    def _parse(self, text: str) -> str:
        line = text.strip().splitlines()[-1].strip().strip(".`*'\"")
        line = re.sub(r"\s+", " ", line)
        line = re.sub(r"^put (\w+ \d+) (?:in|on|in/on) ", r"put \1 in/on ", line)
        if line not in self.admissible_commands():
            raise ActionParseError(
                f"Nothing happens: {line[:60]!r} is not an admissible command here"
            )
        return line

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        words = move.split()
        verb = words[0]
        held = self._held()
        if move == "look":
            feedback = f"You are {'at ' + self._at if self._at else 'in the middle of the room'}. Around you: {', '.join(self._receptacles())}."
        elif move == "inventory":
            feedback = f"You are carrying {held}." if held else "You are not carrying anything."
        elif verb == "go":
            self._at = " ".join(words[2:])
            feedback = f"You arrive at {self._at}. {self._describe(self._at)}"
        elif verb == "examine":
            feedback = self._describe(self._at)
        elif verb in ("open", "close"):
            self._open[self._at] = verb == "open"
            feedback = f"You {verb} the {self._at}. " + (
                self._describe(self._at) if verb == "open" else ""
            )
        elif verb == "take":
            name = " ".join(words[1:3])
            self._where[name] = "agent"
            feedback = f"You pick up the {name} from the {self._at}."
        elif verb == "put":
            self._where[held] = self._at
            feedback = f"You put the {held} in/on the {self._at}."
        else:
            name = " ".join(words[1:3])
            if verb == "clean":
                self._clean[name] = True
            else:
                self._temperature[name] = "hot" if verb == "heat" else "cold"
            feedback = f"You {verb} the {name} using the {self._at}."
        return feedback.strip(), self._solved(), False

    def _partial_score(self) -> float:
        held = self._held()
        return 0.5 if held is not None and self._holds(held) else 0.0

    # -- oracle --------------------------------------------------------------------------------------
    def oracle_action(self) -> str:
        """A planner over the world state: fetch, transform, place (opening what is closed)."""
        kind, transform, target = self._goal
        held = self._held()
        if held is not None and held.split()[0] != kind:
            return self._toward(
                self._at
                if self._open.get(self._at)
                and self._at.split()[0] not in ("microwave", "sinkbasin")
                else self._drop_place(),
                f"put {held} in/on {{}}",
            )
        if held is None:
            candidates = sorted(o for o in self._where if o.split()[0] == kind)
            ready = [o for o in candidates if self._in_state(o, transform)]
            name = (ready or candidates)[0]
            return self._toward(self._where[name], f"take {name} from {{}}")
        if not self._in_state(held, transform):
            appliance = next(
                r for r in self._receptacles() if r.split()[0] == _APPLIANCE[transform]
            )
            return self._toward(appliance, f"{transform} {held} with {{}}", need_open=False)
        return self._toward(target, f"put {held} in/on {{}}")

    def _drop_place(self) -> str:
        return next(
            r
            for r in self._receptacles()
            if not _RECEPTACLES[r.split()[0]] and r.split()[0] not in ("sinkbasin",)
        )

    def _toward(self, receptacle: str, command: str, *, need_open: bool = True) -> str:
        if self._at != receptacle:
            return f"go to {receptacle}"
        if need_open and not self._open[receptacle]:
            return f"open {receptacle}"
        return command.format(receptacle)
