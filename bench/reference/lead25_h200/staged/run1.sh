#!/bin/bash
# run1: are the TMA GEMMs correct? (common.sh says what the builds are.)
#   0. hang check (40 s): CudaTmaGemmTest.RepeatsAndReplays and CudaQkvGemmTest (the shared
#      mainloop and the ping-pong schedule, never run: a wrong barrier parity or register split
#      hangs every launch, as session 24's setmaxnreg did); on a hang every TMA GEMM step is
#      skipped;
#   1. test_cuda_backend less the fixture tests: the GLU and residual GEMMs against double
#      references at each tile width and ping-pong, repeats and replays bit for bit, the q/k/v GEMM against a
#      double reference (scattered slots, GQA, pool sentinels), the Qwen3-0.6B-layer GEMM stack
#      and the three encoder configs with each switch and all against cuBLAS and the CPU; also
#      session 24's TmaQueriesEqualStagedQueriesForEveryGroup and CudaGemmResidualAlgo;
#   2. test_backend_ops: every op on `cuda` and on `cuda_glu_gemm`;
#   3. memcheck of CudaTmaGemmTest.* and CudaQkvGemmTest.*;
#   4. cuda_tma_gemm_probe: the GLU and residual kernels at each tile width and ping-pong against
#      their cuBLAS paths (us, TFLOP/s, largest difference), Qwen3-0.6B and ModernBERT-large
#      shapes.
# run(command="DEADLINE=540 bash .devcarry/lead26/run1.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-540}
source "$(dirname "$0")/common.sh"
step "hang check" 40 $R/hang.log $B/test_cuda_backend --gtest_filter='CudaTmaGemmTest.RepeatsAndReplays*:CudaQkvGemmTest.*'
verdict "hang check: CudaTmaGemmTest.RepeatsAndReplays, CudaQkvGemmTest" $R/hang.log "NMSE"
TMA_OK=1; grep -q "^rc 124" $R/hang.log && { TMA_OK=0; echo "TMA GEMMS HANG: their steps skipped" | tee -a $T $L; }
FILTER='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*'
[ $TMA_OK = 1 ] || FILTER="$FILTER:*TmaGemm*:*QkvGemm*"
step "test_cuda_backend" 150 $R/cuda_tests.log $B/test_cuda_backend --gtest_filter="$FILTER"
verdict "test_cuda_backend (no fixture tests)" $R/cuda_tests.log "NMSE"
HF='*/cuda'; [ $TMA_OK = 1 ] && HF='*/cuda:*/cuda_glu_gemm'
step "test_backend_ops" 130 $R/harness.log $B/test_backend_ops --gtest_filter="$HF"
verdict "test_backend_ops: $HF" $R/harness.log
if [ $TMA_OK = 1 ]; then
  step "memcheck tma gemms" 90 $R/memcheck.log $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaTmaGemmTest.*:CudaQkvGemmTest.*'
  verdict "memcheck CudaTmaGemmTest.*, CudaQkvGemmTest.*" $R/memcheck.log
  step "tma gemm probe" 60 $OUT/tma_probe.txt $B/cuda_tma_gemm_probe
  cat $OUT/tma_probe.txt >> $T
fi
finish
