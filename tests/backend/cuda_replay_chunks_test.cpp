// Chunked replay (CudaOptions::replay_chunks): a step seen before is issued in chunks of 16, 32,
// 64, ... launch records while the host records it, each chunk replayed from a graph of its own.
// The logits must be the bits of the same steps replayed as one graph at their end, and the
// chunks must really have gone out early and been replayed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_models.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"

namespace infera {
namespace {

// kQwen3's shapes in 12 layers: a prefill step records well over 112 launches (chunks of 16, 32
// and 64, then the rest at the flush).
const char* const kTwelveLayers = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
  "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 2,
  "num_key_value_heads": 1, "num_hidden_layers": 12, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "vocab_size": 512})";

// Five rounds of: prefills of 40, 6 and 7 tokens into a cache emptied before them, then four
// decode steps of the three sequences. Each round's steps have the same shapes and buffers as
// the round before (from the third round on they replay), but other inputs.
std::vector<std::vector<float>> rounds(Backend& backend) {
  const auto dir = cuda_test::config_dir("replay_chunks", kTwelveLayers);
  auto model = load_causal_lm(dir, backend, {.dummy_weights = true});
  const auto vocab = static_cast<size_t>(model->info().vocab);
  KvCache cache(backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = 24, .dtype = DType::BF16});
  std::vector<std::vector<float>> out;
  for (int r = 0; r < 5; ++r) {
    std::vector<SeqId> ids;
    std::vector<int32_t> next;
    for (int s = 0; s < 3; ++s) {
      ids.push_back(cache.add_sequence());
      EXPECT_TRUE(cache.reserve(ids.back(), 48));
      std::vector<int32_t> prompt;
      for (int i = 0; i < (s == 0 ? 40 : 5 + s); ++i)
        prompt.push_back(static_cast<int32_t>((i * 7919 + 13 * r + s) % vocab));
      std::vector<float> logits(vocab);
      const SeqChunk chunk{ids.back(), prompt, OutputRows::Last};
      run_step(*model, cache, std::span<const SeqChunk>(&chunk, 1), logits);
      out.push_back(logits);
      next.push_back(static_cast<int32_t>((31 * r + 7 * s + 1) % vocab));
    }
    for (int step = 0; step < 4; ++step) {
      std::vector<SeqChunk> chunks;
      for (size_t s = 0; s < ids.size(); ++s)
        chunks.push_back({ids[s], std::span<const int32_t>(&next[s], 1)});
      std::vector<float> logits(ids.size() * vocab);
      run_step(*model, cache, chunks, logits);
      out.push_back(logits);
      for (size_t s = 0; s < ids.size(); ++s)
        next[s] = static_cast<int32_t>((int64_t{next[s]} * 31 + step + 7) % int64_t(vocab));
    }
    for (const SeqId id : ids) cache.free_sequence(id);
  }
  return out;
}

TEST(CudaReplayChunks, SameBitsAsWholeStepReplay) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  CudaOptions whole;
  whole.replay_chunks = false;
  CudaOptions chunked;
  chunked.replay_chunks = true;
  auto whole_backend = make_cuda_backend(0, whole);
  auto chunked_backend = make_cuda_backend(0, chunked);
  const auto want = rounds(*whole_backend);
  const auto got = rounds(*chunked_backend);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t j = 0; j < got[i].size(); ++j)
      ASSERT_TRUE(got[i][j] == want[i][j])  // NaN fails too
          << "step " << i << " logit " << j << ": " << got[i][j] << " vs " << want[i][j];
  }
  const CudaStats w = *cuda_stats(*whole_backend), c = *cuda_stats(*chunked_backend);
  std::printf("  whole steps: %lld graph launches (%lld captured), %lld early chunks\n",
              static_cast<long long>(w.graph_launches), static_cast<long long>(w.graph_captures),
              static_cast<long long>(w.early_chunks));
  std::printf("  chunked:     %lld graph launches (%lld captured), %lld early chunks\n",
              static_cast<long long>(c.graph_launches), static_cast<long long>(c.graph_captures),
              static_cast<long long>(c.early_chunks));
  EXPECT_EQ(w.early_chunks, 0);
  // Rounds 2-5 record each of their 7 steps in more than 16 launches, so each issues at least
  // one chunk early; rounds 3-5 replay them, each step as at least two graphs instead of one.
  EXPECT_GE(c.early_chunks, 4 * 7);
  EXPECT_GE(c.graph_launches, w.graph_launches + 3 * 7);
}

}  // namespace
}  // namespace infera
