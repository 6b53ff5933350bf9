// The dequantization loops, written once and compiled twice: in src/quant as the reference
// (baseline ISA, bit-identical to the gguf package, tests/quant) and inside each Highway target of
// the CPU backend, where the compiler vectorizes them for the prefill panels. No include guard:
// it is meant to be included inside a namespace (after quant/block_formats.h and <cstdint>).
// Each function turns k elements (whole blocks) at `in` into floats at `out`.
inline void DequantizeQ8_0(const void* in, int64_t k, float* out) {
  const auto* blocks = static_cast<const quant::BlockQ8_0*>(in);
  for (int64_t b = 0; b < k / quant::kQk0; ++b, out += quant::kQk0) {
    const float d = quant::half_to_float(blocks[b].d);
    for (int i = 0; i < quant::kQk0; ++i) out[i] = static_cast<float>(blocks[b].qs[i]) * d;
  }
}

inline void DequantizeQ4_0(const void* in, int64_t k, float* out) {
  const auto* blocks = static_cast<const quant::BlockQ4_0*>(in);
  for (int64_t b = 0; b < k / quant::kQk0; ++b, out += quant::kQk0) {
    const float d = quant::half_to_float(blocks[b].d);
    for (int i = 0; i < quant::kQk0 / 2; ++i) {
      out[i] = d * static_cast<float>((blocks[b].qs[i] & 0xF) - 8);
      out[i + quant::kQk0 / 2] = d * static_cast<float>((blocks[b].qs[i] >> 4) - 8);
    }
  }
}

inline void DequantizeQ4_K(const void* in, int64_t k, float* out) {
  const auto* blocks = static_cast<const quant::BlockQ4_K*>(in);
  for (int64_t b = 0; b < k / quant::kQkK; ++b) {
    const quant::BlockQ4_K& blk = blocks[b];
    const float d = quant::half_to_float(blk.d), dmin = quant::half_to_float(blk.dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::q4_k_scale_min(j, blk.scales, sc, m);
      const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
      const uint8_t* q = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) *out++ = dj * static_cast<float>((q[l] >> shift) & 0xF) - mj;
    }
  }
}

inline void DequantizeQ6_K(const void* in, int64_t k, float* out) {
  const auto* blocks = static_cast<const quant::BlockQ6_K*>(in);
  for (int64_t b = 0; b < k / quant::kQkK; ++b) {
    const quant::BlockQ6_K& blk = blocks[b];
    const float d = quant::half_to_float(blk.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      // Group by group (16 elements, one scale) so the inner loop has no per-element index
      // arithmetic and vectorizes.
      for (int g = 0; g < 4; ++g) {
        const uint8_t* low_src = ql + 32 * (g & 1);
        const int low_shift = 4 * (g >> 1), high_shift = 2 * g;
        for (int sub = 0; sub < 2; ++sub) {
          const float scale = d * static_cast<float>(blk.scales[8 * half + 2 * g + sub]);
          float* dst = out + 128 * half + 32 * g + 16 * sub;
          for (int l = 16 * sub; l < 16 * sub + 16; ++l) {
            const int low = (low_src[l] >> low_shift) & 0xF;
            const int q = (low | (((qh[l] >> high_shift) & 3) << 4)) - 32;
            dst[l - 16 * sub] = scale * static_cast<float>(q);
          }
        }
      }
    }
    out += quant::kQkK;
  }
}
