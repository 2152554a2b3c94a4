#!/usr/bin/env bash
# Set up (idempotent) and emit the default core's Verilog under build/verilog/.
# Extra arguments go to `python -m rtl.generate` (try --help or --list).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
./setup.sh
exec .venv/bin/python -m rtl.generate "$@"
