#!/usr/bin/env bash
# Retrain the reference agents shipped in leaderboards/checkpoints/ (the trained rows of the main
# job's standings). PPO steps the grid tasks through their batched engine (PPO's default,
# batched_env) with the default encoder (the flat one-hot MLP on grids). DoorKey-5x5 succeeds
# after 20-30k steps; the rest of the 150k (learning rate annealed to 0) shortens the paths: SPL
# 0.995 on training seeds 0-49 and 1.000 on the starter suite's 10 evaluation seeds, as the CNN
# checkpoint it replaces (a few minutes on 2 busy cores; seed 0 of this recipe gave 0.96 at 100k).
set -euo pipefail
cd "$(dirname "$0")/.."
out=leaderboards/checkpoints/ppo/DoorKey-5x5
verigym train ppo --env verigym/DoorKey-5x5-v0 --steps 150000 --out "$out.run" --seed 1 \
  --num-envs 8 --num-steps 128 --batch-size 256 --num-epochs 4 --learning-rate 7e-4 --anneal-lr \
  --ent-coef 0.01
mkdir -p "$out"
cp "$out.run"/{config.json,meta.json,model.safetensors,metrics.jsonl,eval.json} "$out"/
rm -rf "$out.run"

# Crafter (issue 39): PPO on Crafter's 64x64x3 pixels (the Nature CNN encoder) with Crafter's own
# reward (+1 an achievement unlocked, +-0.1 health), in Crafter-Survive-v0 (the crafter suite's env;
# the same pixels and actions as Crafter-v0, episodes end at death or 10000 steps). A CPU-budget
# row, not a tuned one: 49k steps, ~8 CPU-minutes here (Hafner 2021's PPO ran 1M steps).
out=leaderboards/checkpoints/ppo/Crafter-Survive
OMP_NUM_THREADS=1 verigym train ppo --env verigym/Crafter-Survive-v0 --steps 49152 --out "$out.run" \
  --seed 1 --num-envs 8 --num-steps 128 --batch-size 256 --num-epochs 4 --learning-rate 3e-4 \
  --ent-coef 0.01 --encoder cnn --torch-threads 1 --eval-episodes 0
mkdir -p "$out"
cp "$out.run"/{config.json,meta.json,model.safetensors,metrics.jsonl} "$out"/
rm -rf "$out.run"
