// Small dummy-weight Qwen3 models for the CUDA model-level tests (shadows, skinny GEMM, prefill
// switches): a config folder, the logits of every row of one prompt, and the normalized error
// the tests bound.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/dtype_convert.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"

namespace infera::cuda_test {

// Why a test of an sm_90a-only kernel (wgmma, TMA) cannot run here, or nullptr:
// `if (const char* why = cuda_test::sm90_missing()) GTEST_SKIP() << why;`.
inline const char* sm90_missing() {
  if (cuda_device_count() == 0) return "no CUDA device visible: cuda tests not run";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9 || p.minor != 0)
    return "the kernel needs compute capability 9.0 (sm_90a)";
  return nullptr;
}

// Qwen3 with the real head size (head_dim 128, GQA 2: attention takes the flash kernel).
inline const char* const kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
  "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 2,
  "num_key_value_heads": 1, "num_hidden_layers": 3, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "vocab_size": 512})";

// Qwen3-0.6B's layer (hidden 1024, 16 q heads and 8 kv heads of 128, intermediate 3072) in two
// layers with a small vocabulary.
inline const char* const kQwen3Layer06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
  "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
  "num_key_value_heads": 8, "num_hidden_layers": 2, "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "vocab_size": 512})";

// A model folder holding only `config` (dummy weights need no weight file), under the temp dir.
inline std::filesystem::path config_dir(const std::string& name, const std::string& config) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("infera_" + name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config;
  return dir;
}

// Logits of every row of an n-token prompt (n <= 256) through the dummy-weight model of `dir`.
inline std::vector<float> prompt_logits(Backend& backend, const std::filesystem::path& dir,
                                        int64_t n) {
  auto model = load_causal_lm(dir, backend, {.dummy_weights = true});
  const int64_t vocab = model->info().vocab;
  KvCache cache(backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = 16, .dtype = DType::BF16});
  const SeqId seq = cache.add_sequence();
  EXPECT_TRUE(cache.reserve(seq, n));
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  const SeqChunk chunk{seq, ids, OutputRows::All};
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  run_step(*model, cache, std::span<const SeqChunk>(&chunk, 1), logits);
  return logits;
}

// One sequence: `prompt` (ids taken modulo the vocabulary), then `steps` one-row decode steps fed
// a fixed token schedule (the same inputs on every backend), in a bf16 cache of `num_blocks`
// blocks of 16; the logits of every decode step.
inline std::vector<std::vector<float>> decode_one(CausalLM& model, std::vector<int32_t> prompt,
                                                  int steps, int64_t num_blocks) {
  const auto vocab = static_cast<size_t>(model.info().vocab);
  KvCache cache(model.backend(), model.kv_shape(),
                {.block_size = 16, .num_blocks = num_blocks, .dtype = DType::BF16});
  const SeqId id = cache.add_sequence();
  EXPECT_TRUE(cache.reserve(id, static_cast<int64_t>(prompt.size()) + steps + 1));
  for (int32_t& t : prompt) t %= static_cast<int32_t>(vocab);
  std::vector<float> logits(vocab);
  const SeqChunk first{id, prompt, OutputRows::Last};
  run_step(model, cache, std::span<const SeqChunk>(&first, 1), logits);
  std::vector<std::vector<float>> out;
  int32_t next = 11;
  for (int s = 0; s < steps; ++s) {
    const SeqChunk chunk{id, std::span<const int32_t>(&next, 1)};
    run_step(model, cache, std::span<const SeqChunk>(&chunk, 1), logits);
    out.push_back(logits);
    next = static_cast<int32_t>((int64_t{next} * 31 + s + 7) % static_cast<int64_t>(vocab));
  }
  return out;
}

// The index of the largest logit, and the largest minus the second largest (greedy choices are
// compared only where that margin is no near tie).
inline size_t argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}
inline float top_margin(std::vector<float> v) {
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return v[0] - v[1];
}

// Sum of squared differences over the reference's sum of squares; NaN (which fails every bound)
// when the reference is all zeros or anything is NaN.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    err += d * d;
    ref += double(want[i]) * double(want[i]);
  }
  return ref > 0 ? err / ref : std::nan("");
}

// An n x k by m x k bf16 matmul of random values run three times in a row on `backend` (graphs
// on: the later runs replay a captured graph): the same bits every time, at least one graph
// replay, and within 1e-8 NMSE of a double reference of the bf16-rounded operands. The split-k
// kernels (skinny, stream) add their partial sums in a fixed order; this is what holds them to it.
inline void expect_matmul_repeats_bit_for_bit(Backend& backend, int64_t n, int64_t k, int64_t m) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xv(size_t(n * k)), wf(size_t(m * k));
  for (float& v : xv) v = dist(rng);
  for (float& v : wf) v = dist(rng);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
  // Host views uploaded as prepare_weight does for any tensor (x too: a device f32 tensor).
  Tensor w =
      backend.prepare_weight(Tensor("w", DType::BF16, {m, k}, Device::CPU, wb.data(), nullptr));
  Tensor x =
      backend.prepare_weight(Tensor("x", DType::F32, {n, k}, Device::CPU, xv.data(), nullptr));
  Tensor out = backend.alloc("out", DType::F32, {n, m});
  std::vector<float> first, again(size_t(n * m));
  const int64_t graphs_before = cuda_stats(backend)->graph_launches;
  for (int rep = 0; rep < 3; ++rep) {
    backend.matmul(x, w, out);
    backend.to_host(out, again);
    if (rep == 0) first = again;
    size_t differ = 0;
    for (size_t i = 0; i < again.size(); ++i) differ += !(again[i] == first[i]);
    EXPECT_EQ(differ, 0u) << n << "x" << k << "x" << m << " repeat " << rep;
  }
  EXPECT_GE(cuda_stats(backend)->graph_launches - graphs_before, 1) << "no graph replay";
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(bf16_to_f32(f32_to_bf16(xv[size_t(i * k + p)]))) *
             bf16_to_f32(wb[size_t(j * k + p)]);
      const double d = first[size_t(i * m + j)] - s;
      err += d * d;
      ref += s * s;
    }
  EXPECT_TRUE(err / ref <= 1e-8) << n << "x" << k << "x" << m << ": NMSE " << err / ref;
}

}  // namespace infera::cuda_test
