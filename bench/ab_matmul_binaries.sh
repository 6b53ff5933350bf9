#!/bin/sh
# Alternates two matmul_interleaved binaries (A = $1, B = $2; e.g. a copy of the previous build
# and build/release/bench/matmul_interleaved) for $3 rounds, 1 thread, CPU time; prints each
# round's median ms and GFLOP/s per case and type. Extra arguments go to both (--case, --types).
#   bench/ab_matmul_binaries.sh /tmp/old_matmul_interleaved build/release/bench/matmul_interleaved 3 \
#       --case mlp_up_prefill128 --types q8_0,q4_0
A=$1; B=$2; R=$3; shift 3
for r in $(seq 1 $R); do
  for bin in $A $B; do
    $bin --repeats 9 --threads 1 --cpu-time 1 "$@" 2>&1 | awk -v b=$(basename $bin) '/^[a-z_0-9]+: x/{c=$1} /^  [a-z]/{if ($1!="type") print b, c, $1, $3, $6}'
  done
done
