#include "decision/runtime.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include "infera/error.h"

namespace infera::decision {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

Runtime::Runtime(DecisionModel& model, RuntimeOptions options,
                 std::shared_ptr<const Tokenizer> tokenizer, std::string tokenizer_identity)
    : model_(model), options_(options), tokenizer_(std::move(tokenizer)) {
  if (options_.max_batch_questions < 1 || options_.max_batch_questions > kMaxQuestionCap)
    throw InvalidArgument("decision runtime: the question cap per batch must be in [1, " +
                          std::to_string(kMaxQuestionCap) + "], got " +
                          std::to_string(options_.max_batch_questions));
  if (options_.token_budget < 1)
    throw InvalidArgument("decision runtime: the token budget must be positive");
  if (tokenizer_)
    preparer_ = std::make_unique<Preparer>(
        model_.config(), *tokenizer_, std::move(tokenizer_identity), options_.prefix_cache_entries);
}

std::vector<QuestionOutput> Runtime::run(const std::vector<std::vector<int32_t>>& inputs,
                                         Counts& counts, StageTimes& times) {
  // Every input is checked before any forward, so a bad one fails the call with no output.
  for (size_t i = 0; i < inputs.size(); ++i)
    model_.check_input(inputs[i], "input " + std::to_string(i));
  // Dedup: each distinct input once, in first-seen order.
  std::vector<size_t> unique_of(inputs.size());
  std::vector<size_t> unique;  // index into inputs of each distinct input
  std::map<std::vector<int32_t>, size_t> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (options_.dedup) {
      const auto [it, fresh] = seen.emplace(inputs[i], unique.size());
      if (fresh) unique.push_back(i);
      unique_of[i] = it->second;
    } else {
      unique_of[i] = unique.size();
      unique.push_back(i);
    }
  }
  // Group by length (stable: equal lengths keep their order), then cut by budget and cap.
  std::vector<size_t> order(unique.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return inputs[unique[a]].size() < inputs[unique[b]].size();
  });
  std::vector<QuestionOutput> unique_out(unique.size());
  const auto t0 = Clock::now();
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    int64_t tokens = 0;
    while (end < order.size() && static_cast<int>(end - begin) < options_.max_batch_questions) {
      const auto len = static_cast<int64_t>(inputs[unique[order[end]]].size());
      if (end > begin && tokens + len > options_.token_budget) break;
      tokens += len;
      ++end;
    }
    std::vector<std::vector<int32_t>> batch;
    for (size_t k = begin; k < end; ++k) batch.push_back(inputs[unique[order[k]]]);
    std::vector<QuestionOutput> out = model_.forward(batch);
    for (size_t k = begin; k < end; ++k) unique_out[order[k]] = std::move(out[k - begin]);
    counts.tokens_evaluated += tokens;
    ++counts.batches;
    begin = end;
  }
  times.forward_ms += ms_since(t0);
  counts.questions = static_cast<int64_t>(inputs.size());
  counts.unique_forward_inputs = static_cast<int64_t>(unique.size());
  counts.dedup_hits = counts.questions - counts.unique_forward_inputs;
  std::vector<QuestionOutput> out(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) out[i] = unique_out[unique_of[i]];
  return out;
}

IdsResponse Runtime::decide_ids(const std::vector<std::vector<int32_t>>& inputs) {
  const auto t0 = Clock::now();
  IdsResponse r;
  if (inputs.empty()) throw InvalidArgument("decision request: inputs: no inputs");
  r.results = run(inputs, r.counts, r.times);
  r.times.total_ms = ms_since(t0);
  return r;
}

