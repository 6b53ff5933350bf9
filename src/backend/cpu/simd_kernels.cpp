// Highway compiles this file once per x86 target (foreach_target.h re-includes it); the
// HWY_EXPORT tables at the bottom pick the best compiled target at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/simd_kernels.cpp"
#include "backend/cpu/simd_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

// After highway.h, which it builds on.
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>

#include "core/dtype_convert.h"

HWY_BEFORE_NAMESPACE();
namespace infera::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE VF LoadWeight(DF d, const float* p) { return hn::LoadU(d, p); }
HWY_INLINE VF LoadWeight(DF d, const hwy::bfloat16_t* p) {
  // bf16 is the top half of an f32: widen the bits and shift them into place.
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  const auto raw = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, raw)));
}
HWY_INLINE VF LoadWeight(DF d, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(d, hn::LoadU(df16, p));
}

HWY_INLINE float WeightScalar(const float* p) { return *p; }
HWY_INLINE float WeightScalar(const hwy::bfloat16_t* p) {
  return infera::bf16_to_f32(*reinterpret_cast<const uint16_t*>(p));
}
HWY_INLINE float WeightScalar(const hwy::float16_t* p) {
  return infera::f16_to_f32(*reinterpret_cast<const uint16_t*>(p));
}

// A register tile: NX rows of x against NW rows of w, full dot products over k. The scalar tails
// use explicit fma: left to the compiler, `s += x * w` was contracted in some inlined copies and
// not others, so AVX2 rows differed by batch. (Several FMA chains per dot product were tried for
// decode: chains over interleaved vectors cost prefill ~25% per CPU second, chains over contiguous
// quarters halved decode; one chain stays.)
// AVX-512 has 32 vector registers (room for 4x4 accumulators); AVX2 has 16 (2x4).
#if HWY_TARGET <= HWY_AVX3
constexpr int kTileX = 4;
#else
constexpr int kTileX = 2;
#endif
constexpr int kTileW = 4;

template <int NX, int NW, typename WT>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, int64_t k, const WT* HWY_RESTRICT w,
                     float* HWY_RESTRICT out, int64_t ldo) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF acc[NX][NW];
  for (int a = 0; a < NX; ++a)
    for (int b = 0; b < NW; ++b) acc[a][b] = hn::Zero(d);
  int64_t p = 0;
  for (; p + lanes <= k; p += lanes) {
    VF wv[NW];
    for (int b = 0; b < NW; ++b) wv[b] = LoadWeight(d, w + b * k + p);
    for (int a = 0; a < NX; ++a) {
      const VF xv = hn::LoadU(d, x + a * k + p);
      for (int b = 0; b < NW; ++b) acc[a][b] = hn::MulAdd(xv, wv[b], acc[a][b]);
    }
  }
  for (int a = 0; a < NX; ++a) {
    for (int b = 0; b < NW; ++b) {
      float s = hn::GetLane(hn::SumOfLanes(d, acc[a][b]));
      for (int64_t q = p; q < k; ++q) s = std::fma(x[a * k + q], WeightScalar(w + b * k + q), s);
      out[a * ldo + b] = s;
    }
  }
}

// NX rows of x against one weight row. Streaming one weight row at a time keeps the hardware
// prefetcher on a single sequential stream, which measured ~30% more bandwidth than interleaving
// 4 rows when few x rows share each weight load (decode). One accumulator per x row, summed in the
// same order as Tile(): every output element is then bit-identical whichever path computed it, so
// a sequence's logits do not depend on what else shares its batch (batch invariance).
template <int NX, typename WT>
HWY_INLINE void RowStream(const float* HWY_RESTRICT x, int64_t k, const WT* HWY_RESTRICT w,
                          float* HWY_RESTRICT out, int64_t ldo) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF acc[NX];
  for (int a = 0; a < NX; ++a) acc[a] = hn::Zero(d);
  int64_t p = 0;
  for (; p + 2 * lanes <= k; p += 2 * lanes) {
    const VF w0 = LoadWeight(d, w + p), w1 = LoadWeight(d, w + p + lanes);
    for (int a = 0; a < NX; ++a) {
      acc[a] = hn::MulAdd(hn::LoadU(d, x + a * k + p), w0, acc[a]);
      acc[a] = hn::MulAdd(hn::LoadU(d, x + a * k + p + lanes), w1, acc[a]);
    }
  }
  for (; p + lanes <= k; p += lanes) {
    const VF w0 = LoadWeight(d, w + p);
    for (int a = 0; a < NX; ++a) acc[a] = hn::MulAdd(hn::LoadU(d, x + a * k + p), w0, acc[a]);
  }
  for (int a = 0; a < NX; ++a) {
    float s = hn::GetLane(hn::SumOfLanes(d, acc[a]));
    for (int64_t q = p; q < k; ++q) s = std::fma(x[a * k + q], WeightScalar(w + q), s);
    out[a * ldo] = s;
  }
}

