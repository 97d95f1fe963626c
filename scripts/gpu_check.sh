#!/usr/bin/env bash
# The GPU path, run for real (issue 31 s4): on a machine with one NVIDIA GPU, in one call, about
# 7 minutes at most, with nothing downloaded (the working tree only). A real checkpoint does not
# travel there (64 MiB), so the model is Qwen2.5-0.5B's shape with random weights, built on the
# machine (benchmarks/llm_random_model.py) once and shared by every stage (VERIGYM_GPU_MODEL).
#   0. the machine: GPU, driver, versions of the packages the stages import;
#   1. the tests marked gpu (tests/agents/llm/test_gpu.py: generation with and without the prefix
#      cache, a GRPO step with LoRA and with full fine-tuning, SFT steps; test_static_rollout.py and
#      test_grpo_static.py: the static-shape engine compiled into CUDA graphs samples what the
#      eager paths sample, alone and in GRPO rollouts);
#   2. generation at batch 32, 64 new tokens (benchmarks/llm_generate.py --static):
#      TransformersPolicy.generate vs model.generate, and the static-shape engine in CUDA graphs
#      (3 warm-up calls: compilation and capture) with its throughput over model.generate's
#      (issue 42's target: >= 3x) and each side's peak GPU memory;
#   3. GRPO step time vs TRL's GRPOTrainer on the same model and batch (benchmarks/llm_grpo.py
#      --rollout-engine static --compile --warmup 3 --share-prompt-min-tokens 4096 --profile: the
#      ratio, issue 42's target <= 0.5x, the rollout/update split, peak GPU memory; then one batch's
#      update timed with each group's ~25-token prompt run once and in one plain pass, which the
#      timed steps use (sharing would save ~700 prompt tokens for a second forward and backward);
#      then one profiled step's top operators), last: it needs the trl extra (trl, datasets and
#      their dill/multiprocess).
# Each stage runs under `timeout` with its own budget (seconds, GPU_CHECK_BUDGET_<STAGE> overrides)
# and a failed or timed-out stage does not stop the later ones; the summary lists every stage's exit
# status and the script exits 1 if any failed. The whole script ends within GPU_CHECK_DEADLINE
# seconds (default 420): a stage's budget is cut to what is left, and a stage with under 10 s left
# is skipped. Hub access is off (HF_HUB_OFFLINE=1).
#
# Usage: bash scripts/gpu_check.sh            (VERIGYM_GPU_MODEL=DIR reuses a built model)
#        GPU_CHECK_CPU_DRY_RUN=1 bash scripts/gpu_check.sh   (the script's own mechanics on a CPU:
#        a tiny model, --device cpu, the gpu tests skip)
#
# On a bare machine whose image lacks verigym's pure-Python dependencies, carry them as wheels in
# .whl/ (gymnasium, farama-notifications, pettingzoo, trl, datasets, dill, multiprocess, setuptools)
# and install them and verigym (editable: the agents registry reads its entry points) first:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site
#   python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
#   set -o pipefail; bash scripts/gpu_check.sh 2>&1 | tee "$OUT/gpu_check.log"
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
PY="${PYTHON:-python3}"
if [ "${GPU_CHECK_CPU_DRY_RUN:-0}" = 1 ]; then
  device=cpu shape=tiny compile=()
else
  device=cuda shape=qwen2.5-0.5b compile=(--compile)
fi
export GPU_CHECK_DEVICE=$device
start_all=$SECONDS
deadline="${GPU_CHECK_DEADLINE:-420}"
summary=()
failed=0

