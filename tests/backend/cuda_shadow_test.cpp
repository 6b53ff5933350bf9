// The bf16 shadows (CudaOptions::bf16_shadow): a prefill-sized GEMM input written as bf16 by the
// kernel that makes it must give the same bits as converting it before the GEMM, and must really
// be used. Models of small dummy-weight configs with the real head sizes (Qwen3: head_dim 128,
// GQA 2, so attention takes the flash kernel; ModernBERT: head_dim 64, local and global layers,
// so attention_packed takes the flash kernel too), run once with shadows and once without.
// The prefill switches (CudaOptions::qk_norm_by_token, glu_bf16_gemm) are checked the same way,
// each against its old path. Skips where no CUDA device is visible.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_test_models.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"
#include "model/encoder.h"

namespace infera {
namespace {

using cuda_test::config_dir;
using cuda_test::kQwen3;
using cuda_test::nmse;
using cuda_test::prompt_logits;

constexpr int kLayers = 3;

const char* const kModernBert = R"({
  "architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert", "hidden_size": 128,
  "num_hidden_layers": 3, "intermediate_size": 256, "num_attention_heads": 2, "vocab_size": 512,
  "max_position_embeddings": 8192, "local_attention": 64, "global_attn_every_n_layers": 3,
  "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "hidden_activation": "gelu",
  "classifier_activation": "gelu", "norm_eps": 1e-05, "norm_bias": false,
  "attention_bias": false, "mlp_bias": false, "classifier_bias": false, "decoder_bias": true,
  "tie_word_embeddings": true, "pad_token_id": 0, "torch_dtype": "bfloat16"})";

CudaOptions with_shadows(bool on) {
  CudaOptions o;
  o.bf16_shadow = on;
  o.mlp_bf16_only = false;  // its SwiGLU -> down hand-off needs no shadow (counted below)
  o.gemm_stack = false;     // the composition's shadows (the GEMM stack hands bf16 on itself)
  o.encoder_stack = false;  // (and so does the encoder stack)
  return o;
}

// Qwen3-0.6B's attention shape (16 q heads, 8 kv heads, head_dim 128): the per-token
// qk_norm_rope_kv kernel takes it (heads in fours), the two-head config above does not.
const char* const kQwen3Heads16 = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
  "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 16,
  "num_key_value_heads": 8, "num_hidden_layers": 3, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "vocab_size": 512})";

// Logits of every row of a 150-token prompt.
std::vector<float> qwen3_prefill(Backend& backend, const char* config = kQwen3) {
  return prompt_logits(
      backend, config_dir(config == kQwen3 ? "shadow_qwen3" : "shadow_qwen3_h16", config), 150);
}

// Final hidden states of two packed sequences (70 and 130 rows: one and three 64-row tiles,
// windows crossing tile edges).
std::vector<float> modernbert_hidden(Backend& backend) {
  auto model = load_encoder(config_dir("shadow_modernbert", kModernBert), backend,
                            {.dummy_weights = true, .dummy_seed = 3});
  std::vector<std::vector<int32_t>> seqs(2);
  for (int i = 0; i < 70; ++i) seqs[0].push_back((i * 31 + 5) % 512);
  for (int i = 0; i < 130; ++i) seqs[1].push_back((i * 17 + 2) % 512);
  const BatchDesc batch = encoder_batch(seqs);
  std::vector<float> hidden(static_cast<size_t>(batch.num_tokens() * 128));
  model->hidden_states(batch, hidden);
  return hidden;
}

class CudaShadowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

TEST_F(CudaShadowTest, Qwen3PrefillWithShadowsEqualsConvertingBitForBit) {
  auto plain = make_cuda_backend(0, with_shadows(false));
  auto shadowed = make_cuda_backend(0, with_shadows(true));
  const std::vector<float> want = qwen3_prefill(*plain);
  const std::vector<float> got = qwen3_prefill(*shadowed);
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == want[i]);  // NaN differs
  EXPECT_EQ(differ, 0u) << "logits that differ, of " << got.size();
  // Per layer: attention -> o_proj, add_rmsnorm -> gate/up, swiglu -> down, and add_rmsnorm ->
  // the next layer's q/k/v (all layers but the last).
  EXPECT_EQ(cuda_stats(*shadowed)->bf16_shadows, 4 * kLayers - 1);
  EXPECT_EQ(cuda_stats(*plain)->bf16_shadows, 0);
}

