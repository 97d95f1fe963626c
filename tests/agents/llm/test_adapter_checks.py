"""Adapter folders are untrusted input (issue 43 item 8): each field peft would act on is bounded
by what the folder holds before peft sees the config; each refusal is one line naming the field."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

from verigym.agents.llm.models import adapter_config, check_adapter

RANK = 2
PREFIX = "base_model.model.model.layers.0.self_attn"


def _folder(tmp_path, **fields):
    """An adapter folder holding rank-2 LoRA factors of q_proj and v_proj, and a config with
    ``fields`` over peft's usual ones."""
    folder = tmp_path / "adapter"
    folder.mkdir(exist_ok=True)
    tensors = {}
    for module in ("q_proj", "v_proj"):
        tensors[f"{PREFIX}.{module}.lora_A.weight"] = np.zeros((RANK, 16), np.float32)
        tensors[f"{PREFIX}.{module}.lora_B.weight"] = np.zeros((16, RANK), np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": 16,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
        "init_lora_weights": True,
        "rank_pattern": {},
        "alpha_pattern": {},
        "loftq_config": {},
        "layer_replication": None,
        "bias": "none",
        "use_dora": False,
    }
    config.update(fields)
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def _refusal(tmp_path, **fields) -> str:
    folder = _folder(tmp_path, **fields)
    started = time.monotonic()
    with pytest.raises(ValueError) as caught:
        check_adapter(folder)
    assert time.monotonic() - started < 5  # refused before anything runs, not after a hang
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_well_formed_adapter_config_passes(tmp_path):
    folder = _folder(tmp_path)
    assert check_adapter(folder) == folder.resolve()
    assert adapter_config(folder)["r"] == RANK


@pytest.mark.parametrize("rank", [2_000_000, 50_000_000, RANK + 1, 0, True, 2.0])
def test_a_rank_beyond_what_the_weights_hold_is_refused(tmp_path, rank):
    message = _refusal(tmp_path, r=rank)
    assert "r must be an integer from 1 to 2" in message


def test_a_rank_pattern_entry_beyond_the_weights_is_refused(tmp_path):
    message = _refusal(tmp_path, rank_pattern={"q_proj": 2_000_000})
    assert "rank_pattern['q_proj']" in message and "from 1 to 2" in message
    assert "rank_pattern" in _refusal(tmp_path, rank_pattern={"(\\w|\\w|.)*Z": 2})


@pytest.mark.parametrize("alpha", [float("inf"), 1e300, 0, "16"])
def test_alpha_and_alpha_pattern_are_bounded(tmp_path, alpha):
    assert "lora_alpha" in _refusal(tmp_path, lora_alpha=alpha)
    assert "alpha_pattern['v_proj']" in _refusal(
        tmp_path, lora_alpha=16, alpha_pattern={"v_proj": alpha}
    )


@pytest.mark.parametrize("target", ["(\\w|\\w|.)*Z", ["q_proj", "(\\w|\\w|.)*Z"], "all-linear"])
def test_target_modules_must_be_a_list_of_plain_names(tmp_path, target):
    assert "target_modules must be a list of plain module names" in _refusal(
        tmp_path, target_modules=target
    )


@pytest.mark.parametrize("init", ["pissa_niter_100000000", "pissa", "olora", "loftq", "gaussian"])
def test_init_lora_weights_is_only_true_or_false(tmp_path, init):
    assert "init_lora_weights must be true or false" in _refusal(tmp_path, init_lora_weights=init)


def test_peft_type_must_match_exactly(tmp_path):
    message = _refusal(tmp_path, peft_type="lora")
    assert 'peft_type must be exactly "LORA"' in message and "'lora'" in message


def test_machinery_fields_and_weights_without_lora_factors_are_refused(tmp_path):
    assert "layer_replication" in _refusal(tmp_path, layer_replication=[[0, 1000000]])
    assert "loftq_config" in _refusal(tmp_path, loftq_config={"loftq_bits": 4})
    assert "megatron_config" in _refusal(tmp_path, megatron_config={"a": 1})
    assert "surprise" in _refusal(tmp_path, surprise={"nested": [1]})
    folder = _folder(tmp_path)
    save_file({"w": np.zeros((2, 2), np.float32)}, str(folder / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match="holds no LoRA weights"):
        check_adapter(folder)
    (folder / "adapter_model.safetensors").write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="header"):
        check_adapter(folder)


def test_load_adapter_refuses_before_peft_and_loads_a_checked_one(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    from verigym.agents.llm.policy import TransformersPolicy, load_adapter

    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    folder = _folder(tmp_path, r=2_000_000)
    with pytest.raises(ValueError, match="r must be an integer"):
        load_adapter(policy.model, folder)


def test_serve_model_refuses_a_hostile_adapter_and_a_weak_exposed_token_in_one_line(
    tmp_path, tiny_model_dir, capsys
):
    import argparse

    from verigym.commands import serve_model as serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    folder = _folder(tmp_path, target_modules="(\\w|\\w|.)*Z")
    args = parser.parse_args([str(tiny_model_dir), "--port", "0", "--adapter", str(folder)])
    assert serve.run(args) == 2
    error = capsys.readouterr().err.strip()
    assert "target_modules" in error and len(error.splitlines()) == 1
    args = parser.parse_args([str(tiny_model_dir), "--host", "0.0.0.0", "--token", "s3cret"])
    assert serve.run(args) == 2
    assert "weak token" in capsys.readouterr().err
