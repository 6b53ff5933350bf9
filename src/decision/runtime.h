// The decision runtime's library API: requests in, answers out, in the caller's order.
// Identical prepared inputs of one call run once (dedup); the unique inputs are sorted by length
// and cut into batches by a token budget and a question cap; each batch is one packed forward.
// Every answer is rebuilt with its own question's labels and values.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "decision/decision_model.h"
#include "decision/prepare.h"
#include "decision/request.h"

namespace infera::decision {

inline constexpr int kDefaultQuestionCap = 16, kMaxQuestionCap = 64;

struct RuntimeOptions {
  int max_batch_questions = kDefaultQuestionCap;  // 1..64
  int64_t token_budget = 8192;  // tokens per forward (a longer single input runs alone)
  bool dedup = true;            // identical prepared inputs of one call run once
  size_t prefix_cache_entries = 1024;
};

struct Counts {
  int64_t questions = 0, unique_forward_inputs = 0, dedup_hits = 0, prefix_cache_hits = 0;
  int64_t tokens_evaluated = 0, batches = 0;
};

// Wall time of each stage of one call, in milliseconds.
struct StageTimes {
  double prepare_ms = 0, forward_ms = 0, postprocess_ms = 0, total_ms = 0;
};

struct Answer {
  std::string answer;  // label of the argmax option (the first on ties)
  int32_t answer_index = 0;
  std::vector<float> probs;
  std::vector<std::pair<std::string, float>> top2;  // one entry with a single option
  float entropy = 0;  // of probs, divided by ln(options) (0 with one option), as feature 4
  std::string action;
  std::vector<float> action_probs;       // in decision_config's `actions` order
  std::optional<double> expected_value;  // score questions: sum p_k * value_k
  int64_t state_tokens = 0;
  bool state_truncated = false;
};

struct Response {
  std::vector<Answer> answers;
  Counts counts;
  StageTimes times;
};

struct IdsResponse {
  std::vector<QuestionOutput> results;
  Counts counts;
  StageTimes times;
};

class Runtime {
 public:
  // `tokenizer` may be null: then only token-id requests are accepted. `tokenizer_identity`
  // names the tokenizer in prefix-cache keys (tokenizer_identity_of_file).
  Runtime(DecisionModel& model, RuntimeOptions options,
          std::shared_ptr<const Tokenizer> tokenizer = nullptr,
          std::string tokenizer_identity = "");
  const RuntimeOptions& options() const { return options_; }
  RuntimeOptions& options() { return options_; }  // batching and dedup may change between calls
  // Empties the prefix cache (benchmarks measure uncached preparation).
  void clear_prefix_cache() {
    if (preparer_) preparer_->clear_cache();
  }

  Response decide(const Request& request);
  IdsResponse decide_ids(const std::vector<std::vector<int32_t>>& inputs);
  // JSON in (either form), JSON out; InvalidArgument for a malformed request (nothing returned).
  nlohmann::json handle(const nlohmann::json& body);

  static nlohmann::json to_json(const Response& r, const DecisionConfig& config);
  static nlohmann::json to_json(const IdsResponse& r, const DecisionConfig& config);

 private:
  std::vector<QuestionOutput> run(const std::vector<std::vector<int32_t>>& inputs, Counts& counts,
                                  StageTimes& times);
  DecisionModel& model_;
  RuntimeOptions options_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Preparer> preparer_;
};

}  // namespace infera::decision
