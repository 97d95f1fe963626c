#!/usr/bin/env bash
# The GPU path, run for real (issue 31 s4): on a machine with one NVIDIA GPU, in one call, well under
# 10 minutes, with nothing downloaded (the working tree only). A real checkpoint does not travel
# there (64 MiB), so the model is Qwen2.5-0.5B's shape with random weights, built on the machine
# (benchmarks/llm_random_model.py).
#   1. the tests marked gpu (tests/agents/llm/test_gpu.py): generation with and without the prefix
#      cache, a GRPO step with LoRA and with full fine-tuning, SFT steps;
#   2. generation tokens/s of TransformersPolicy.generate vs model.generate, batch 1 and 32
#      (benchmarks/llm_generate.py prints both and the ratio);
#   3. GRPO step time vs TRL's GRPOTrainer on the same model and batch (benchmarks/llm_grpo.py).
# Usage: bash scripts/gpu_check.sh            (VERIGYM_GPU_MODEL=DIR reuses a built model)
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: scripts/gpu_check.sh needs one"
print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; CUDA {torch.version.cuda}")
PY
model="${VERIGYM_GPU_MODEL:-${TMPDIR:-/tmp}/verigym-qwen2.5-0.5b-random}"
[ -f "$model/config.json" ] || python benchmarks/llm_random_model.py "$model" --shape qwen2.5-0.5b
echo "== tests marked gpu"
python -m pytest -q -p no:cacheprovider -m gpu tests/agents/llm/test_gpu.py -rs
for batch in 1 32; do
  echo "== generation, batch $batch (verigym generate vs model.generate)"
  python benchmarks/llm_generate.py --model "$model" --batch "$batch" --new-tokens 64 --repeats 3
done
echo "== GRPO step (verigym vs TRL GRPOTrainer)"
if python -c "import trl" 2>/dev/null; then
  python benchmarks/llm_grpo.py --model "$model" --groups 4 --generations 8 --new-tokens 32 --steps 3
else
  echo "trl is not installed: GRPO comparison skipped (pip install -e .[trl])"
fi