Response Runtime::decide(const Request& request) {
  const auto t0 = Clock::now();
  if (!preparer_)
    throw InvalidArgument(
        "decision request: this model has no tokenizer.json; send token ids ({\"inputs\": ...})");
  validate_request(request);
  Response r;
  std::vector<PreparedQuestion> prepared = preparer_->prepare(request, r.counts.prefix_cache_hits);
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(prepared.size());
  for (PreparedQuestion& p : prepared) inputs.push_back(std::move(p.ids));
  r.times.prepare_ms = ms_since(t0);
  const std::vector<QuestionOutput> outs = run(inputs, r.counts, r.times);

  const auto t1 = Clock::now();
  const std::vector<std::string>& actions = model_.config().actions;
  for (size_t i = 0; i < outs.size(); ++i) {
    const Question& q = request.questions[i];
    const QuestionOutput& o = outs[i];
    if (o.option_probs.size() != q.options.size())
      throw Error("decision runtime: question " + std::to_string(i) + " has " +
                  std::to_string(q.options.size()) + " options but its input holds " +
                  std::to_string(o.option_probs.size()) + " markers");
    Answer a;
    a.probs = o.option_probs;
    std::vector<size_t> rank(a.probs.size());
    std::iota(rank.begin(), rank.end(), size_t{0});
    std::stable_sort(rank.begin(), rank.end(),
                     [&](size_t x, size_t y) { return a.probs[x] > a.probs[y]; });
    a.answer_index = static_cast<int32_t>(rank[0]);
    a.answer = q.options[rank[0]].label;
    for (size_t k = 0; k < std::min<size_t>(2, rank.size()); ++k)
      a.top2.emplace_back(q.options[rank[k]].label, a.probs[rank[k]]);
    a.entropy = o.features[3];
    a.action = actions[static_cast<size_t>(o.action)];
    a.action_probs = o.action_probs;
    if (q.qtype == QuestionType::Score) {
      double ev = 0;
      for (size_t k = 0; k < a.probs.size(); ++k) ev += a.probs[k] * q.options[k].value;
      a.expected_value = ev;
    }
    a.state_tokens = prepared[i].state_tokens;
    a.state_truncated = prepared[i].state_truncated;
    r.answers.push_back(std::move(a));
  }
  r.times.postprocess_ms = ms_since(t1);
  r.times.total_ms = ms_since(t0);
  return r;
}

namespace {
nlohmann::json counts_json(const Counts& c) {
  return {{"questions", c.questions},
          {"unique_forward_inputs", c.unique_forward_inputs},
          {"dedup_hits", c.dedup_hits},
          {"prefix_cache_hits", c.prefix_cache_hits},
          {"tokens_evaluated", c.tokens_evaluated},
          {"batches", c.batches}};
}
}  // namespace

nlohmann::json Runtime::to_json(const Response& r, const DecisionConfig& config) {
  nlohmann::json results = nlohmann::json::array();
  for (const Answer& a : r.answers) {
    nlohmann::json top2 = nlohmann::json::array();
    for (const auto& [label, p] : a.top2) top2.push_back({{"label", label}, {"p", p}});
    nlohmann::json action_probs = nlohmann::json::object();
    for (size_t k = 0; k < a.action_probs.size(); ++k)
      action_probs[config.actions[k]] = a.action_probs[k];
    nlohmann::json j = {{"answer", a.answer},
                        {"probs", a.probs},
                        {"top2", top2},
                        {"entropy", a.entropy},
                        {"action", a.action},
                        {"action_probs", action_probs},
                        {"state_tokens", a.state_tokens},
                        {"state_truncated", a.state_truncated}};
    if (a.expected_value) j["expected_value"] = *a.expected_value;
    results.push_back(std::move(j));
  }
  return {{"results", results}, {"counts", counts_json(r.counts)}};
}

nlohmann::json Runtime::to_json(const IdsResponse& r, const DecisionConfig& config) {
  nlohmann::json results = nlohmann::json::array();
  for (const QuestionOutput& o : r.results)
    results.push_back({{"option_logits", o.option_logits},
                       {"option_probs", o.option_probs},
                       {"features", o.features},
                       {"action_logits", o.action_logits},
                       {"action_probs", o.action_probs},
                       {"action", config.actions[static_cast<size_t>(o.action)]}});
  return {{"results", results}, {"counts", counts_json(r.counts)}};
}

nlohmann::json Runtime::handle(const nlohmann::json& body) {
  if (is_ids_request(body)) return to_json(decide_ids(parse_ids_request(body)), model_.config());
  return to_json(decide(parse_request(body)), model_.config());
}

}  // namespace infera::decision
