#!/usr/bin/env bash
# Retrain the LoRA adapter of the "SmolLM2-135M-Instruct + SFT/GRPO (LoRA)" row (issues 31, 42) and
# ship it in leaderboards/checkpoints/smollm2-sft-grpo/ (leaderboards/checkpoints/smollm2-sft/ with
# VERIGYM_GRPO_STEPS=0): adapter_config.json, adapter_model.safetensors in bfloat16, the logs.
#   1. demonstrations: the oracle's successful episodes on training seeds of the starter suite's
#      LLM tasks, through the text view (scripts/llm_demos.py, the player of verigym export --play);
#   2. SFT with LoRA (verigym train sft), assistant tokens only, in six curriculum stages;
#   3. GRPO with LoRA from the SFT adapter (verigym train grpo --adapter) on the one task SFT leaves
#      under 0.5 success, RG-BasicArithmetic, at its easier levels; VERIGYM_GRPO_STEPS=0 skips it.
# Everything runs on the CPU with one torch thread (on a shared machine spinning OpenMP threads cost
# 7x the CPU time); about 2.5 hours on a quiet 2-core machine. Play the result with the agent spec
#   llm:smollm2?adapter=leaderboards/checkpoints/smollm2-sft-grpo&max_new_tokens=128&families=text,tool,gui
# Shipping only (an adapter already trained in DIR): VERIGYM_SHIP_ONLY=DIR bash scripts/train_llm_agent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work="${VERIGYM_TRAIN_DIR:-runs/smollm2-sft-grpo}"
grpo_steps="${VERIGYM_GRPO_STEPS:-40}"
default_ship=leaderboards/checkpoints/smollm2-sft-grpo
[ "$grpo_steps" -gt 0 ] || default_ship=leaderboards/checkpoints/smollm2-sft
ship="${VERIGYM_ADAPTER_DIR:-$default_ship}"
export OMP_NUM_THREADS=1
# glibc's malloc raises its mmap threshold as PyTorch frees large blocks, which then stay in the
# heap, fragmented. A fixed threshold returns them: on 16 SQL episodes in batches of 8 the peak RSS
# was 7.8 GB with it, 1.8 GB with it and --gradient-checkpointing, 6.2 GB with the latter alone.
# Stages 3-6 below ran without checkpointing (stage 4 peaked at 17.4 GB before this line was
# added, stages 5 and 6 at 11.2 and 11.4 GB after): add --gradient-checkpointing where memory is short.
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-1048576}"
mkdir -p "$work"
if [ -n "${VERIGYM_SHIP_ONLY:-}" ]; then
  final="$VERIGYM_SHIP_ONLY"
else

# 1. demonstrations (scripts/llm_demos.py): the oracle's solved episodes on training seeds of every
#    starter LLM task, minus those whose task is an evaluation task of a shipped suite (by task
#    content, not by seed: the same check as verigym export) and repeated games; in two curriculum
#    stages: stage 1 the easier levels (RG level 0 and 1, Calculator and SQL at difficulty 1) and the
#    one-step tasks, stage 2 every task at the level the suite evaluates (52 episodes: sized for
#    a shared 2-core CPU; more seeds there are the first thing to try on a quiet machine)
python scripts/llm_demos.py "$work/demos-stage1.jsonl" \
  "verigym/RG-BasicArithmetic-v0?level=0:0:30" "verigym/RG-BasicArithmetic-v0?level=1:0:30" \
  "verigym/Calculator-v0?difficulty=1:0:40" "verigym/SQL-v0?difficulty=1:0:20" \
  verigym/GuessNumber-v0:0:150 verigym/ClickButton-v0:0:20 | tee "$work/demos.log"
python scripts/llm_demos.py "$work/demos-stage2.jsonl" \
  verigym/GuessNumber-v0:150:164 verigym/RG-BasicArithmetic-v0:0:6 verigym/Calculator-v0:0:10 \
  verigym/SQL-v0:0:6 verigym/ClickButton-v0:20:26 verigym/Login-v0:0:14 verigym/RepoFix-v0:0:3 \
  verigym/Terminal-v0:0:2 | tee -a "$work/demos.log"
# stages 3 and 4: replies that name the element before acting (`Button "Juniper" is [3].` then
# `click 3`; without it the model answered one constant id on ClickButton), Login's three steps,
# and SQL at the difficulty the suite evaluates, each with a replay of the earlier tasks
python scripts/llm_demos.py --name-the-element "$work/demos-stage3.jsonl" \
  verigym/ClickButton-v0:26:276 verigym/Login-v0:0:40 verigym/GuessNumber-v0:150:164 \
  verigym/RG-BasicArithmetic-v0:0:6 verigym/Calculator-v0:0:10 | tee -a "$work/demos.log"
python scripts/llm_demos.py --name-the-element "$work/demos-stage4.jsonl" \
  verigym/Login-v0:40:160 verigym/SQL-v0:6:206 verigym/ClickButton-v0:26:56 verigym/Login-v0:0:40 \
  verigym/GuessNumber-v0:150:164 verigym/RG-BasicArithmetic-v0:0:6 verigym/Calculator-v0:0:10 \
  | tee -a "$work/demos.log"
# stage 5: new seeds of every task, at half the learning rate (stage 4, mostly SQL and Login, left
# Calculator answering with its expression as SQL answers with its query)
python scripts/llm_demos.py --name-the-element "$work/demos-stage5.jsonl" \
  verigym/ClickButton-v0:276:336 verigym/Calculator-v0:10:50 verigym/GuessNumber-v0:164:400 \
  verigym/RG-BasicArithmetic-v0:6:16 verigym/SQL-v0:206:236 verigym/Login-v0:160:190 \
  | tee -a "$work/demos.log"
