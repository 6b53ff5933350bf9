#!/usr/bin/env bash
# CI's fuzzing step: builds the `fuzz` preset and runs every libFuzzer target in tests/fuzz for a
# short fixed time each (default 30 s), one after the other, then prints the table. Fails if any
# target crashes, leaks, trips a sanitizer or times out. Long campaigns: scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
scripts/setup.sh fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

echo "| target | execs | exec/s | cov | ft | corpus | peak RSS | result |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
failed=()
for src in tests/fuzz/fuzz_*.cpp; do
  target=$(basename "$src" .cpp)
  INFERA_FUZZ_NO_BUILD=1 scripts/fuzz.sh "$target" "$seconds" || failed+=("$target")
done
if ((${#failed[@]})); then
  echo "fuzz_ci: failed: ${failed[*]}" >&2
  exit 1
fi
