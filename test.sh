#!/usr/bin/env bash
# Set up (idempotent) and run the whole default test suite on every core (pytest-xdist).
# Extra arguments go to pytest, e.g. `./test.sh -m long` for the long sweeps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
./setup.sh
start=$(date +%s)
status=0
.venv/bin/python -m pytest -n auto --durations=15 "$@" || status=$?
echo "test.sh: wall time $(( $(date +%s) - start )) s on $(nproc) cores, exit status $status"
exit $status