// The cuBLASLt plans (gemm_plans.h) may choose another algorithm than cublasGemmEx (another f32
// summation order), so the logits agree to f32 rounding, not bit for bit.
TEST_F(CudaShadowTest, Qwen3PrefillWithLtPlansFollowsGemmEx) {
  CudaOptions gemmex;  // 150 rows: cuBLAS only with the skinny GEMM off
  gemmex.cublaslt_plans = false;
  gemmex.skinny_gemm = false;
  auto plain = make_cuda_backend(0, gemmex);
  CudaOptions plans;
  plans.cublaslt_plans = true;
  plans.skinny_gemm = false;
  auto lt = make_cuda_backend(0, plans);
  const std::vector<float> want = qwen3_prefill(*plain);
  const std::vector<float> got = qwen3_prefill(*lt);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    err += d * d;
    ref += double(want[i]) * double(want[i]);
  }
  EXPECT_TRUE(ref > 0 && err / ref <= 1e-6) << "NMSE " << err / ref;  // NaN fails
}

TEST_F(CudaShadowTest, ModernBertWithShadowsEqualsConvertingBitForBit) {
  auto plain = make_cuda_backend(0, with_shadows(false));
  auto shadowed = make_cuda_backend(0, with_shadows(true));
  const std::vector<float> want = modernbert_hidden(*plain);
  const std::vector<float> got = modernbert_hidden(*shadowed);
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == want[i]);
  EXPECT_EQ(differ, 0u) << "hidden values that differ, of " << got.size();
  // Per layer: layernorm -> Wqkv (layer 0: the embedding norm), attention -> Wo,
  // layernorm -> Wi, GeGLU -> Wo2.
  EXPECT_EQ(cuda_stats(*shadowed)->bf16_shadows, 4 * kLayers);
  EXPECT_EQ(cuda_stats(*plain)->bf16_shadows, 0);
}

// The encoder's fused ops (add_layernorm, matmul_geglu) against their compositions on a whole
// ModernBERT: add_layernorm is bit for bit add then layernorm, matmul_geglu rounds the two GEMM
// outputs to bf16 before GeGLU (NMSE ~1e-6 here; an indexing or pairing bug gives ~1). The
// profile shows they were taken: no separate residual add or f32 GeGLU pass is left.
TEST_F(CudaShadowTest, ModernBertFusedOpsFollowTheirCompositions) {
  CudaOptions composed;
  composed.fused = false;
  composed.glu_bf16_gemm = false;
  auto plain = make_cuda_backend(0, composed);
  CudaOptions fused;
  fused.profile = true;
  fused.encoder_stack = false;  // the fused ops, not the stack past them
  auto ours = make_cuda_backend(0, fused);
  const std::vector<float> want = modernbert_hidden(*plain);
  const std::vector<float> got = modernbert_hidden(*ours);
  ASSERT_EQ(got.size(), want.size());
  const double e = nmse(got, want);
  EXPECT_TRUE(e <= 1e-4) << "NMSE " << e;
  const std::string report = cuda_profile_report(*ours);
  EXPECT_NE(report.find("add_layernorm"), std::string::npos) << report;
  EXPECT_NE(report.find("geglu_bf16"), std::string::npos) << report;
  // Report lines are "op / kernel  ms ...": the unfused ops' own lines.
  EXPECT_EQ(report.find("\ngeglu / geglu "), std::string::npos) << report;
  // The last layer's residual add stays a plain add (the final norm writes x in place).
  EXPECT_NE(report.find("\nadd / add "), std::string::npos) << report;
}

CudaOptions prefill_switches(bool glu_bf16, bool qk_by_token) {
  CudaOptions o;
  o.glu_bf16_gemm = glu_bf16;
  o.qk_norm_by_token = qk_by_token;
  return o;
}

// The per-token qk_norm_rope_kv kernel does each head's arithmetic as the per-head one: the same
// logits bit for bit, at Qwen3-0.6B's head counts.
TEST_F(CudaShadowTest, Qwen3PrefillQkNormByTokenEqualsPerHeadBitForBit) {
  auto per_head = make_cuda_backend(0, prefill_switches(false, false));
  auto by_token = make_cuda_backend(0, prefill_switches(false, true));
  const std::vector<float> want = qwen3_prefill(*per_head, kQwen3Heads16);
  const std::vector<float> got = qwen3_prefill(*by_token, kQwen3Heads16);
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == want[i]);  // NaN differs
  EXPECT_EQ(differ, 0u) << "logits that differ, of " << got.size();
}

