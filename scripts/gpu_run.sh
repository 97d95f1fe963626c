#!/usr/bin/env bash
# Issue 42's GPU check on a lent machine, in two halves (docs/llm.md, "The GPU path"):
#   bash scripts/gpu_run.sh --fetch   here, with PyPI: the pure-Python packages the GPU image lacks,
#                                     as cp312 wheels in the ignored .whl/ folder (4.1 MB)
#   bash scripts/gpu_run.sh           there (the device tool's `run`, carry [".whl"]): install them
#                                     and verigym (editable: the agents registry reads its entry
#                                     points), then scripts/gpu_check.sh, its log in $OUT
# The versions are those the GPU image's torch/transformers/peft/accelerate ran with on 2026-11-26.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=(gymnasium==1.4.0 farama-notifications==0.0.6 pettingzoo==1.27.0 trl==1.16.0 datasets==5.2.0
  dill==0.4.1 multiprocess==0.70.19 setuptools==80.9.0)
if [ "${1:-}" = --fetch ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --platform manylinux2014_x86_64 --platform any --dest .whl "${wheels[@]}"
  ls .whl
  exit 0
fi
[ -n "${1:-}" ] && { echo "usage: bash scripts/gpu_run.sh [--fetch]" >&2; exit 2; }
out="${OUT:-/tmp/gpu_out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
bash scripts/gpu_check.sh 2>&1 | tee "$out/gpu_check.log"
