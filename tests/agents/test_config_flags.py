"""Command-line flags built from agent config dataclasses (agents.common.config.add_config_arguments)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from verigym.agents.common.config import add_config_arguments


@dataclasses.dataclass(frozen=True)
class _Flags:
    bf16: bool | None = None
    """autocast"""
    lr: float = 1e-3
    """learning rate"""


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, _Flags)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("true", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("yes", True),
        ("none", None),
    ],
)
def test_an_optional_bool_flag_reads_its_word(word: str, value: bool | None) -> None:
    # bool("false") is True: an optional bool flag must not be parsed by bool() itself
    assert _parse("--bf16", word).bf16 is value


def test_an_optional_bool_flag_refuses_other_words() -> None:
    with pytest.raises(SystemExit):
        _parse("--bf16", "maybe")


def test_an_unset_flag_is_absent() -> None:
    assert not hasattr(_parse(), "bf16")
