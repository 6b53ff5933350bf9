// The q/k/v GEMM with the head epilogue (qkv_gemm.cu) launched directly, against a double
// reference of qk_norm_rope_kv_write's arithmetic over the bf16-rounded operands: per row and head
// the product, the RMS norm with the head's weights, RoPE at the row's position, q times the
// attention's scale as bf16 [n, hq, 128], k and v into their pools at the row's slot (scattered
// slots, GQA, rows past a tile, k past a 64-wide block, bf16 and f32 norm weights, both of the
// kernel's schedules). Every pool
// row the step does not own must keep its sentinel. The whole-model check is in
// cuda_gemm_stack_test.cpp. Skips where no CUDA device is visible or it is not compute
// capability 9.0.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/qkv_gemm.h"
#include "backend/cuda_test_models.h"
#include "core/dtype_convert.h"

namespace infera {
namespace {

using cuda::ElemType;
using cuda::QkNormRopeKvArgs;
using cuda::QkvGemmArgs;

constexpr int kD = 128;

class CudaQkvGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = cuda_test::sm90_missing()) GTEST_SKIP() << why;
  }
};

template <typename T>
T* upload(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return p;
}
template <typename T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

struct Case {
  int n, k, hq, hkv;
  bool f32_norms;
  bool pingpong;  // the kernel's ping-pong schedule (CudaOptions::tma_gemm_pingpong)
};

// NMSE accumulator: NaN (failing every bound) when a value is NaN or the reference all zeros.
struct Nmse {
  double err = 0, ref = 0;
  bool nan = false;
  void add(double got, double want) {
    nan = nan || std::isnan(got);
    err += (got - want) * (got - want);
    ref += want * want;
  }
  double value() const { return nan || ref == 0 ? std::nan("") : err / ref; }
};