// All x rows against weight rows [0, rows) of `w` (already offset), in register tiles.
template <typename WT>
HWY_INLINE void Block(const float* x, int64_t n, int64_t k, const WT* w, int64_t rows, float* out,
                      int64_t ldo) {
  static_assert(kTileX <= 4, "the decode branch below covers 1 to 3 rows");
  if (n < kTileX) {  // decode: 1 (or a few) rows of x, every row against each weight row loaded
    // once (a decode step's query heads of one kv head against a key: GQA shares the keys)
    for (int64_t j = 0; j < rows; ++j) {
      if (n == 1) {
        RowStream<1>(x, k, w + j * k, out + j, ldo);
      } else if (n == 2) {
        RowStream<2>(x, k, w + j * k, out + j, ldo);
      } else {
        RowStream<3>(x, k, w + j * k, out + j, ldo);  // n < kTileX <= 4
      }
    }
    return;
  }
  int64_t i = 0;
  for (; i + kTileX <= n; i += kTileX) {
    int64_t j = 0;
    for (; j + kTileW <= rows; j += kTileW)
      Tile<kTileX, kTileW>(x + i * k, k, w + j * k, out + i * ldo + j, ldo);
    for (; j < rows; ++j) Tile<kTileX, 1>(x + i * k, k, w + j * k, out + i * ldo + j, ldo);
  }
  for (; i < n; ++i) {
    int64_t j = 0;
    for (; j + kTileW <= rows; j += kTileW)
      Tile<1, kTileW>(x + i * k, k, w + j * k, out + i * ldo + j, ldo);
    for (; j < rows; ++j) Tile<1, 1>(x + i * k, k, w + j * k, out + i * ldo + j, ldo);
  }
}

template <typename WT>
void WidenRowT(const WT* src, int64_t n, float* dst) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t p = 0;
  for (; p + lanes <= n; p += lanes) hn::StoreU(LoadWeight(d, src + p), d, dst + p);
  for (; p < n; ++p) dst[p] = WeightScalar(src + p);
}

template <typename WT>
void MatmulRowsT(const float* x, int64_t n, int64_t k, const WT* w, int64_t j_begin, int64_t j_end,
                 float* out, int64_t ldo, float* panel) {
  // With several x rows, widen each panel of weight rows to f32 once and reuse it for all rows;
  // with one or two (decode), stream the weights and widen in registers.
  const bool widen_panels = n > kTileX && !std::is_same_v<WT, float>;
  for (int64_t j = j_begin; j < j_end; j += kPanelRows) {
    const int64_t rows = std::min<int64_t>(kPanelRows, j_end - j);
    if (widen_panels) {
      WidenRowT(w + j * k, rows * k, panel);
      Block(x, n, k, panel, rows, out + j, ldo);
    } else {
      Block(x, n, k, w + j * k, rows, out + j, ldo);
    }
  }
}

// Two independent products of n (< kTileX) x rows against `rows` weight rows each, row j of the
// first then row j of the second: two sequential weight streams in flight instead of one (one
// core's misses in flight on one stream bound a decode step's key pass). Each output is
// RowStream's, as Block computes it, bit for bit.
template <int NX, typename WT>
void MatmulRowsPairT(const float* xa, const float* xb, int64_t k, const WT* wa, const WT* wb,
                     int64_t rows, float* outa, float* outb, int64_t ldo) {
  for (int64_t j = 0; j < rows; ++j) {
    RowStream<NX>(xa, k, wa + j * k, outa + j, ldo);
    RowStream<NX>(xb, k, wb + j * k, outb + j, ldo);
  }
}

