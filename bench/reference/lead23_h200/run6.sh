#!/bin/bash
# Session 23, run 6: the defaults as committed (chunked replay on; the TMA prefill attention on
# for prompts of >= 1024 rows, its producer starting from two positions).
#   1. test_cuda_backend less its fixture tests; the op harness's paged attention on every CUDA
#      target; memcheck of the TMA targets;
#   2. step_bench prefill A/B: INFERA_CUDA_FLASH_TMA=0 (t0) / default (t1), 3 rounds; ncu of the
#      1x2048 attention;
#   3. the defaults table (step_bench, encoder_bench).
# run(command="DEADLINE=420 bash .devcarry/lead23c/run6.sh", carry=[".devcarry/lead23c"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-420}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 150 $B/test_cuda_backend --gtest_filter='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*' > $R/cb.log 2>&1
verdict "test_cuda_backend (less the fixture tests)" $R/cb.log "NMSE|whole steps|chunked"
timeout 150 $B/test_backend_ops --gtest_filter='*Paged*/cuda*' > $R/harness.log 2>&1
verdict "harness paged attention, every CUDA target" $R/harness.log "cuda_flash_tma"
timeout 120 $SAN --tool memcheck $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma*' > $R/memcheck.log 2>&1
verdict "memcheck harness cuda_flash_tma*" $R/memcheck.log
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in t0 t1; do
    case $v in t0) E="INFERA_CUDA_FLASH_TMA=0";; t1) E="INFERA_CUDA_FLASH_TMA=1";; esac
    step "prefill $v round $r" 60 $L env $E $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json t0,t1 2>&1 | tee -a $L
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
step "ncu 2048" 40 $L $NCU --kernel-name regex:"attention_(tma|flash)_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_2048.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
python3 - $R/ncu_2048.csv <<'PY' 2>&1 | tee -a $L
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r]
h=None
for r in rows:
    if 'Kernel Name' in r: h=r; continue
    if h and len(r)==len(h) and r[0].isdigit():
        d=dict(zip(h,r)); print(d['Kernel Name'][:60], d.get('gpu__time_duration.sum'), d.get('sm__throughput.avg.pct_of_peak_sustained_elapsed'), d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'))
PY
step "defaults table" 90 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
step "encoder defaults" 60 $L $B/encoder_bench --device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only --out $R/json/enc_defaults.json
grep -E "tok/s|forward .*median" $L | tail -24 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
