"""Agent specs: the strings ``verigym eval --agent`` takes.

=================================  ==========================================================
spec                               agent
=================================  ==========================================================
``random``                         uniform random actions (legal ones when there is a mask)
``oracle``                         the env's scripted solver (``oracle_action()``)
``<plugin agent>``                 an agent a package registers under the entry-point group
                                   ``verigym.agents`` (``verigym.agents.make(name, env)``)
``<agent>:<checkpoint dir>``       a saved verigym agent, e.g. ``ppo:runs/ppo-cartpole``, or a folder
                                   of them, one per env (each ``meta.json`` names its env id)
``<agent>:<dir>?deterministic=false``  the saved agent sampling its actions from its policy (see
                                   below); ``deterministic=true`` is the default (greedy)
``llm:<model>``                    a local causal LM (a Hugging Face folder, a ``.gguf`` file or
                                   ``smollm2``), through the text view
``openai:<base url>#<model>``      a model behind an OpenAI-compatible server, text view
``llm:...?k=v&k=v``                LLM options after ``?``: the agent's config fields
                                   (``max_new_tokens``/``max_tokens``, ``temperature``, ``timeout``,
                                   ``adapter=DIR`` a LoRA adapter folder, ...) and
                                   ``families=text,tool,gui`` to play only those families
``<module>:<factory>``             your own: ``factory(env)`` returns an object with ``act``
                                   (imported with the working directory on ``sys.path``)
=================================  ==========================================================

Any spec may carry a display name, the ``name=`` option: ``random?name=Random``,
``llm:smollm2?adapter=DIR&name=SmolLM2-135M-Instruct + SFT (LoRA)``. The standings show it in place
of the spec; the spec (with its name: it is the key ``--resume`` finds episodes by) and the config
hash stay on the row's page and in the standings' agents section. A name is 1 to
:data:`MAX_NAME_LENGTH` characters from :data:`NAME_PATTERN` (letters, digits, space and
``._+-/(),:``), nothing that reaches a shell, Markdown or HTML as markup; the agent never sees it.

A saved agent acts greedily by default (its policy's most likely action, a DQN without
exploration, SAC's mean action). ``?deterministic=false`` makes it play its stochastic policy, the
one it was trained with: Crafter (Hafner 2021) and the field score an agent's sampled episodes,
and a greedy policy can loop on one action. The samples are reproducible: each episode's
``agent.reset(seed=s)`` reseeds the agent's sampling generators with the episode seed ``s``, so the
same spec on the same seeds replays the same episodes. ``deterministic`` is the only option a
checkpoint spec takes (with ``name=``); its value is ``true`` or ``false``.

A saved agent plays only the env it was trained on (its ``meta.json`` ``env_id``); a folder of
saved agents covers the envs of its members. A suite's other tasks are not run for it, and the
standings show its coverage.

The config hash that keys results covers the spec and, for checkpoints, model dirs and LoRA
adapters (``adapter=DIR``, of an ``llm`` spec or of an ``openai`` spec whose server serves that
adapter: the agent checks the server's digest of it), the contents of the directory (so a retrained checkpoint is a new
entry, never mixed with old rows).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import pathlib
import re
import sys
from dataclasses import dataclass
from typing import Any

from verigym.core import FAMILIES as _FAMILIES

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "TEXT_KINDS",
    "CHECKPOINT_OPTIONS",
    "AgentSpec",
    "SampledActions",
    "display_name",
    "parse_agent_spec",
    "split_display_name",
]

MAX_NAME_LENGTH = 64
"""Characters a display name (``name=``) may have."""

NAME_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9 ._+/(),:-]{{0,{MAX_NAME_LENGTH - 1}}}")
"""What a display name may be (matched in full): an allow-list with no ``&``, ``?``, ``=``, ``|``,
quote, backtick, angle bracket, ``#`` or control character."""

TEXT_KINDS = ("llm", "openai")
"""The spec kinds (``llm:...``, ``openai:...``) whose agent plays through the text view."""


@dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec.

    Attributes:
        text: the spec as given.
        kind: ``random``, ``oracle``, ``plugin``, ``checkpoint``, ``llm``, ``openai`` or ``factory``.
        target: the checkpoint/model dir, the ``module:factory``, or ``base_url#model``.
        agent_name: the registered agent name for ``checkpoint`` and ``plugin`` specs.
    """

    text: str
    kind: str
    target: str = ""
    agent_name: str = ""
    options: tuple[tuple[str, Any], ...] = ()
    """``llm``/``openai`` config overrides from the spec's ``?k=v&k=v`` part; ``checkpoint``:
    ``(("deterministic", bool),)`` when the spec sets it (:data:`CHECKPOINT_OPTIONS`)"""
    families: tuple[str, ...] = ()
    """``llm``/``openai``: the env families played (empty: all)"""
    display_name: str = ""
    """the spec's ``name=`` (empty: none); shown in the standings, never given to the agent"""

    @property
    def text_view(self) -> bool:
        """Whether the agent plays through ``LanguageWrapper``."""
        return self.kind in TEXT_KINDS

    def config_hash(self) -> str:
        """SHA-256 (16 hex digits) of the spec and of the checkpoint/model directory's files."""
        digest = hashlib.sha256(f"{self.kind}\0{self.agent_name}\0{self.target}".encode())
        if self.kind == "checkpoint" and self.options:  # greedy and sampled rows stay apart
            digest.update(json.dumps(sorted(self.options)).encode())
        adapter = dict(self.options).get("adapter") if self.kind in TEXT_KINDS else None
        if adapter:
            _hash_folder(digest, pathlib.Path(str(adapter)))
        if self.kind in ("checkpoint", "llm"):
            root = pathlib.Path(self.target)
            if self.kind == "llm" and not root.is_dir():  # a .gguf file or a short name (smollm2)
                from verigym.agents.llm.models import locate_model

                path = locate_model(self.target)
                stat = path.stat()
                digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
                return digest.hexdigest()[:16]
            _hash_folder(digest, root)
        return digest.hexdigest()[:16]

    def checkpoints(self) -> dict[str, pathlib.Path]:
        """For ``checkpoint`` specs: env id -> saved-agent directory (``""`` keys a saved agent
        whose ``meta.json`` names no env: it is tried on every env)."""
        root = pathlib.Path(self.target)
        found = {}
        for meta in [root / "meta.json", *sorted(root.glob("*/meta.json"))]:
            if meta.exists():
                env_id = json.loads(meta.read_text()).get("env_id") or ""
                found.setdefault(env_id, meta.parent)
        return found

    def covers(self, env_id: str) -> bool:
        """Whether this agent can play ``env_id``: always, except saved agents of other envs, agents
        limited to other ``families``, and the ``oracle`` on an env registered without a scripted
        solver (``oracle=False``: it is not played there, and its standings cell says so)."""
        if self.families:
            from verigym.registration import row

            try:
                return row(env_id).family in self.families
            except KeyError:
                return False
        if self.kind == "oracle":
            from verigym.registration import row

            try:
                return row(env_id).oracle
            except (
                KeyError
            ):  # an id registered elsewhere: tried, as the standings assume it has one
                return True
        if self.kind != "checkpoint":
            return True
        found = self.checkpoints()
        return env_id in found or "" in found

    def build(self, env: Any, device: str = "cpu") -> Any:
        """Make the agent for ``env`` (the env as the agent sees it: text view for LLM kinds)."""
        from verigym import agents

        if self.kind in ("random", "oracle"):
            return agents.make(self.kind, env)
        if self.kind == "plugin":
            return agents.make(self.agent_name, env)
        if self.kind == "checkpoint":
            found = self.checkpoints()
            env_id = getattr(getattr(env, "spec", None), "id", None)
            path = found.get(env_id) or found.get("")
            if path is None:
                raise ValueError(f"{self.text}: no saved agent for {env_id} (has {sorted(found)})")
            agent = agents.load(self.agent_name, path, device=device)
            return agent if self.deterministic else SampledActions(agent)
        if self.kind == "llm":
            return agents.make(
                "llm", env, model_path=self.target, device=device, **dict(self.options)
            )
        if self.kind == "openai":
            base_url, _, model = self.target.partition("#")
            return agents.make("openai", env, base_url=base_url, model=model, **dict(self.options))
        return self.factory()(env)

    @property
    def deterministic(self) -> bool:
        """Whether a ``checkpoint`` agent acts greedily (the default) or samples its actions
        (``?deterministic=false``)."""
        return bool(dict(self.options).get("deterministic", True))

    def factory(self) -> Any:
        """For ``factory`` specs: import ``module`` and return its ``factory`` callable.

        Raises:
            ValueError: the module cannot be imported (the import error is in the message), has no
                such attribute, or it is not callable.
        """
        module, _, attr = self.target.partition(":")
        if (
            os.getcwd() not in sys.path
        ):  # like `python -m`: the user's own modules are found from here
            sys.path.insert(0, os.getcwd())
        try:
            loaded = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any error of the user's module is reported, not raised
            raise ValueError(
                f"agent spec {self.text!r}: cannot import {module!r}: {type(exc).__name__}: {exc}"
            ) from exc
        target = getattr(loaded, attr, None)
        if not callable(target):
            found = "has no attribute" if target is None else "has a non-callable"
            raise ValueError(
                f"agent spec {self.text!r}: module {module!r} {found} {attr!r}; expected a factory(env) -> agent"
            )
        return target


