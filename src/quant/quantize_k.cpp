// Q4_K and Q6_K: 256-element super-blocks whose sub-block scales are themselves quantized. The
// search for scales follows ggml's reference quantizers (quantize_row_q4_K_ref with its weighted
// min/scale search, quantize_row_q6_K_ref with its rmse scale search) step for step, in the same
// f32 operation order, so a file we write matches llama.cpp's own (no importance matrix).
// This file is compiled for the baseline ISA: no FMA contraction can change a rounding.
#include <cmath>
#include <cstring>

#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Best scale and min for `n` values in [0, nmax] with an offset: x ~ scale * L - min (min >= 0
// returned). Starts from the plain min/max fit, then tries nstep + 1 slightly different inverse
// scales and keeps the weighted least-squares fit with the smallest weighted squared error.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                    uint8_t* L_try, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      L_try[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(L_try[i]) + this_min - x[i];
        error += w[i] * (diff * diff);
      }
      if (error < best_error) {
        std::memcpy(L, L_try, static_cast<size_t>(n));
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Best symmetric scale for `n` values in [-nmax, nmax - 1] (L holds l + nmax), weighting each
// squared error by x^2: the plain max fit, then 18 nearby inverse scales, keeping the one whose
// least-squares scale explains the most (largest sumlx^2 / suml2).
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::max(-nmax, std::min(nmax - 1, nearest_int(v))); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale * x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_block_q4_k(const float* x, BlockQ4_K& y) {
  uint8_t L[kQkK], L_try[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, 15, xs, weights, L + 32 * j, &mins[j], L_try, -1.0f, 0.1f, 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(y.scales, 0, sizeof(y.scales));
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      y.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  y.d = float_to_half(max_scale / 63.0f);
  y.dmin = float_to_half(max_min / 63.0f);
  // Requantize every value against the scales as stored (rounded to 6 bits and f16).
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_k_scale_min(j, y.scales, sc, m);
    const float d = half_to_float(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = half_to_float(y.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
    }
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      y.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
}

void quantize_block_q6_k(const float* x, BlockQ6_K& y) {
  int8_t L[kQkK];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s] = fit_scale_symmetric(16, 32, x + 16 * s, L + 16 * s);
    if (std::fabs(scales[s]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof(y));
    return;
  }
  const float iscale = -128.0f / max_scale;
  y.d = float_to_half(1 / iscale);
  for (int s = 0; s < 16; ++s)
    y.scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
  for (int s = 0; s < 16; ++s) {
    const float d = half_to_float(y.d) * static_cast<float>(y.scales[s]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = nearest_int(x[16 * s + i] / d);
      L[16 * s + i] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
    }
  }
  for (int half = 0; half < 2; ++half) {
    const int8_t* Lh = L + 128 * half;
    uint8_t* ql = y.ql + 64 * half;
    uint8_t* qh = y.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int q0 = Lh[l], q1 = Lh[l + 32], q2 = Lh[l + 64], q3 = Lh[l + 96];
      ql[l] = static_cast<uint8_t>((q0 & 0xF) | ((q2 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      qh[l] =
          static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_row_q4_k(const float* x, int64_t k, void* out) {
  auto* blocks = static_cast<BlockQ4_K*>(out);
  for (int64_t b = 0; b < k / kQkK; ++b) quantize_block_q4_k(x + b * kQkK, blocks[b]);
}

void quantize_row_q6_k(const float* x, int64_t k, void* out) {
  auto* blocks = static_cast<BlockQ6_K*>(out);
  for (int64_t b = 0; b < k / kQkK; ++b) quantize_block_q6_k(x + b * kQkK, blocks[b]);
}

}  // namespace infera::quant