// The bf16 gate/up GEMM outputs add one bf16 rounding before silu(g) * u: the logits stay within
// the bf16 bound of the op harness (NMSE 1e-4) of the f32-output path, and are not the same bits
// (so the switch really changes the path).
TEST_F(CudaShadowTest, Qwen3PrefillGluBf16FollowsTheF32Path) {
  auto f32 = make_cuda_backend(0, prefill_switches(false, true));
  auto bf16 = make_cuda_backend(0, prefill_switches(true, true));
  const std::vector<float> want = qwen3_prefill(*f32, kQwen3Heads16);
  const std::vector<float> got = qwen3_prefill(*bf16, kQwen3Heads16);
  ASSERT_EQ(got.size(), want.size());
  const double e = nmse(got, want);
  EXPECT_TRUE(e <= 1e-4) << "NMSE " << e;
  EXPECT_GT(e, 0.0) << "the bf16 gate/up path was not taken";
}

// matmul_swiglu_down with the SwiGLU result written only as bf16 (CudaOptions::mlp_bf16_only):
// the down projection reads the bits the f32 path's shadow held, so the logits are the same bit
// for bit, and the path is taken (one shadow use fewer per layer: swiglu -> down).
TEST_F(CudaShadowTest, Qwen3PrefillMlpBf16OnlyEqualsTheShadowPathBitForBit) {
  CudaOptions both, shadow_only;
  shadow_only.mlp_bf16_only = false;
  both.gemm_stack = shadow_only.gemm_stack = false;  // the composition's hand-offs
  auto with_f32 = make_cuda_backend(0, shadow_only);
  auto bf16_only = make_cuda_backend(0, both);
  const std::vector<float> want = qwen3_prefill(*with_f32, kQwen3Heads16);
  const std::vector<float> got = qwen3_prefill(*bf16_only, kQwen3Heads16);
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == want[i]);  // NaN differs
  EXPECT_EQ(differ, 0u) << "logits that differ, of " << got.size();
  EXPECT_EQ(cuda_stats(*with_f32)->bf16_shadows, 4 * kLayers - 1);
  EXPECT_EQ(cuda_stats(*bf16_only)->bf16_shadows, 3 * kLayers - 1);
}

// Every row's logits of 64 prompts of 40-103 tokens prefilled in one step: one 128-vector tile
// per (sequence, kv head) at Qwen3-0.6B's head counts, 512 blocks (CudaOptions::flash_wide_auto
// takes the 8-warp wide kernel on GPUs of up to 170 SMs).
std::vector<float> qwen3_many_prompts(Backend& backend) {
  auto model = load_causal_lm(config_dir("shadow_qwen3_h16", kQwen3Heads16), backend,
                              {.dummy_weights = true});
  const int64_t vocab = model->info().vocab, seqs = 64;
  KvCache cache(backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = seqs * 7, .dtype = DType::BF16});
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(seqs));
  std::vector<SeqChunk> chunks;
  int64_t rows = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const SeqId id = cache.add_sequence();
    const int64_t n = 40 + s;
    EXPECT_TRUE(cache.reserve(id, n));
    for (int64_t i = 0; i < n; ++i)
      prompts[size_t(s)].push_back(static_cast<int32_t>((i * 7919 + 31 * s + 3) % vocab));
    chunks.push_back({id, prompts[size_t(s)], OutputRows::All});
    rows += n;
  }
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  run_step(*model, cache, chunks, logits);
  return logits;
}

// The wide kernel's summation order differs from the key-halves kernel's: the logits agree
// within the bf16 bound of the op harness (NMSE 1e-4), and differ (the rule took the wide kernel).
TEST_F(CudaShadowTest, Qwen3ManyPromptsWideAutoFollowsKeyHalves) {
  CudaOptions halves;
  halves.flash_wide_auto = false;
  halves.flash_wgmma = false;  // (the wgmma kernel, on by default, would take both)
  CudaOptions rule;
  rule.flash_wgmma = false;
  auto by_halves = make_cuda_backend(0, halves);
  auto by_rule = make_cuda_backend(0, rule);
  const std::vector<float> want = qwen3_many_prompts(*by_halves);
  const std::vector<float> got = qwen3_many_prompts(*by_rule);
  ASSERT_EQ(got.size(), want.size());
  const double e = nmse(got, want);
  EXPECT_TRUE(e <= 1e-4) << "NMSE " << e;
  EXPECT_GT(e, 0.0) << "the wide kernel was not taken";
}