class SampledActions:
    """A saved agent that plays its stochastic policy: :meth:`act` asks the agent for a sampled
    action (``deterministic=False``) whatever its caller asks; every other attribute is the
    agent's own.

    Args:
        agent: a verigym agent whose ``reset(seed=s)`` reseeds its sampling (every
            :class:`~verigym.agents.common.learner.LearnerBase` does), so an episode replays.
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def reset(self, *, seed: int | None = None) -> None:
        """Start of an episode: the agent's ``reset(seed=seed)`` (which reseeds its sampling)."""
        self.agent.reset(seed=seed)

    def act(self, obs: Any, info: Any = None, *, deterministic: bool = False) -> Any:
        """The agent's sampled action for ``obs`` (``deterministic`` is ignored)."""
        return self.agent.act(obs, info, deterministic=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)


CHECKPOINT_OPTIONS = {"deterministic": {"true": True, "false": False}}
"""The options a checkpoint spec (``<agent>:<dir>?k=v``) may carry: name -> allowed value text ->
value (besides ``name=``, which :func:`split_display_name` takes off first)."""


def _checkpoint_options(text: str, query: str) -> tuple[tuple[str, Any], ...]:
    """The ``?k=v&k=v`` part of a checkpoint spec as options, each allow-listed.

    Raises:
        ValueError: a part that is not ``key=value``, an unknown key, a key given twice, or a
            value not allowed for its key.
    """
    options: dict[str, Any] = {}
    for part in query.split("&"):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"agent spec {text[:200]!r}: option {part[:80]!r} is not key=value")
        allowed = CHECKPOINT_OPTIONS.get(key)
        if allowed is None:
            raise ValueError(
                f"agent spec {text[:200]!r}: unknown option {key[:80]!r}; a saved agent takes "
                f"{', '.join(f'{k}=' for k in CHECKPOINT_OPTIONS)} and name="
            )
        if key in options:
            raise ValueError(f"agent spec {text[:200]!r}: {key}= appears twice")
        if value not in allowed:
            raise ValueError(
                f"agent spec {text[:200]!r}: {key}={value[:80]!r} must be one of {', '.join(allowed)}"
            )
        options[key] = allowed[value]
    return tuple(options.items())