template <typename WT>
void MatmulRowsPairN(const float* xa, const float* xb, int64_t n, int64_t k, const void* wa,
                     const void* wb, int64_t rows, float* outa, float* outb, int64_t ldo) {
  const auto* a = static_cast<const WT*>(wa);
  const auto* b = static_cast<const WT*>(wb);
  if (n == 1) return MatmulRowsPairT<1>(xa, xb, k, a, b, rows, outa, outb, ldo);
  if (n == 2) return MatmulRowsPairT<2>(xa, xb, k, a, b, rows, outa, outb, ldo);
  return MatmulRowsPairT<3>(xa, xb, k, a, b, rows, outa, outb, ldo);  // n < kTileX <= 4
}

void MatmulRows(const float* x, int64_t n, int64_t k, const void* w, DType wtype, int64_t j_begin,
                int64_t j_end, float* out, int64_t ldo, float* panel);

void MatmulRowsPair(const float* xa, const float* xb, int64_t n, int64_t k, const void* wa,
                    const void* wb, DType wtype, int64_t rows, float* outa, float* outb,
                    int64_t ldo, float* panel) {
  if (n >= kTileX || n < 1) {  // not a decode row block: one product after the other
    MatmulRows(xa, n, k, wa, wtype, 0, rows, outa, ldo, panel);
    MatmulRows(xb, n, k, wb, wtype, 0, rows, outb, ldo, panel);
    return;
  }
  switch (wtype) {
    case DType::F32:
      return MatmulRowsPairN<float>(xa, xb, n, k, wa, wb, rows, outa, outb, ldo);
    case DType::BF16:
      return MatmulRowsPairN<hwy::bfloat16_t>(xa, xb, n, k, wa, wb, rows, outa, outb, ldo);
    case DType::F16:
      return MatmulRowsPairN<hwy::float16_t>(xa, xb, n, k, wa, wb, rows, outa, outb, ldo);
    default:
      return;
  }
}

void MatmulRows(const float* x, int64_t n, int64_t k, const void* w, DType wtype, int64_t j_begin,
                int64_t j_end, float* out, int64_t ldo, float* panel) {
  switch (wtype) {
    case DType::F32:
      return MatmulRowsT(x, n, k, static_cast<const float*>(w), j_begin, j_end, out, ldo, panel);
    case DType::BF16:
      return MatmulRowsT(x, n, k, static_cast<const hwy::bfloat16_t*>(w), j_begin, j_end, out, ldo,
                         panel);
    case DType::F16:
      return MatmulRowsT(x, n, k, static_cast<const hwy::float16_t*>(w), j_begin, j_end, out, ldo,
                         panel);
    default:
      return;  // the backend checks supports_weight() before calling
  }
}

void WidenRow(const void* src, DType wtype, int64_t n, float* dst) {
  switch (wtype) {
    case DType::F32:
      return WidenRowT(static_cast<const float*>(src), n, dst);
    case DType::BF16:
      return WidenRowT(static_cast<const hwy::bfloat16_t*>(src), n, dst);
    case DType::F16:
      return WidenRowT(static_cast<const hwy::float16_t*>(src), n, dst);
    default:
      return;
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  int64_t p = 0;
  for (; p + 2 * lanes <= n; p += 2 * lanes) {
    acc0 = hn::MulAdd(hn::LoadU(d, a + p), hn::LoadU(d, b + p), acc0);
    acc1 = hn::MulAdd(hn::LoadU(d, a + p + lanes), hn::LoadU(d, b + p + lanes), acc1);
  }
  for (; p + lanes <= n; p += lanes)
    acc0 = hn::MulAdd(hn::LoadU(d, a + p), hn::LoadU(d, b + p), acc0);
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
  for (; p < n; ++p) s += a[p] * b[p];
  return s;
}

float SoftmaxNumerators(float* s, int64_t n, float scale) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, s[i]);
  const VF vscale = hn::Set(d, scale), vshift = hn::Set(d, max_value * scale);
  VF vsum = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF e = hn::Exp(d, hn::MulSub(hn::LoadU(d, s + i), vscale, vshift));
    hn::StoreU(e, d, s + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] * scale - max_value * scale));
  return sum;
}

// o[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u (o may be g). -g is clamped to 100, inside
// hn::Exp's valid range (e^100 is already inf in f32, so g / inf = -0 as the scalar formula gives).
// The tail goes through the same vector code (padded), so an element's value never depends on
// where a caller's range starts or ends (the fused decode matmul and the op split differently).
HWY_INLINE VF SiluMulVector(DF d, VF g, VF u) {
  const VF e = hn::Exp(d, hn::Min(hn::Neg(g), hn::Set(d, 100.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(d, 1.0f), e)), u);
}

