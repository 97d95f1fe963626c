"""TextWorld (Côté et al. 2018) challenges as verigym text envs, generated offline per seed.

Install: ``pip install 'verigym[textworld]'`` (textworld 1.7 and its dependencies; its ``jericho``
dependency exists only as a source package, built with the system C compiler). The ids are
registered only where textworld is installed.

Each reset draws a game seed from ``np_random`` and generates that game with textworld's own
challenge generator (``tw-coin_collector``, ``tw-treasure_hunter``, ``tw-simple``), compiled by its
Inform 7 compiler to a Z-machine file cached under ``$VERIGYM_CACHE/textworld/`` (else
``$XDG_CACHE_HOME/verigym``, else ``~/.cache/verigym``): a new game costs seconds, a cached one
nothing.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import tempfile
from typing import Any, ClassVar

import gymnasium as gym

from verigym.core import ActionParseError, EpisodeGuard, UnicodeText, action_error_info, episode_end
from verigym.kwargs_policy import FloatRange, IntRange, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_choice, check_int, check_number

__all__ = ["CHALLENGES", "TextWorldEnv", "game_path", "import_textworld"]

CHALLENGES = {
    "coin_collector": ("tw-coin_collector", lambda level: {"level": level}),
    "treasure_hunter": ("tw-treasure_hunter", lambda level: {"level": level}),
    "simple": ("tw-simple", lambda level: {"rewards": "dense", "goal": "detailed", "test": False}),
}
"""Challenge name -> (textworld's challenge id, its settings for a level)."""
MAX_COMMAND = 200
"""Longest command read, in characters (a longer reply is malformed)."""
_COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ,.'-]*")
"""What reaches the game: the Z-machine interpreter (dumb frotz) reads a line that starts with a
backslash as a command of its own (save, transcript, quit ...), so only plain words pass."""


def import_textworld() -> Any:
    """``textworld`` with its challenges.

    Raises:
        ImportError: textworld is not installed; the message names the extra.
    """
    try:
        import textworld
        import textworld.challenges
    except ImportError as exc:
        raise ImportError(
            f"the TextWorld envs need textworld ({exc}): pip install 'verigym[textworld]' "
            "(its jericho dependency builds from source with a C compiler)"
        ) from exc
    return textworld


def _cache_root() -> pathlib.Path:
    # the rule of verigym.agents.llm.models.cache_root (envs sit below agents in the layers)
    if os.environ.get("VERIGYM_CACHE"):
        return pathlib.Path(os.environ["VERIGYM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "verigym"


def game_path(challenge: str, level: int, game_seed: int) -> pathlib.Path:
    """The compiled game of ``challenge`` at ``level`` for ``game_seed``, generated on first use.

    Raises:
        ImportError: textworld is not installed.
    """
    textworld = import_textworld()
    name, settings = CHALLENGES[challenge]
    key = hashlib.sha256(
        repr((textworld.__version__, name, sorted(settings(level).items()), game_seed)).encode()
    ).hexdigest()[:24]
    path = _cache_root() / "textworld" / f"{challenge}-{key}.z8"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        options = textworld.GameOptions()
        options.seeds = game_seed
        options.path = str(pathlib.Path(work) / "game.z8")
        options.file_ext = ".z8"
        game = textworld.challenges.CHALLENGES[name][1](settings(level), options)
        built = pathlib.Path(textworld.generator.compile_game(game, options))
        for suffix in (".json", ".z8"):  # the game's description first, the story file last
            os.replace(built.with_suffix(suffix), path.with_suffix(suffix))
    return path


class TextWorldEnv(EpisodeGuard, gym.Env[str, str]):
    """A TextWorld challenge (``verigym/TextWorld-<Challenge>-v0``): text in, text out.

    Observation: ``str``, the game's feedback (the first one is the game's introduction).
    Action: ``str``, one command (``go north``, ``take coin``); the game reads it (a command it
    does not know is answered by the game and spends the turn). An empty reply, one over
    :data:`MAX_COMMAND` characters or one with other characters than letters, digits, spaces and
    ``, . ' -`` (a leading backslash is a command of the interpreter, not the game) is malformed:
    the turn is spent without a command,
    ``invalid_action_reward`` is paid and ``info["action_error"]`` says why.

    Reward: the game's score gained by the step. Episode end: terminated when the game is won or
    lost, truncated after ``max_steps`` turns. ``score`` is the game's score over its maximum;
    ``success`` is a won game. ``oracle_action()`` is the first command of textworld's own
    walkthrough from the current state. Pickling replays the commands on a new game.

    Args:
        challenge: ``"coin_collector"``, ``"treasure_hunter"`` or ``"simple"``.
        level: the challenge's difficulty level (not used by ``simple``).
        max_steps: turns per episode.
        invalid_action_reward: paid for a malformed reply (<= 0).
        render_mode: ``"ansi"`` (the last feedback).

    Raises:
        ImportError: textworld is not installed (``pip install 'verigym[textworld]'``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "family": "world"}
    remote_kwargs = {
        "invalid_action_reward": client(FloatRange(-1.0, 0.0)),
        "level": operator_only(IntRange(1, 30), why="a new game takes seconds to generate"),
        "max_steps": operator_only(IntRange(1, 1000), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        challenge: str = "coin_collector",
        level: int = 5,
        max_steps: int = 100,
        invalid_action_reward: float = -0.1,
        render_mode: str | None = None,
    ):
        self.challenge = check_choice("challenge", challenge, sorted(CHALLENGES))
        self.level = check_int("level", level, 1, 30)
        self.max_steps = check_int("max_steps", max_steps, 1, 1000)
        self.invalid_action_reward = check_number(
            "invalid_action_reward", invalid_action_reward, -1.0, 0.0
        )
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        import_textworld()
        self.observation_space = UnicodeText(1 << 14)
        self.action_space = UnicodeText(8192)
        self.game_seed = 0
        self._commands: list[str | None] = []
        self._game: Any = None
        self._state: Any = None
        self._last = ""

    # -- the game ---------------------------------------------------------------------------------
    def _start(self) -> None:
        """Start the game of ``self.game_seed`` and replay ``self._commands`` on it."""
        textworld = import_textworld()
        if self._game is not None:
            self._game.close()
        infos = textworld.EnvInfos(
            admissible_commands=False, policy_commands=True, max_score=True, won=True, lost=True
        )
        path = game_path(self.challenge, self.level, self.game_seed)
        self._game = textworld.start(str(path), request_infos=infos)
        self._state = self._game.reset()
        self._last = str(self._state.feedback)
        commands, self._commands = self._commands, []
        for command in commands:
            self._play(command)

    def _play(self, command: str | None) -> float:
        """Send ``command`` (``None``: a malformed reply, no command); the score it gained."""
        self._commands.append(command)
        if command is None:
            return 0.0
        before = self._state.score
        self._state, _, _ = self._game.step(command)
        self._last = str(self._state.feedback)
        return float(self._state.score - before)

    def _info(self) -> dict[str, Any]:
        return {"game_score": int(self._state.score), "max_score": int(self._state.max_score)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.game_seed = int(self.np_random.integers(2**31 - 1))
        self._commands = []
        self._start()
        info = self._info()
        info["instructions"] = self.instructions()
        return self._last, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        try:
            command, error = self._command(action), None
        except ActionParseError as exc:
            command, error = None, str(exc)
        reward = self._play(command)
        info = self._info()
        if error is not None:
            reward += self.invalid_action_reward
            action_error_info(error, info)
            self._last = f"Invalid reply: {error}"
        won, lost = bool(self._state.won), bool(self._state.lost)
        terminated = won or lost
        truncated = not terminated and len(self._commands) >= self.max_steps
        if terminated or truncated:
            score = self._state.score / self._state.max_score if self._state.max_score else 0.0
            episode_end(info, success=won, score=score)
        return self._last, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        game, self._game, self._state = self._game, None, None
        if game is not None:
            game.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_game"] = state["_state"] = None
        state["_started"] = self._state is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        started = state.pop("_started", False)
        self.__dict__.update(state)
        if started:
            self._start()

    def task_fingerprint(self) -> dict[str, Any]:
        """The game's seed and settings: the game follows from them (the task hash's target)."""
        return {"challenge": self.challenge, "level": self.level, "game_seed": self.game_seed}

    # -- text view and oracle ---------------------------------------------------------------------
    @staticmethod
    def _command(text: Any) -> str:
        from verigym.verifiers import strip_think

        if not isinstance(text, str):
            raise TypeError(f"TextWorld replies are str, got {type(text).__name__}")
        if len(text) > 4 * MAX_COMMAND:
            raise ActionParseError(f"your reply has {len(text)} characters; write one command")
        command = " ".join(strip_think(text).split())
        if not command:
            raise ActionParseError("empty reply; write one command, e.g. 'go north'")
        if len(command) > MAX_COMMAND:
            raise ActionParseError(f"a command has at most {MAX_COMMAND} characters")
        if not _COMMAND.fullmatch(command):
            raise ActionParseError(
                "a command is letters, digits, spaces and , . ' - only (e.g. 'take coin')"
            )
        return command

    def instructions(self) -> str:
        return (
            f"You play a TextWorld game ({self.challenge.replace('_', ' ')}). Reply with one "
            "command per turn, e.g. 'go north', 'open door', 'take coin', 'look', 'inventory'. "
            f"The episode ends when you win or lose the game, or after {self.max_steps} turns. "
            "Score: the game's points over its maximum."
        )

    def observation_text(self, observation: Any) -> str:
        return str(observation)

    def parse_action(self, text: str) -> str:
        """The reply itself when it is one readable command.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: the reply is empty or too long.
        """
        self._command(text)
        return text

    def action_text(self, action: Any) -> str:
        return str(action)

    def oracle_action(self) -> str:
        """The first command of textworld's walkthrough from the current state."""
        commands = list(getattr(self._state, "policy_commands", None) or [])
        return commands[0] if commands else "look"