# stage NAME BUDGET_S COMMAND...: run COMMAND under `timeout`, print and record its status and time
stage() {
  local name="$1" budget="$2"
  shift 2
  local var="GPU_CHECK_BUDGET_${name^^}"
  var="${var//-/_}"
  budget="${!var:-$budget}"
  local left=$((deadline - (SECONDS - start_all) - 5))
  if [ "$left" -lt 10 ]; then
    echo "== [$name] SKIPPED: the ${deadline}s deadline is reached"
    summary+=("$(printf '%-12s %-9s' "$name" "SKIPPED")")
    failed=1
    return 0
  fi
  [ "$budget" -le "$left" ] || budget=$left
  echo "== [$name] (budget ${budget}s, t=$((SECONDS - start_all))s) $*"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$budget" "$@" || rc=$?
  local took=$((SECONDS - t0)) note="ok"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    note="TIMED OUT"
  elif [ "$rc" != 0 ]; then
    note="FAILED"
  fi
  [ "$rc" = 0 ] || failed=1
  summary+=("$(printf '%-12s %-9s rc=%-3s %4ss' "$name" "$note" "$rc" "$took")")
  echo "== [$name] $note (rc=$rc, ${took}s)"
  return 0
}

stage machine 60 "$PY" - <<'PY'
import importlib.metadata as md
import os
import platform
import subprocess

import torch

if os.environ["GPU_CHECK_DEVICE"] == "cuda":
    assert torch.cuda.is_available(), "no CUDA device: scripts/gpu_check.sh needs one"
else:
    print("CPU dry run: no GPU checked")
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(f"GPU: {props.name}, {props.total_memory / 2**30:.1f} GiB, {props.multi_processor_count} SMs")
print(f"python {platform.python_version()}; torch {torch.__version__}; CUDA {torch.version.cuda}")
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False, timeout=20)
    print(f"driver {smi.stdout.strip() or smi.stderr.strip()}")
except (OSError, subprocess.TimeoutExpired) as error:
    print(f"driver: nvidia-smi did not answer ({error})")
import shutil

# torch.compile (the static engine's CUDA graphs) needs triton and a C compiler for its launchers
print("C compiler: " + ", ".join(f"{c} {shutil.which(c)}" for c in ("cc", "gcc", "clang")))
names = ["triton", "transformers", "huggingface-hub", "tokenizers", "safetensors", "accelerate", "peft",
         "numpy", "gymnasium", "pettingzoo", "trl", "datasets", "pyarrow", "pandas", "fsspec",
         "dill", "multiprocess", "xxhash", "pytest", "setuptools", "verigym"]
for name in names:
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        version = "MISSING"
    print(f"  {name:16s} {version}")
PY
[ "$failed" = 0 ] || { echo "no usable CUDA device: stopping"; exit 1; }

export VERIGYM_GPU_MODEL="${VERIGYM_GPU_MODEL:-${TMPDIR:-/tmp}/verigym-$shape-random}"
model="$VERIGYM_GPU_MODEL"
if [ ! -f "$model/config.json" ]; then
  stage build 120 "$PY" benchmarks/llm_random_model.py "$model" --shape "$shape"
fi
if [ ! -f "$model/config.json" ]; then
  echo "no model in $model: stopping"
  exit 1
fi

stage tests 120 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/agents/llm/test_gpu.py \
  tests/agents/llm/test_static_rollout.py tests/agents/llm/test_grpo_static.py -rs
stage generate-32 150 "$PY" benchmarks/llm_generate.py --model "$model" --batch 32 \
  --new-tokens 64 --repeats 3 --static --static-warmup 3 --device "$device"
if "$PY" -c "import trl, datasets" 2>/dev/null; then
  stage grpo 200 "$PY" benchmarks/llm_grpo.py --model "$model" --groups 4 --generations 8 \
    --new-tokens 32 --steps 3 --warmup 3 --rollout-engine static ${compile[@]+"${compile[@]}"} \
    --share-prompt-min-tokens 4096 --profile --device "$device"
else
  echo "== [grpo] trl/datasets are not importable: GRPO comparison skipped (pip install -e .[trl])"
  summary+=("grpo         SKIPPED")
fi

echo "== summary (total $((SECONDS - start_all))s)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