void SiluMul(const float* g, const float* u, float* o, int64_t n) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(SiluMulVector(d, hn::LoadU(d, g + i), hn::LoadU(d, u + i)), d, o + i);
  if (i < n) {
    HWY_ALIGN float gt[hn::MaxLanes(DF())] = {}, ut[hn::MaxLanes(DF())] = {};
    std::copy_n(g + i, n - i, gt);
    std::copy_n(u + i, n - i, ut);
    hn::Store(SiluMulVector(d, hn::Load(d, gt), hn::Load(d, ut)), d, gt);
    std::copy_n(gt, n - i, o + i);
  }
}

// Accumulators stay in registers across all rows t; d is covered in chunks of kChunk vectors.
#if HWY_TARGET <= HWY_AVX3
constexpr int kChunk = 8;
#else
constexpr int kChunk = 4;
#endif

// U vectors of out, [c, c + U * lanes), accumulated over all rows t in registers.
template <int U, typename VT>
HWY_INLINE void WeightedChunk(const float* p, int64_t count, const VT* v, int64_t dim, int64_t c,
                              float* out, bool accumulate) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF acc[U];
  for (int u = 0; u < U; ++u) acc[u] = accumulate ? hn::LoadU(d, out + c + u * lanes) : hn::Zero(d);
  for (int64_t t = 0; t < count; ++t) {
    const VF pt = hn::Set(d, p[t]);
    const VT* row = v + t * dim + c;
    for (int u = 0; u < U; ++u) acc[u] = hn::MulAdd(pt, LoadWeight(d, row + u * lanes), acc[u]);
  }
  for (int u = 0; u < U; ++u) hn::StoreU(acc[u], d, out + c + u * lanes);
}

// out (+)= sum_t p[t] * v[t]: with `accumulate` the running sums start from out, so a sum split
// over several stretches of rows (cache blocks) adds in exactly the order of one long stretch.
// Every output element adds its rows in order t = 0..count-1 whichever chunk computes it; the
// chunks only decide how many independent accumulators run at once (d = 64 on AVX-512 is 4
// vectors: one chunk of 4, not 4 serial passes).
template <typename VT>
void WeightedRowSumT(const float* p, int64_t count, const VT* v, int64_t dim, float* out,
                     bool accumulate) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + kChunk * lanes <= dim; c += kChunk * lanes)
    WeightedChunk<kChunk>(p, count, v, dim, c, out, accumulate);
  for (; c + 4 * lanes <= dim; c += 4 * lanes)
    WeightedChunk<4>(p, count, v, dim, c, out, accumulate);
  for (; c + 2 * lanes <= dim; c += 2 * lanes)
    WeightedChunk<2>(p, count, v, dim, c, out, accumulate);
  for (; c + lanes <= dim; c += lanes) WeightedChunk<1>(p, count, v, dim, c, out, accumulate);
  for (; c < dim; ++c) {
    float acc = accumulate ? out[c] : 0.0f;
    for (int64_t t = 0; t < count; ++t) acc += p[t] * WeightScalar(v + t * dim + c);
    out[c] = acc;
  }
}

