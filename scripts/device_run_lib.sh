# Helpers of the H200 run scripts under bench/reference/*_h200/ (sourced; bash). A run script is
# staged into .devcarry/NAME/ of the checkout and runs there on the device machine, so the
# repository is two folders up: `cd "$(dirname "$0")"; HERE=$PWD; source "$HERE/../../scripts/device_run_lib.sh"`.
# The script sets DEADLINE (seconds it may run) and T (its tests log) before calling these.

# Seconds left before DEADLINE.
left() { echo $((DEADLINE - SECONDS)); }

# step NAME SECONDS LOG CMD...: runs CMD with at most SECONDS (fewer if the deadline is nearer;
# skipped, saying so, once under 5 s are left), appending its output and exit status to LOG.
step() {
  local name=$1 secs=$2 log=$3
  shift 3
  local l
  l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a "$log"; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a "$log"
  timeout "$secs" "$@" >> "$log" 2>&1
  echo "rc $? ($name, t=${SECONDS}s)" | tee -a "$log"
}

# verdict NAME LOG [EXTRA_PATTERN]: the gtest verdict lines, failures and sanitizer summaries of
# LOG (and lines matching EXTRA_PATTERN) appended to $T under "== NAME".
verdict() {
  local extra=${3:+|$3}
  echo "== $1" >> "$T"
  grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|Expected|Which is|^rc |ERROR SUMMARY|RACECHECK SUMMARY$extra" "$2" | tail -70 >> "$T"
}
