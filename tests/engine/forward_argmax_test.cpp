// Greedy ids chosen where the logits live (CausalLM::forward_argmax, Backend::argmax_rows) equal
// the host's argmax of the same step's logits, and the generator's greedy path through them
// equals its host-sampling path. Runs on $INFERA_TEST_DEVICE (tests/test_backend.h): on a GPU
// this checks the device argmax and the engine path that sends only ids to the host.
#include <gtest/gtest.h>

#include <vector>

#include "../model/fixture_cases.h"
#include "../test_backend.h"
#include "engine/generator.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"
#include "sample/sampler.h"

namespace infera {
namespace {

class ForwardArgmax : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = test::make_test_backend(2, &why);
    if (!backend_) GTEST_SKIP() << why;
    model_ = load_causal_lm(test::fixture("qwen3-micro"), *backend_, {});
    cases_ = test::load_lm_cases("qwen3-micro");
    ASSERT_GE(cases_.size(), 2u);
  }
  KvCache make_cache() {
    return KvCache(*backend_, model_->kv_shape(),
                   {.block_size = 16, .num_blocks = 64, .dtype = DType::F32});
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CausalLM> model_;
  std::vector<test::LmCase> cases_;
};

TEST_F(ForwardArgmax, IdsAreTheArgmaxOfTheSameStepsLogits) {
  // Two identical caches take the same steps: a prefill of two prompts with every row an output
  // row, then decode steps; one reads logits back, the other only ids.
  KvCache a = make_cache(), b = make_cache();
  const auto vocab = static_cast<size_t>(model_->info().vocab);
  std::vector<SeqId> sa, sb;
  for (size_t i = 0; i < 2; ++i) {
    sa.push_back(a.add_sequence());
    sb.push_back(b.add_sequence());
    ASSERT_TRUE(a.reserve(sa[i], 64));
    ASSERT_TRUE(b.reserve(sb[i], 64));
  }
  std::vector<std::vector<int32_t>> next = {cases_[0].input_ids, cases_[1].input_ids};
  int64_t rows_checked = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<SeqChunk> ca, cb;
    for (size_t i = 0; i < 2; ++i) {
      ca.push_back({sa[i], next[i], step == 0 ? OutputRows::All : OutputRows::Last});
      cb.push_back({sb[i], next[i], step == 0 ? OutputRows::All : OutputRows::Last});
    }
    const auto rows = static_cast<size_t>(count_outputs(ca));
    std::vector<float> logits(rows * vocab);
    std::vector<int32_t> ids(rows, -7);
    run_step(*model_, a, ca, logits);
    run_step_argmax(*model_, b, cb, ids);
    for (size_t r = 0; r < rows; ++r) {
      const int32_t want = argmax(std::span<const float>(logits.data() + r * vocab, vocab));
      ASSERT_EQ(ids[r], want) << "step " << step << " row " << r;
      ++rows_checked;
    }
    // Continue both with the last row of each sequence's choice.
    size_t last = 0;
    for (size_t i = 0; i < 2; ++i) {
      last += step == 0 ? next[i].size() : 1;
      next[i] = {ids[last - 1]};
    }
  }
  EXPECT_EQ(rows_checked,
            static_cast<int64_t>(cases_[0].input_ids.size() + cases_[1].input_ids.size() + 6));
}

TEST_F(ForwardArgmax, GeneratorGreedyEqualsHostSampling) {
  // Bf16 tensor-core products make batch compositions differ slightly (tests/test_backend.h);
  // both paths here run the same steps, so the ids must still be identical.
  std::vector<GenerationRequest> requests;
  for (const auto& c : cases_) {
    GenerationRequest r;
    r.prompt = c.input_ids;
    r.max_new_tokens = 12;
    r.sampling.temperature = 0.0f;
    requests.push_back(r);
  }
  // One request with a repetition penalty: steps that sample it go through the host path.
  GenerationRequest penalised = requests[0];
  penalised.sampling.repetition_penalty = 1.3f;
  requests.push_back(penalised);
  const auto on_device = Generator(*model_, {.device_greedy = true}).generate(requests);
  const auto on_host = Generator(*model_, {.device_greedy = false}).generate(requests);
  ASSERT_EQ(on_device.size(), on_host.size());
  for (size_t i = 0; i < on_host.size(); ++i) {
    EXPECT_EQ(on_device[i].tokens, on_host[i].tokens) << "request " << i;
    EXPECT_EQ(on_device[i].tokens.size(), 12u);
  }
  // Greedy requests alone: every step takes the argmax path.
  requests.pop_back();
  const auto greedy_device = Generator(*model_, {.device_greedy = true}).generate(requests);
  const auto greedy_host = Generator(*model_, {.device_greedy = false}).generate(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(greedy_device[i].tokens, greedy_host[i].tokens) << "request " << i;
}

}  // namespace
}  // namespace infera