// R rows' sums over the same value rows at once: out_r (+)= sum_t p_r[t] * v[t]. Each value vector
// loaded feeds R multiply-adds (the one-row kernel loads one per multiply-add, so it waits on the
// cache), and every output element still adds its terms in order t = 0..count-1, as the one-row
// kernel does: the results are bit-identical to R calls of it.
template <int R, int U, typename VT>
HWY_INLINE void WeightedRowsChunk(const float* const* p, int64_t count, const VT* v, int64_t dim,
                                  int64_t c, float* const* out, bool accumulate) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF acc[R][U];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u)
      acc[r][u] = accumulate ? hn::LoadU(d, out[r] + c + u * lanes) : hn::Zero(d);
  for (int64_t t = 0; t < count; ++t) {
    const VT* row = v + t * dim + c;
    VF vv[U];
    for (int u = 0; u < U; ++u) vv[u] = LoadWeight(d, row + u * lanes);
    for (int r = 0; r < R; ++r) {
      const VF pt = hn::Set(d, p[r][t]);
      for (int u = 0; u < U; ++u) acc[r][u] = hn::MulAdd(pt, vv[u], acc[r][u]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) hn::StoreU(acc[r][u], d, out[r] + c + u * lanes);
}

// Vectors of each row's accumulators per pass for R rows at once: R x U accumulators and U value
// vectors in registers (AVX-512's 32: 2 x 8 + 8, 3 or 4 x 4 + 4; AVX2's 16: 2 x 4 + 4, 3 or 4 x 2
// + 2). Two rows are a decode step's query heads of one kv head (GQA 2: Qwen3-0.6B), which read
// every value row once instead of once each.
template <int R>
constexpr int WeightedRowsChunkVectors() {
#if HWY_TARGET <= HWY_AVX3
  return R == 2 ? 8 : 4;
#else
  return R == 2 ? 4 : 2;
#endif
}

template <int R, typename VT>
void WeightedRowsSumR(const float* const* p, int64_t count, const VT* v, int64_t dim,
                      float* const* out, bool accumulate) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr int U = WeightedRowsChunkVectors<R>();
  int64_t c = 0;
  for (; c + U * lanes <= dim; c += U * lanes)
    WeightedRowsChunk<R, U>(p, count, v, dim, c, out, accumulate);
  for (; c + lanes <= dim; c += lanes) WeightedRowsChunk<R, 1>(p, count, v, dim, c, out, accumulate);
  for (; c < dim; ++c)
    for (int r = 0; r < R; ++r) {
      float acc = accumulate ? out[r][c] : 0.0f;
      for (int64_t t = 0; t < count; ++t) acc += p[r][t] * WeightScalar(v + t * dim + c);
      out[r][c] = acc;
    }
}

// 2 to kWeightedRows rows together, one row alone by the one-row kernel.
template <typename VT>
void WeightedRowsSumT(const float* const* p, int rows, int64_t count, const VT* v, int64_t dim,
                      float* const* out, bool accumulate) {
  switch (rows) {
    case 2:
      return WeightedRowsSumR<2>(p, count, v, dim, out, accumulate);
    case 3:
      return WeightedRowsSumR<3>(p, count, v, dim, out, accumulate);
    case kWeightedRows:
      return WeightedRowsSumR<kWeightedRows>(p, count, v, dim, out, accumulate);
    default:
      for (int r = 0; r < rows; ++r) WeightedRowSumT(p[r], count, v, dim, out[r], accumulate);
  }
}

void WeightedRowsSum(const float* const* p, int rows, int64_t count, const void* v, DType vtype,
                     int64_t dim, float* const* out, bool accumulate) {
  switch (vtype) {
    case DType::F32:
      return WeightedRowsSumT(p, rows, count, static_cast<const float*>(v), dim, out, accumulate);
    case DType::BF16:
      return WeightedRowsSumT(p, rows, count, static_cast<const hwy::bfloat16_t*>(v), dim, out,
                              accumulate);
    case DType::F16:
      return WeightedRowsSumT(p, rows, count, static_cast<const hwy::float16_t*>(v), dim, out,
                              accumulate);
    default:
      return;
  }
}

// R query rows against the kScoreTileKeys keys of kt: R x NV accumulators stay in registers
// (AVX-512: 8 rows x 2 vectors, AVX2: 2 x 4, SSE4: 1 x 8).
constexpr int64_t kScoreLanes = static_cast<int64_t>(HWY_LANES(float));
constexpr int kScoreVectors = static_cast<int>(kScoreTileKeys / kScoreLanes);
constexpr int kScoreRows = kScoreVectors <= 2 ? 8 : (kScoreVectors <= 4 ? 2 : 1);

template <int R>
HWY_INLINE void ScoreRows(const float* HWY_RESTRICT q, int64_t d, const float* HWY_RESTRICT kt,
                          int64_t cols, float* HWY_RESTRICT out, int64_t ldo) {
  const DF df;
  VF acc[R][kScoreVectors];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kScoreVectors; ++v) acc[r][v] = hn::Zero(df);
  for (int64_t e = 0; e < d; ++e) {
    VF k[kScoreVectors];
    for (int v = 0; v < kScoreVectors; ++v)
      k[v] = hn::LoadU(df, kt + e * kScoreTileKeys + v * kScoreLanes);
    for (int r = 0; r < R; ++r) {
      const VF qe = hn::Set(df, q[r * d + e]);
      for (int v = 0; v < kScoreVectors; ++v) acc[r][v] = hn::MulAdd(qe, k[v], acc[r][v]);
    }
  }
  HWY_ALIGN float row[kScoreTileKeys];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kScoreVectors; ++v) hn::Store(acc[r][v], df, row + v * kScoreLanes);
    std::copy_n(row, cols, out + r * ldo);
  }
}