def _hash_folder(digest: Any, root: pathlib.Path) -> None:
    """Feed every file of ``root`` (name and content; size and mtime for files over 64 MiB) to ``digest``."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        stat = path.stat()
        if stat.st_size <= 64 << 20:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        else:  # large weights: size and modification time stand in for the content
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())


def parse_agent_spec(text: str) -> AgentSpec:
    """Parse an agent spec (see the module docstring).

    Raises:
        ValueError: the spec matches no form, a checkpoint/model directory does not exist, a
            ``module:factory`` cannot be imported, or its ``name=`` is not an allowed display name.
    """
    text = text.strip()
    bare, name = split_display_name(text)
    spec = _parse_bare(bare)
    if name is None:
        return spec
    return dataclasses.replace(spec, text=text, display_name=name)


def split_display_name(text: str) -> tuple[str, str | None]:
    """Split a spec's display name off: ``(the spec without its name= option, the name)``.

    The name is the ``name=`` option of the part after the first ``?`` (one of the ``&``-separated
    options of an ``llm``/``openai``/checkpoint spec; the only option of any other spec).

    Args:
        text: an agent spec.

    Returns:
        ``(text, None)`` when the spec has no ``name=``.

    Raises:
        ValueError: ``name=`` appears twice, or the name is not 1 to :data:`MAX_NAME_LENGTH`
            characters matching :data:`NAME_PATTERN`.
    """
    head, sep, query = text.partition("?")
    if not sep:
        return text, None
    parts = query.split("&")
    names = [p for p in parts if p.startswith("name=")]
    if not names:
        return text, None
    if len(names) > 1:
        raise ValueError(f"agent spec {text[:200]!r}: name= appears {len(names)} times")
    name = names[0][len("name=") :]
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"agent spec {text[:200]!r}: the display name {name[:80]!r} must be 1 to "
            f"{MAX_NAME_LENGTH} characters: letters, digits, space and ._+-/(),: (starting with a "
            "letter or digit)"
        )
    rest = "&".join(p for p in parts if not p.startswith("name="))
    return head + ("?" + rest if rest else ""), name


def display_name(spec: str) -> str | None:
    """The display name of a stored agent spec, or None (no ``name=``, or one that is not
    allowed: a stored spec is untrusted, and then shows as itself).

    Args:
        spec: an agent spec string, e.g. from the results store.
    """
    if not isinstance(spec, str) or len(spec) > 8192:
        return None
    try:
        return split_display_name(spec.strip())[1]
    except ValueError:
        return None


def _parse_bare(text: str) -> AgentSpec:
    """:func:`parse_agent_spec` of a spec without ``name=``."""
    from verigym.agents import AGENTS
    from verigym.agents.base import plugin_agents

    plugins = plugin_agents()
    if text in ("random", "oracle"):
        return AgentSpec(text, text)
    if text in plugins:
        return AgentSpec(text, "plugin", plugins[text], agent_name=text)
    head, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ValueError(
            f"agent spec {text!r} is not one of: random, oracle, <agent>:<checkpoint dir>, llm:<model dir>, "
            f"openai:<base url>#<model>, <module>:<factory>, a plugin agent "
            f"(registered agents: {', '.join(sorted(AGENTS))})"
        )
    if head == "openai":
        rest, options, families = _llm_options(text, rest)
        if "#" not in rest:
            raise ValueError(f"openai spec must be openai:<base url>#<model>, got {text!r}")
        return AgentSpec(text, "openai", rest, options=options, families=families)
    if head == "llm":
        from verigym.agents.llm.models import SHORT_NAMES, is_model_reference

        rest, options, families = _llm_options(text, rest)
        if not is_model_reference(rest):
            raise ValueError(
                f"{text!r}: {rest} is not a model directory, a .gguf file or a short name ({', '.join(sorted(SHORT_NAMES))})"
            )
        return AgentSpec(text, "llm", rest, agent_name=head, options=options, families=families)
    if head in AGENTS:
        rest, sep, query = rest.partition("?")
        options = _checkpoint_options(text, query) if sep else ()
        if not pathlib.Path(rest).is_dir():
            raise ValueError(f"{text!r}: {rest} is not a directory")
        spec = AgentSpec(
            text, "llm" if head == "llm" else "checkpoint", rest, agent_name=head, options=options
        )
        if spec.kind == "checkpoint" and not spec.checkpoints():
            raise ValueError(
                f"{text!r}: {rest} holds no saved agent (no meta.json in it or its subfolders)"
            )
        return spec
    spec = AgentSpec(text, "factory", text)
    spec.factory()  # fail fast, before any episode, when the factory cannot be imported
    return spec


def _llm_options(text: str, rest: str) -> tuple[str, tuple[tuple[str, Any], ...], tuple[str, ...]]:
    """Split ``target?k=v&k=v`` into the target, config overrides (JSON values, else strings) and
    the ``families`` list; the overrides are checked against the agent's config class.

    Raises:
        ValueError: a malformed option, an unknown family, or an option the agent does not have.
    """
    target, sep, query = rest.partition("?")
    if not sep:
        return rest, (), ()
    kind = text.partition(":")[0]
    if kind == "llm":
        from verigym.agents.llm.agent import LLMConfig as config_class
    else:
        from verigym.agents.llm.openai_agent import OpenAIConfig as config_class

    fields = {f.name for f in dataclasses.fields(config_class)}
    options: list[tuple[str, Any]] = []
    families: tuple[str, ...] = ()
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"agent spec {text!r}: option {part!r} is not key=value")
        if key == "families":
            families = tuple(f for f in value.split(",") if f)
            bad = [f for f in families if f not in _FAMILIES]
            if bad or not families:
                raise ValueError(
                    f"agent spec {text!r}: unknown families {bad}; choose from {', '.join(_FAMILIES)}"
                )
            continue
        if key not in fields:  # the OpenAI name of the token budget works for the local agent too
            key = {"max_tokens": "max_new_tokens", "max_new_tokens": "max_tokens"}.get(key, key)
        if key not in fields:
            raise ValueError(
                f"agent spec {text!r}: unknown option {part.partition('=')[0]!r}; options: families, {', '.join(sorted(fields))}"
            )
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        if isinstance(parsed, list):
            parsed = tuple(parsed)
        options.append((key, parsed))
    try:
        config_class.from_dict(dict(options, **({"model_path": target} if kind == "llm" else {})))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"agent spec {text!r}: {exc}") from None
    return target, tuple(options), families
