// The generation loop end to end on the qwen3-micro fixture: greedy output equal to the
// transformers reference, chunked prefill equal to one-shot prefill, stop ids, limits, seeds.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include <random>

#include "../model/fixture_cases.h"
#include "../test_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "infera/error.h"
#include "model/causal_lm.h"

namespace infera {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = test::make_test_backend(2, &why);
    if (!backend_) GTEST_SKIP() << why;
    // These tests compare generated ids exactly, also where the reference's margins are small
    // and between batch compositions that take different kernels: they need f32 compute.
    if (test::test_device() == "cuda")
      GTEST_SKIP() << "exact-token tests need f32 compute: run them with "
                      "INFERA_TEST_DEVICE=cuda-exact";
    model_ = load_causal_lm(test::fixture("qwen3-micro"), *backend_, {});
    cases_ = test::load_lm_cases("qwen3-micro");
  }
  GenerationRequest greedy(const test::LmCase& c) const {
    GenerationRequest r;
    r.prompt = c.input_ids;
    r.max_new_tokens = static_cast<int64_t>(c.greedy_new_ids.size());
    r.sampling.temperature = 0.0f;
    return r;
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CausalLM> model_;
  std::vector<test::LmCase> cases_;
};

TEST_F(GeneratorTest, GreedyGenerationEqualsReference) {
  Generator gen(*model_);
  for (const auto& c : cases_) {
    SCOPED_TRACE(c.name);
    std::vector<int32_t> streamed;
    const auto result = gen.generate(greedy(c), [&](int32_t id) {
      streamed.push_back(id);
      return true;
    });
    EXPECT_EQ(result.tokens, c.greedy_new_ids);
    EXPECT_EQ(streamed, result.tokens);
    EXPECT_EQ(result.finish_reason, "length");
    EXPECT_EQ(result.stats.prompt_tokens, static_cast<int64_t>(c.input_ids.size()));
    EXPECT_EQ(result.stats.decode_steps, static_cast<int64_t>(c.greedy_new_ids.size()) - 1);
  }
}

TEST_F(GeneratorTest, ChunkedPrefillEqualsOneShot) {
  const auto& c = cases_.back();  // the 200-token prompt
  ASSERT_GT(c.input_ids.size(), 100u);
  Generator gen(*model_);
  GenerationRequest r = greedy(c);
  r.prefill_chunk = 7;
  EXPECT_EQ(gen.generate(r).tokens, c.greedy_new_ids);
}

TEST_F(GeneratorTest, StopsAtAStopIdAndKeepsIt) {
  const auto& c = cases_[1];  // "chat": its first two greedy tokens differ
  GenerationRequest r = greedy(c);
  r.stop_ids = {c.greedy_new_ids[1]};
  const auto result = Generator(*model_).generate(r);
  EXPECT_EQ(result.finish_reason, "stop");
  ASSERT_EQ(result.tokens.size(), 2u);
  EXPECT_EQ(result.tokens.back(), c.greedy_new_ids[1]);
}

TEST_F(GeneratorTest, CallbackCanCancel) {
  GenerationRequest r = greedy(cases_[0]);
  int calls = 0;
  const auto result = Generator(*model_).generate(r, [&](int32_t) { return ++calls < 3; });
  EXPECT_EQ(result.finish_reason, "cancelled");
  EXPECT_EQ(result.tokens.size(), 3u);
}

TEST_F(GeneratorTest, ZeroMaxTokensGeneratesNothing) {
  GenerationRequest r = greedy(cases_[0]);
  r.max_new_tokens = 0;
  EXPECT_TRUE(Generator(*model_).generate(r).tokens.empty());
}

TEST_F(GeneratorTest, SeededSamplingIsReproducible) {
  GenerationRequest r = greedy(cases_[0]);
  r.sampling = {.temperature = 1.5f, .top_k = 50, .top_p = 0.95f, .seed = 42};
  Generator gen(*model_);
  const auto a = gen.generate(r).tokens;
  const auto b = gen.generate(r).tokens;
  EXPECT_EQ(a, b);
  r.sampling.seed = 43;
  EXPECT_NE(gen.generate(r).tokens, a);
}

TEST_F(GeneratorTest, RejectsBadPrompts) {
  Generator gen(*model_);
  GenerationRequest r;
  EXPECT_THROW(gen.generate(r), InvalidArgument);  // empty
  r.prompt = {-1};
  EXPECT_THROW(gen.generate(r), InvalidArgument);
  r.prompt = {static_cast<int32_t>(model_->info().vocab)};
  EXPECT_THROW(gen.generate(r), InvalidArgument);
  r.prompt = {1};
  r.sampling.top_p = 2.0f;
  EXPECT_THROW(gen.generate(r), InvalidArgument);
}