void ScoresTile(const float* q, int64_t rows, int64_t d, const float* kt, int64_t cols, float* out,
                int64_t ldo) {
  int64_t r = 0;
  for (; r + kScoreRows <= rows; r += kScoreRows)
    ScoreRows<kScoreRows>(q + r * d, d, kt, cols, out + r * ldo, ldo);
  for (; r < rows; ++r) ScoreRows<1>(q + r * d, d, kt, cols, out + r * ldo, ldo);
}

// f32_to_bf16 (core/dtype_convert.h) on vectors: round to nearest even, NaN kept quiet, the same
// bits. (Highway 1.0.3's DemoteTo to bf16 truncates.)
void RoundToBf16(const float* HWY_RESTRICT src, int64_t n, uint16_t* HWY_RESTRICT dst) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(di));
  const auto magnitude = hn::Set(di, 0x7fffffff), infinity = hn::Set(di, 0x7f800000);
  const auto half = hn::Set(di, 0x7fff), one = hn::Set(di, 1), quiet = hn::Set(di, 0x00400000);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::BitCast(di, hn::LoadU(DF(), src + i));
    const auto nan = hn::Gt(hn::And(bits, magnitude), infinity);
    const auto odd = hn::And(hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du32, bits))), one);
    const auto rounded = hn::Add(bits, hn::Add(half, odd));
    const auto top = hn::ShiftRight<16>(hn::BitCast(du32, hn::IfThenElse(nan, hn::Or(bits, quiet), rounded)));
    // In [0, 0xffff] as an int32: the saturating demotion keeps it.
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, top)), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = infera::f32_to_bf16(src[i]);
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRows);
HWY_EXPORT(MatmulRowsPair);
HWY_EXPORT(WidenRow);
HWY_EXPORT(Dot);
HWY_EXPORT(SoftmaxNumerators);
HWY_EXPORT(WeightedRowsSum);
HWY_EXPORT(SiluMul);
HWY_EXPORT(ScoresTile);
HWY_EXPORT(RoundToBf16);
HWY_EXPORT(TargetName);

void matmul_rows(const float* x, int64_t n, int64_t k, const void* w, DType wtype, int64_t j_begin,
                 int64_t j_end, float* out, int64_t ldo, float* panel) {
  HWY_DYNAMIC_DISPATCH(MatmulRows)(x, n, k, w, wtype, j_begin, j_end, out, ldo, panel);
}
void matmul_rows_pair(const float* xa, const float* xb, int64_t n, int64_t k, const void* wa,
                      const void* wb, DType wtype, int64_t rows, float* outa, float* outb,
                      int64_t ldo, float* panel) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsPair)(xa, xb, n, k, wa, wb, wtype, rows, outa, outb, ldo, panel);
}
void widen_row(const void* src, DType wtype, int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenRow)(src, wtype, n, dst);
}
float dot_f32(const float* a, const float* b, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(Dot)(a, b, n);
}
float softmax_numerators_f32(float* s, int64_t n, float scale) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxNumerators)(s, n, scale);
}
void weighted_row_sum(const float* p, int64_t count, const void* v, DType vtype, int64_t d,
                      float* out, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(WeightedRowsSum)(&p, 1, count, v, vtype, d, &out, accumulate);
}
void silu_mul_f32(const float* g, const float* u, float* o, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMul)(g, u, o, n);
}
void weighted_rows_sum(const float* const* p, int rows, int64_t count, const void* v, DType vtype,
                       int64_t d, float* const* out, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(WeightedRowsSum)(p, rows, count, v, vtype, d, out, accumulate);
}
void scores_tile_f32(const float* q, int64_t rows, int64_t d, const float* kt, int64_t cols,
                     float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(ScoresTile)(q, rows, d, kt, cols, out, ldo);
}
void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(RoundToBf16)(src, n, dst);
}
const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
}  // namespace infera::cpu
#endif
