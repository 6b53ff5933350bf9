#!/usr/bin/env bash
# CI's fuzzing step: builds the `fuzz` preset and runs every libFuzzer target in tests/fuzz for a
# short fixed time each (default 30 s), as many at once as the machine has cores (each target is
# one process: the fuzzing time per target is the same, the wall time shorter), then prints the
# table in target order. Fails if any target crashes, leaks, trips a sanitizer or times out.
# Long campaigns: scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
jobs="${INFERA_FUZZ_JOBS:-$(nproc)}"
scripts/setup.sh fuzz
scripts/build.sh fuzz

rows=$(mktemp -d)
trap 'rm -rf "$rows"' EXIT
targets=()
for src in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
running=0
for target in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true  # each target's status is kept in its own file
    running=$((running - 1))
  fi
  (
    status=0
    INFERA_FUZZ_NO_BUILD=1 scripts/fuzz.sh "$target" "$seconds" >"$rows/$target.row" \
      2>"$rows/$target.err" || status=$?
    echo "$status" >"$rows/$target.status"
  ) &
  running=$((running + 1))
done
wait

echo "| target | execs | exec/s | cov | ft | corpus | peak RSS | result |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
failed=()
for target in "${targets[@]}"; do
  cat "$rows/$target.row"
  if [ "$(cat "$rows/$target.status" 2>/dev/null)" != 0 ]; then
    failed+=("$target")
    cat "$rows/$target.err" >&2
  fi
done
if ((${#failed[@]})); then
  echo "fuzz_ci: failed: ${failed[*]}" >&2
  exit 1
fi
