#!/usr/bin/env bash
# Configures and builds one preset (default: release) into build/<preset>.
# Compiles through ccache where it is installed (scripts/setup.sh installs it; INFERA_CCACHE=0
# turns it off), with paths taken relative to the repository so that another clone of it, such as
# CI's, reuses the objects: the same sources and flags give the same objects, so only the build's
# time changes.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_CUDA_COMPILER_LAUNCHER=)
if [ "${INFERA_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
