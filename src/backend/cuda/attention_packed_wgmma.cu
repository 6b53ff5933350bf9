// The encoders' packed attention (CudaBackend::record_attention_packed, CudaOptions::packed_wgmma)
// on the wgmma prefill kernel (attention_flash_wgmma.cu describes it): keys and values are bf16
// rows [T, hkv, D] of the sequence itself, key tiles aligned to its first row (the windowed
// schedule the op counts), the block's key range in closed form so that its first K/V copies go
// out before anything else; optionally RoPE inside (the encoder stack: no staging launch).
// Why: the mma.sync flash kernel ran ModernBERT-large's attention at ~120 TFLOP/s on the H200
// (session 14's profile: 296 us a layer at 64x512, a fifth of the non-GEMM time).
#include "backend/cuda/attention_flash_wgmma_kernel.cuh"

namespace infera::cuda {
namespace {

using namespace flash_wgmma;  // attention_flash_wgmma_kernel.cuh

// launch_wgmma_kernel<T, D, kSplit (64-vector tiles), kPipe, kQPrefetch, kPacked, kRope>.
template <int D>
void launch_packed(const PackedWgmmaArgs& p, cudaStream_t s) {
  using T = __nv_bfloat16;
  const AttentionArgs& a = p.a;
  const bool small = a.vectors_per_tile == kWgVectors;
  if (p.rope_cos) {
    if constexpr (D == 64) {
      if (small)
        return launch_wgmma_kernel<T, D, true, false, true, true, true>(a, s, p.rope_cos,
                                                                        p.rope_sin);
      return launch_wgmma_kernel<T, D, false, false, true, true, true>(a, s, p.rope_cos,
                                                                       p.rope_sin);
    }
    throw std::runtime_error("packed wgmma attention: RoPE inside at head_dim 64 only");
  }
  if (small) {
    if (a.pipelined) return launch_wgmma_kernel<T, D, true, true, true, true>(a, s);
    return launch_wgmma_kernel<T, D, true, false, true, true>(a, s);
  }
  launch_wgmma_kernel<T, D, false, false, true, true>(a, s);
}

}  // namespace

bool attention_packed_wgmma_supports(int64_t tokens, int64_t hkv, int64_t head_dim, int sm_major,
                                     int sm_minor) {
  // sm_90a machine code only; TileCopy's packed addressing in int32.
  return sm_major == 9 && sm_minor == 0 && (head_dim == 64 || head_dim == 128) && tokens > 0 &&
         hkv > 0 && tokens * hkv * head_dim <= int64_t{0x7fffffff};
}

bool attention_packed_wgmma_rope_supports(int64_t head_dim) { return head_dim == 64; }

void launch_attention_packed_wgmma(const void* args, cudaStream_t s) {
  const auto& p = *static_cast<const PackedWgmmaArgs*>(args);
  const AttentionArgs& a = p.a;
  if (a.type != ElemType::BF16 || a.block_table || (!a.q && !a.q16) || (!a.out && !a.out_bf16) ||
      (p.rope_cos && (!a.q16 || !p.rope_sin || a.pipelined)))
    throw std::runtime_error("packed wgmma attention: unsupported arguments");
  if (a.head_dim == 64) return launch_packed<64>(p, s);
  if (a.head_dim == 128) return launch_packed<128>(p, s);
  throw std::runtime_error("packed wgmma attention: head_dim 64 or 128 only");
}

}  // namespace infera::cuda
