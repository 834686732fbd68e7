#!/usr/bin/env bash
# The whole suite: the default run (the README's test command, which CI runs) plus the tests marked slow —
# learning runs on tiny models (2 seeds each), sweeps over every robot task, every translated HumanEval row and
# every reference solution, whole training runs. About 35 minutes on 2 cores. Extra arguments go to pytest.
#   bash scripts/test-all.sh
#   bash scripts/test-all.sh tests/trainers      # one directory, slow tests included
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
python3 -m pytest -q -m "slow or not slow" "$@"
