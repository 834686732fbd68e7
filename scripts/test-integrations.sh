#!/usr/bin/env bash
# The tests that run other projects' code (marker `integration`; deselected in the default suite):
#   - verl 0.9.1's reward loader, naive manager and RewardLoopManager on a local Ray (tests/integrations/test_verl_real.py)
#   - OpenRLHF 0.11.2's SingleTurnAgentExecutor with reward_func and with `rewardlang serve` (test_openrlhf_real.py)
#   - `rewardlang score --ray local` against the local run, and on two `ray start` nodes with one killed mid-run
#     (test_ray_score.py); the retry of lost blocks on real actors (test_ray_retry.py)
#   - `pip install .` (the core, no training stack) into a clean venv: check/score/explain every spec (test_lean_venv.py)
# verl and OpenRLHF are installed --no-deps (their GPU-only dependencies - vllm, flash-attn, deepspeed - do not install
# on a CPU machine) plus what their reward paths import, into a venv layered on the current environment, which must
# already hold rewardlang[train,test] (bash scripts/install.sh --test).
#   bash scripts/test-integrations.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${REWARDLANG_INTEGRATION_VENV:-$HOME/.cache/rewardlang/venv-integrations}"
export REWARDLANG_CORE_VENV="${REWARDLANG_CORE_VENV:-$HOME/.cache/rewardlang/venv-core}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# pinned: these are the versions whose code the tests call (docs/scale.md)
"${PIP[@]}" "ray[data]==2.60.0" tensordict==0.10.0 pyvers==0.1.0 hydra-core==1.3.8 omegaconf==2.3.1 \
  codetiming==1.4.0 aiohttp==3.14.5 pylatexenc==2.11
"${PIP[@]}" --no-deps verl==0.9.1 openrlhf==0.11.2
export REWARDLANG_INTEGRATION=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# -m "": these tests are also marked slow, which pyproject's addopts (-m 'not slow') would deselect
exec "$VENV/bin/python" -m pytest -q -m "" tests/integrations "$@"
