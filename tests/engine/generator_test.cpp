// The generation loop end to end on the qwen3-micro fixture: greedy output equal to the
// transformers reference, chunked prefill equal to one-shot prefill, stop ids, limits, seeds.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include "../model/fixture_cases.h"
#include "infera/error.h"
#include "model/causal_lm.h"

namespace infera {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend(2);
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

}  // namespace
}  // namespace infera