// Logits of 3 decode steps of 24 sequences (prompts of 150-265 tokens, so the staged decode
// attention reads several key tiles and, unless `splits` is 1, splits them) after their prompts.
std::vector<float> qwen3_decode(Backend& backend) {
  auto model = load_causal_lm(config_dir("shadow_qwen3_h16", kQwen3Heads16), backend,
                              {.dummy_weights = true});
  const int64_t vocab = model->info().vocab, seqs = 24;
  KvCache cache(backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = seqs * 18, .dtype = DType::BF16});
  std::vector<SeqId> ids;
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(seqs));
  for (int64_t s = 0; s < seqs; ++s) {
    ids.push_back(cache.add_sequence());
    EXPECT_TRUE(cache.reserve(ids.back(), 150 + 5 * s + 3));
    for (int64_t i = 0; i < 150 + 5 * s; ++i)
      prompts[size_t(s)].push_back(static_cast<int32_t>((i * 7919 + 13 * s + 1) % vocab));
    const SeqChunk chunk{ids.back(), prompts[size_t(s)], OutputRows::None};
    std::vector<float> none;
    run_step(*model, cache, std::span<const SeqChunk>(&chunk, 1), none);
  }
  std::vector<float> all;
  std::vector<int32_t> next(static_cast<size_t>(seqs));
  for (int step = 0; step < 3; ++step) {
    std::vector<SeqChunk> chunks;
    for (int64_t s = 0; s < seqs; ++s) {
      next[size_t(s)] = static_cast<int32_t>((s * 31 + step * 7 + 5) % vocab);
      chunks.push_back(
          {ids[size_t(s)], std::span<const int32_t>(&next[size_t(s)], 1), OutputRows::Last});
    }
    std::vector<float> logits(static_cast<size_t>(seqs * vocab));
    run_step(*model, cache, chunks, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// The staged decode attention's bf16 shadow (CudaOptions::decode_attention_shadow) holds the
// bits the convert kernel would make: the same logits, split or not, and the o projections of
// the 3 decode steps really read it.
TEST_F(CudaShadowTest, Qwen3DecodeAttentionShadowEqualsConvertingBitForBit) {
  for (const int64_t splits : {int64_t{1}, int64_t{0}}) {  // 1: unsplit; 0: planned (split here)
    CudaOptions off;
    off.decode_splits = splits;
    off.decode_attention_shadow = false;
    CudaOptions on = off;
    on.decode_attention_shadow = true;
    auto plain = make_cuda_backend(0, off);
    auto shadowed = make_cuda_backend(0, on);
    const std::vector<float> want = qwen3_decode(*plain);
    const std::vector<float> got = qwen3_decode(*shadowed);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == want[i]);  // NaN differs
    EXPECT_EQ(differ, 0u) << "logits that differ, of " << got.size() << " (splits " << splits
                          << ")";
    EXPECT_EQ(cuda_stats(*shadowed)->bf16_shadows - cuda_stats(*plain)->bf16_shadows, 3 * kLayers)
        << "splits " << splits;
  }
}

// CudaOptions::paired_gemm: k and v, gate and up as one strided-batched launch each. cuBLAS may
// pick another kernel for the pair (another f32 summation order), so the logits agree to f32
// rounding, not bit for bit; the pairs must really be launched.
TEST_F(CudaShadowTest, Qwen3DecodePairedGemmsFollowSeparateGemms) {
  CudaOptions separate;
  separate.paired_gemm = false;
  CudaOptions paired;
  paired.paired_gemm = true;
  auto plain = make_cuda_backend(0, separate);
  auto pairs = make_cuda_backend(0, paired);
  const std::vector<float> want = qwen3_decode(*plain);
  const std::vector<float> got = qwen3_decode(*pairs);
  ASSERT_EQ(got.size(), want.size());
  const double e = nmse(got, want);
  EXPECT_TRUE(e <= 1e-6) << "NMSE " << e;  // NaN fails
  EXPECT_EQ(cuda_stats(*plain)->paired_gemms, 0);
  // 24 prompt steps and 3 decode steps, two pairs per layer each, where the addresses allow it.
  const int64_t launched = cuda_stats(*pairs)->paired_gemms;
  EXPECT_GT(launched, 0);
  std::printf("[paired gemm] %lld pairs of at most %d\n", static_cast<long long>(launched),
              27 * 2 * kLayers);
}

}  // namespace
}  // namespace infera