TEST_F(CudaQkvGemmTest, MatchesDoubleReference) {
  const Case cases[] = {{1, 1024, 16, 8, false, false},  {77, 1024, 16, 8, false, false},
                        {200, 136, 4, 2, true, false},   {300, 1024, 16, 8, true, false},
                        {300, 1024, 16, 8, false, true}, {77, 136, 4, 2, true, true}};
  constexpr int kBlock = 16, kPositions = 4096;
  constexpr double kTheta = 1e6, kEps = 1e-6;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // RoPE tables [positions, 64] as the backend builds them: inv_freq = theta^(-2i / d).
  std::vector<float> cos_t(size_t(kPositions) * kD / 2), sin_t(cos_t.size());
  for (int p = 0; p < kPositions; ++p)
    for (int i = 0; i < kD / 2; ++i) {
      const double a = p * std::pow(kTheta, -2.0 * i / kD);
      cos_t[size_t(p) * kD / 2 + i] = static_cast<float>(std::cos(a));
      sin_t[size_t(p) * kD / 2 + i] = static_cast<float>(std::sin(a));
    }
  float* cos_d = upload(cos_t);
  float* sin_d = upload(sin_t);
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.n) + " rows, k " + std::to_string(c.k) + ", " +
                             std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " heads" +
                             (c.f32_norms ? ", f32 norms" : "") + (c.pingpong ? ", ping-pong" : "");
    const int heads = c.hq + 2 * c.hkv, rows_w = heads * kD;
    const int num_blocks = (c.n + kBlock - 1) / kBlock + 3;  // spare blocks: sentinels only
    std::vector<uint16_t> x(size_t(c.n) * c.k), w(size_t(rows_w) * c.k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    const float ws = 2.0f / std::sqrt(static_cast<float>(c.k));
    for (auto& v : w) v = f32_to_bf16(dist(rng) * ws);
    std::vector<float> qn(kD), kn(kD);
    for (auto& v : qn) v = 0.5f + dist(rng) * 0.4f;
    for (auto& v : kn) v = 0.5f + dist(rng) * 0.4f;
    std::vector<uint16_t> qn16(kD), kn16(kD);
    for (int i = 0; i < kD; ++i) {
      qn16[size_t(i)] = f32_to_bf16(qn[size_t(i)]);
      kn16[size_t(i)] = f32_to_bf16(kn[size_t(i)]);
      if (!c.f32_norms) {  // the reference uses the weights the kernel reads
        qn[size_t(i)] = bf16_to_f32(qn16[size_t(i)]);
        kn[size_t(i)] = bf16_to_f32(kn16[size_t(i)]);
      }
    }
    std::vector<int32_t> positions(size_t(c.n)), slots(size_t(num_blocks) * kBlock);
    for (auto& p : positions) p = static_cast<int32_t>(rng() % kPositions);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(size_t(c.n));
    const size_t pool_elems = size_t(c.hkv) * num_blocks * kBlock * kD;
    const uint16_t kSentinel = 0x7fc1;  // a NaN no kernel writes
    std::vector<uint16_t> pool_init(pool_elems, kSentinel);
    uint16_t *x_d = upload(x), *w_d = upload(w), *keys_d = upload(pool_init),
             *values_d = upload(pool_init),
             *q16_d = upload(std::vector<uint16_t>(size_t(c.n) * c.hq * kD, kSentinel));
    int32_t *pos_d = upload(positions), *slots_d = upload(slots);
    void* qn_d = c.f32_norms ? static_cast<void*>(upload(qn)) : static_cast<void*>(upload(qn16));
    void* kn_d = c.f32_norms ? static_cast<void*>(upload(kn)) : static_cast<void*>(upload(kn16));
    const double q_scale = 0.08838834764831845 * 1.4426950408889634;

    QkvGemmArgs a{};
    a.x = x_d;
    a.w = w_d;
    a.k = c.k;
    QkNormRopeKvArgs& q = a.qa;
    q.q_norm = qn_d;
    q.k_norm = kn_d;
    q.norm_type = c.f32_norms ? ElemType::F32 : ElemType::BF16;
    q.positions = pos_d;
    q.cos = cos_d;
    q.sin = sin_d;
    q.slots = slots_d;
    q.key_pool = keys_d;
    q.value_pool = values_d;
    q.cache_type = ElemType::BF16;
    q.n = c.n;
    q.hq = c.hq;
    q.hkv = c.hkv;
    q.head_dim = kD;
    q.block_size = kBlock;
    q.num_blocks = num_blocks;
    q.eps = kEps;
    q.q16_out = q16_d;
    q.q16_scale = q_scale;
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    a.schedule = {0, prop.multiProcessorCount, c.pingpong ? 1 : 0};
    ASSERT_EQ(cuda::qkv_gemm_unsupported(a, prop.major, prop.minor), nullptr) << what;
    cuda::launch_qkv_gemm(&a, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const auto q16 = download(q16_d, size_t(c.n) * c.hq * kD);
    const auto keys = download(keys_d, pool_elems), values = download(values_d, pool_elems);

    Nmse eq, ek, ev;
    std::vector<char> owned(pool_elems / kD, 0);  // pool rows (head, slot) the step wrote
    std::vector<double> acc(kD);
    for (int r = 0; r < c.n; ++r) {
      const int pos = positions[size_t(r)], slot = slots[size_t(r)];
      for (int hd = 0; hd < heads; ++hd) {
        for (int j = 0; j < kD; ++j) {
          double s = 0;
          for (int i = 0; i < c.k; ++i)
            s += double(bf16_to_f32(x[size_t(r) * c.k + i])) *
                 bf16_to_f32(w[(size_t(hd) * kD + j) * c.k + i]);
          acc[size_t(j)] = s;
        }
        const int kind = hd < c.hq ? 0 : hd < c.hq + c.hkv ? 1 : 2;
        const int h = hd - (kind == 0 ? 0 : kind == 1 ? c.hq : c.hq + c.hkv);
        const size_t pool_row = (size_t(h) * num_blocks * kBlock + size_t(slot)) * kD;
        if (kind == 2) {
          for (int j = 0; j < kD; ++j) ev.add(bf16_to_f32(values[pool_row + j]), acc[size_t(j)]);
          owned[pool_row / kD] |= 2;
          continue;
        }
        double ss = 0;
        for (double v : acc) ss += v * v;
        const double inv = 1.0 / std::sqrt(ss / kD + kEps);
        const std::vector<float>& nw = kind == 0 ? qn : kn;
        for (int j = 0; j < kD / 2; ++j) {
          const double lo = nw[size_t(j)] * acc[size_t(j)] * inv;
          const double hi = nw[size_t(j) + kD / 2] * acc[size_t(j) + kD / 2] * inv;
          const double cs = cos_t[size_t(pos) * kD / 2 + j], sn = sin_t[size_t(pos) * kD / 2 + j];
          const double r0 = lo * cs - hi * sn, r1 = hi * cs + lo * sn;
          if (kind == 0) {
            const size_t at = (size_t(r) * c.hq + h) * kD;
            eq.add(bf16_to_f32(q16[at + j]), r0 * q_scale);
            eq.add(bf16_to_f32(q16[at + j + kD / 2]), r1 * q_scale);
          } else {
            ek.add(bf16_to_f32(keys[pool_row + j]), r0);
            ek.add(bf16_to_f32(keys[pool_row + j + kD / 2]), r1);
          }
        }
        if (kind == 1) owned[pool_row / kD] |= 1;
      }
    }
    std::printf("  %s: NMSE q %.2e, k %.2e, v %.2e\n", what.c_str(), eq.value(), ek.value(),
                ev.value());
    // bf16 outputs of f32 sums: ~1e-6; a wrong head, row, slot, rotation or norm gives ~1.
    EXPECT_LE(eq.value(), 1e-5) << what;  // NaN fails
    EXPECT_LE(ek.value(), 1e-5) << what;
    EXPECT_LE(ev.value(), 1e-5) << what;
    size_t stray = 0;
    for (size_t row = 0; row < owned.size(); ++row)
      for (int j = 0; j < kD; ++j) {
        stray += !(owned[row] & 1) && keys[row * kD + j] != kSentinel;
        stray += !(owned[row] & 2) && values[row * kD + j] != kSentinel;
      }
    EXPECT_EQ(stray, 0u) << what << ": pool elements written outside the step's slots";
    for (void* p : {static_cast<void*>(x_d), static_cast<void*>(w_d), static_cast<void*>(keys_d),
                    static_cast<void*>(values_d), static_cast<void*>(q16_d),
                    static_cast<void*>(pos_d), static_cast<void*>(slots_d), qn_d, kn_d})
      cudaFree(p);
  }
  cudaFree(cos_d);
  cudaFree(sin_d);
}

}  // namespace
}  // namespace infera
