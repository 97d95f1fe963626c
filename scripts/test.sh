#!/usr/bin/env bash
# Set up and run the default test suite (excludes tests marked slow). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# the tests start hundreds of Python processes (CLI runs, evaluation workers, fresh-interpreter
# rollouts): let them cache verigym's bytecode (__pycache__/, ignored by git) rather than compile its
# sources again in each; with PYTHONDONTWRITEBYTECODE set, pytest also rewrites every test module's
# asserts again in each xdist worker
unset PYTHONDONTWRITEBYTECODE
rc=0
# -n: pytest-xdist workers (default 2, one per core of the 2-core CI machine; VERIGYM_TEST_WORKERS=0
# runs in this process); worksteal: a worker that runs dry takes queued tests from the other, so a few
# long tests do not leave one core idle. --durations=25: the slowest tests, to keep the default run
# within its 10-minute budget.
python -m pytest -m "not slow" -n "${VERIGYM_TEST_WORKERS:-2}" --dist worksteal --durations=25 "$@" || rc=$?
# pytest exits 5 when it collected no test: that is not a failure of the code
[ "$rc" -eq 5 ] && rc=0
exit "$rc"