// 16 requests of different lengths and limits through one step loop, with a small token budget
// so that prefill chunks and decode rows share steps: each request's output equals the same
// request run alone (greedy and seeded sampling), and each stream sees exactly its own ids.
TEST_F(GeneratorTest, SixteenConcurrentRequestsEqualEachAlone) {
  std::mt19937 rng(5);
  std::vector<GenerationRequest> requests(16);
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest& r = requests[i];
    const size_t len = 1 + (i * 37) % 90;
    for (size_t t = 0; t < len; ++t) r.prompt.push_back(int32_t(rng() % 151000));
    r.max_new_tokens = 4 + int64_t(i % 5) * 5;
    r.prefill_chunk = 24;
    if (i % 3 == 0)
      r.sampling = {.temperature = 0.9f, .top_k = 40, .seed = 100 + i};
    else
      r.sampling.temperature = 0.0f;
    if (i == 7) r.stop_ids = {};
  }
  std::vector<GenerationResult> alone;
  for (const GenerationRequest& r : requests) alone.push_back(Generator(*model_).generate(r));
  Generator together(*model_, {.block_size = 8, .max_batch_tokens = 40});
  std::vector<std::vector<int32_t>> streamed(requests.size());
  const auto results = together.generate(requests, [&](size_t i, int32_t id) {
    streamed[i].push_back(id);
    return true;
  });
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(results[i].tokens, alone[i].tokens);
    EXPECT_EQ(results[i].finish_reason, alone[i].finish_reason);
    EXPECT_EQ(streamed[i], results[i].tokens);
    EXPECT_EQ(results[i].stats.prompt_tokens, int64_t(requests[i].prompt.size()));
  }
}

TEST_F(GeneratorTest, RequestsBeyondTheCacheWaitTheirTurn) {
  // A cache with room for about two requests at a time: the rest wait, and all finish with the
  // same output as alone.
  std::vector<GenerationRequest> requests(5, greedy(cases_[0]));
  for (size_t i = 0; i < requests.size(); ++i) requests[i].prompt.push_back(int32_t(100 + i));
  const auto want = Generator(*model_).generate(requests[3]).tokens;
  const int64_t need = int64_t(requests[0].prompt.size()) + requests[0].max_new_tokens;
  Generator small(*model_, {.block_size = 4, .num_blocks = 2 * ((need + 3) / 4) + 1});
  const auto results = small.generate(requests);
  EXPECT_EQ(results[3].tokens, want);
  for (const auto& r : results) EXPECT_EQ(r.finish_reason, "length");
}

TEST_F(GeneratorTest, ARequestLargerThanTheWholeCacheIsAClearError) {
  GenerationRequest r = greedy(cases_[0]);
  Generator tiny(*model_, {.block_size = 4, .num_blocks = 2});
  try {
    tiny.generate(r);
    ADD_FAILURE() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache blocks"), std::string::npos) << e.what();
  }
}

TEST_F(GeneratorTest, CancellingOneRequestLeavesTheOthers) {
  std::vector<GenerationRequest> requests = {greedy(cases_[0]), greedy(cases_[1])};
  const auto results =
      Generator(*model_).generate(requests, [](size_t i, int32_t) { return i != 0; });
  EXPECT_EQ(results[0].finish_reason, "cancelled");
  EXPECT_EQ(results[0].tokens.size(), 1u);
  EXPECT_EQ(results[1].tokens, cases_[1].greedy_new_ids);
}

TEST_F(GeneratorTest, Bf16KvCacheGreedyMatchesWhereTheReferenceIsDecisive) {
  // bf16 keys/values move this fixture's logits by up to ~5e-2 (see BatchParity): compare greedy
  // tokens while the reference's top-1 margin is above 0.1.
  Generator gen(*model_, {.kv_dtype = DType::BF16});
  for (const auto& c : cases_) {
    const auto tokens = gen.generate(greedy(c)).tokens;
    for (size_t s = 0; s < c.greedy_new_ids.size() && c.greedy_step_margins[s] > 0.1f; ++s)
      ASSERT_EQ(tokens[s], c.greedy_new_ids[s]) << c.name << " step " << s;
  }
}

}  // namespace
}  // namespace infera
