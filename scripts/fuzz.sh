#!/usr/bin/env bash
# Runs one libFuzzer target (tests/fuzz/TARGET.cpp) for SECONDS:
#   scripts/fuzz.sh fuzz_safetensors 600 [more libFuzzer flags]
# Builds the `fuzz` preset first (clang, ASan+UBSan+LeakSanitizer; INFERA_FUZZ_NO_BUILD=1 skips
# that, INFERA_FUZZ_BIN_DIR runs binaries copied elsewhere). The committed seeds in
# tests/fuzz/corpus/TARGET are read and never written; new inputs go to build/fuzz/corpus/TARGET, a crashing input to build/fuzz/artifacts/TARGET/, the full log to
# build/fuzz/logs/TARGET.log. Any crash, leak, sanitizer report, timeout (-timeout, 25 s) or
# allocation over 512 MB fails the run. Prints one summary row: target, executions, exec/s,
# coverage (cov: edges, ft: features), corpus size, peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags]; targets:" \
    $(basename -s .cpp tests/fuzz/fuzz_*.cpp) >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
[ -f "tests/fuzz/$target.cpp" ] || { echo "fuzz.sh: no target tests/fuzz/$target.cpp" >&2; exit 2; }
if [ -z "${INFERA_FUZZ_NO_BUILD:-}" ]; then
  scripts/setup.sh fuzz
  scripts/build.sh fuzz
fi

work=build/fuzz/corpus/$target
artifacts=build/fuzz/artifacts/$target
log=build/fuzz/logs/$target.log
dict=build/fuzz/dict/$target.dict
mkdir -p "$work" "$artifacts" "$(dirname "$log")" "$(dirname "$dict")"
cat tests/fuzz/dict/json.dict "tests/fuzz/dict/$target.dict" >"$dict"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"${INFERA_FUZZ_BIN_DIR:-build/fuzz/tests/fuzz}/$target" -max_total_time="$seconds" -timeout=25 \
  -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 -dict="$dict" -artifact_prefix="$artifacts/" \
  "$@" "$work" "tests/fuzz/corpus/$target" >"$log" 2>&1 || status=$?

stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
printf '| %s | %s | %s | %s | %s | %s | %s MB | %s |\n' "$target" "$(stat number_of_executed_units)" \
  "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$(stat peak_rss_mb)" \
  "$([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)")"
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: $target failed; the input is under $artifacts/, the log ends:" >&2
  tail -n 60 "$log" >&2
fi
exit "$status"