# stage 6: RG-BasicArithmetic replies that reason one operation at a time before the answer
# (`<think>9 + 7 = 16</think>`; asked for the bare answer the model wrote 5 to 9 + 7) at every
# level, with a replay of new seeds of the other tasks
python scripts/llm_demos.py --name-the-element --show-work "$work/demos-stage6.jsonl" \
  "verigym/RG-BasicArithmetic-v0?level=0:0:250" "verigym/RG-BasicArithmetic-v0?level=1:0:150" \
  "verigym/RG-BasicArithmetic-v0?level=2:0:100" verigym/RG-BasicArithmetic-v0:16:76 \
  verigym/ClickButton-v0:336:366 verigym/Calculator-v0:50:70 verigym/GuessNumber-v0:400:430 \
  verigym/SQL-v0:236:251 verigym/Login-v0:190:205 | tee -a "$work/demos.log"

# 2. SFT with LoRA (r 16 on every attention and MLP projection), one epoch a stage, each stage
#    continuing the previous one's adapter; batches of 4 episodes, 8 from stage 3 on
#    bfloat16 autocast only where the CPU computes it natively (AVX512-BF16 or AMX, 1.2x there);
#    elsewhere (an AMD EPYC without them) it is emulated: 10-30x slower a step than float32
bf16=false
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null && bf16=true
SECONDS=0
sft() {  # sft DATA OUT [FLAG ...]: later flags override the defaults
  verigym train sft --model smollm2 --data "$1" --out "$2" \
    --epochs 1 --batch-size 4 --learning-rate 1e-3 --warmup-steps 3 --lora-r 16 --log-every 5 \
    --device cpu --torch-threads 1 --bf16 "$bf16" "${@:3}"
}
sft "$work/demos-stage1.jsonl" "$work/sft-stage1" | tee "$work/sft.log"
sft "$work/demos-stage2.jsonl" "$work/sft-stage2" --adapter "$work/sft-stage1" | tee -a "$work/sft.log"
sft "$work/demos-stage3.jsonl" "$work/sft-stage3" --adapter "$work/sft-stage2" --batch-size 8 \
  | tee -a "$work/sft.log"
sft "$work/demos-stage4.jsonl" "$work/sft-stage4" --adapter "$work/sft-stage3" --batch-size 8 \
  | tee -a "$work/sft.log"
sft "$work/demos-stage5.jsonl" "$work/sft-stage5" --adapter "$work/sft-stage4" --batch-size 8 \
  --learning-rate 5e-4 | tee -a "$work/sft.log"
sft "$work/demos-stage6.jsonl" "$work/sft" --adapter "$work/sft-stage5" --batch-size 8 \
  --learning-rate 5e-4 | tee -a "$work/sft.log"
echo "SFT wall time: $((SECONDS / 60)) min" | tee -a "$work/sft.log"
final="$work/sft"

# 3. GRPO with LoRA, continuing the SFT adapter, on RG-BasicArithmetic (the task SFT leaves under
#    0.5) at levels 0-2, where the sampled groups disagree often enough to carry a gradient (at the
#    evaluated level nearly every sample is wrong); training seeds that pose an evaluation task are
#    skipped by the trainer
if [ "$grpo_steps" -gt 0 ]; then
  SECONDS=0
  verigym train grpo --model smollm2 --adapter "$work/sft" \
    --env "verigym/RG-BasicArithmetic-v0?level=0" --env "verigym/RG-BasicArithmetic-v0?level=1" \
    --env "verigym/RG-BasicArithmetic-v0?level=2" \
    --steps "$grpo_steps" --num-generations 8 --groups-per-step 4 --max-new-tokens 128 \
    --max-turns 1 --temperature 0.8 --learning-rate 5e-5 --micro-batch-size 8 --device cpu \
    --torch-threads 1 --out "$work/grpo" | tee "$work/grpo.log"
  echo "GRPO wall time: $((SECONDS / 60)) min" | tee -a "$work/grpo.log"
  final="$work/grpo"
fi
fi

# ship: the adapter in bfloat16 (half the bytes; peft casts it back to the model's dtype on load)
mkdir -p "$ship"
python - "$final" "$ship" <<'PY'
import json, shutil, sys
from pathlib import Path

from safetensors.torch import load_file, save_file

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
tensors = {k: v.bfloat16().contiguous() for k, v in load_file(src / "adapter_model.safetensors").items()}
save_file(tensors, dst / "adapter_model.safetensors", metadata={"format": "pt"})
config = json.loads((src / "adapter_config.json").read_text())
config["base_model_name_or_path"] = "smollm2"  # verigym's short name (the GGUF the smollm2 extra installs)
(dst / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
for name in ("train_log.jsonl", "sft_config.json", "metrics.jsonl", "grpo_config.json", "meta.json"):
    if (src / name).exists():
        shutil.copy(src / name, dst / name)
if src.name == "grpo" and (src.parent / "sft" / "train_log.jsonl").exists():
    shutil.copy(src.parent / "sft" / "train_log.jsonl", dst / "sft_train_log.jsonl")
PY
for log in demos.log sft.log grpo.log; do [ -f "$work/$log" ] && cp "$work/$log" "$ship/$log"; done
echo "shipped $final as $ship"
