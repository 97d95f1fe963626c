#!/usr/bin/env bash
# The main job: set up, evaluate the reference agents on the starter leaderboard suite, and print
# and write the standings (terminal table, Markdown, HTML) under ./verigym-results.
# Re-running it resumes: only missing episodes are played.
set -euo pipefail
cd "$(dirname "$0")/.."
VERIGYM_EXTRAS="${VERIGYM_EXTRAS:-gui}" bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
out="${VERIGYM_RESULTS:-verigym-results}"
suite="${VERIGYM_SUITE:-starter}"
# the reference rows: random, the envs' scripted oracles, and the trained agents shipped in
# leaderboards/checkpoints (scripts/train_reference_agents.sh retrains them; each covers its env)
for agent in random oracle ppo:leaderboards/checkpoints/ppo; do
  verigym eval --agent "$agent" --suite "$suite" --out "$out" --resume
done
verigym leaderboard --suite "$suite" --out "$out" --train-logs leaderboards/checkpoints
