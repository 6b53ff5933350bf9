#!/usr/bin/env bash
# Installs what infera builds against, from Debian's packages. Safe to run again: it only calls
# apt-get when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcli11-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev ccache
)
# `scripts/setup.sh fuzz`: clang and its runtime libraries (libFuzzer, sanitizers) as well.
if [ "${1:-}" = fuzz ]; then packages+=(clang libclang-rt-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
