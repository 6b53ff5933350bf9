#!/usr/bin/env bash
# Creates .venv (git-ignored) with what the benchmark scripts need from PyPI: matplotlib for
# bench/plot_results.py, numpy for tests/bench/make_stats_cases.py. Safe to run again: it only
# installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
if ! .venv/bin/python -c "import matplotlib, numpy" 2>/dev/null; then
  echo "setup_bench_venv: installing matplotlib and numpy into .venv"
  .venv/bin/python -m pip install -q "matplotlib>=3.7" "numpy>=1.24"
fi
