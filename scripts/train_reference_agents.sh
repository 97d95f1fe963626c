#!/usr/bin/env bash
# Retrain the reference agents shipped in leaderboards/checkpoints/ (the trained rows of the main
# job's standings). PPO on DoorKey-5x5 takes about 60k steps (a few minutes on 2 idle cores).
set -euo pipefail
cd "$(dirname "$0")/.."
out=leaderboards/checkpoints/ppo/DoorKey-5x5
verigym train ppo --env verigym/DoorKey-5x5-v0 --steps 60000 --out "$out.run" --seed 0 \
  --num-envs 8 --num-steps 128 --batch-size 256 --num-epochs 4 --learning-rate 7e-4 --ent-coef 0.01
mkdir -p "$out"
cp "$out.run"/{config.json,meta.json,model.safetensors,metrics.jsonl,eval.json} "$out"/
rm -rf "$out.run"
