#!/usr/bin/env bash
# Set up and run verigym's main job: list the registered environments and check every one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
VERIGYM_EXTRAS="${VERIGYM_EXTRAS:-gui}" bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
verigym list
verigym check --all
