# Sourced by run1..run4.sh of .devcarry/lead26 (staged at the end of session 25; a copy in
# bench/reference/lead25_h200/staged/): unpacks the binaries once, sets the environment and the
# logs. Slim builds at f45950d + bench/reference/lead25_h200/staged/gemm_residual_algo.patch
# (session 24's CudaOptions::gemm_residual_algo rebased; off unless
# INFERA_CUDA_GEMM_RESIDUAL_ALGO is set). Session 25 had no device: the TMA GEMMs (glu_gemm,
# qkv_gemm, residual_gemm, and their ping-pong schedule; all off by default) have never run.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -d bin ] || { tar xJf bin.tar.xz; tar xJf shared.tar.xz; }
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json $R/enc
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
ENC="--device cuda --config $REPO/bench/configs/modernbert-large"
# The variants' switches: o all off (the defaults), g the GLU GEMM, q the q/k/v GEMM, r the
# residual GEMM, a all three, p all three on the kernel's ping-pong schedule.
variant_env() {
  case $1 in
    o) echo "INFERA_CUDA_GLU_GEMM=0 INFERA_CUDA_QKV_GEMM=0 INFERA_CUDA_RESIDUAL_GEMM=0";;
    g) echo "INFERA_CUDA_GLU_GEMM=1 INFERA_CUDA_QKV_GEMM=0 INFERA_CUDA_RESIDUAL_GEMM=0";;
    q) echo "INFERA_CUDA_GLU_GEMM=0 INFERA_CUDA_QKV_GEMM=1 INFERA_CUDA_RESIDUAL_GEMM=0";;
    r) echo "INFERA_CUDA_GLU_GEMM=0 INFERA_CUDA_QKV_GEMM=0 INFERA_CUDA_RESIDUAL_GEMM=1";;
    a) echo "INFERA_CUDA_GLU_GEMM=1 INFERA_CUDA_QKV_GEMM=1 INFERA_CUDA_RESIDUAL_GEMM=1";;
    p) echo "INFERA_CUDA_GLU_GEMM=1 INFERA_CUDA_QKV_GEMM=1 INFERA_CUDA_RESIDUAL_GEMM=1 INFERA_CUDA_TMA_GEMM_PINGPONG=1";;
  esac
}
finish() {
  echo "all done t=${SECONDS}s" | tee -a $T
  tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
}
