// The request pipeline and batching runtime on decision-micro with the test tokenizer of
// decision_test_util.h. Expected values come from the model run one question at a time (itself
// checked against the PyTorch reference by decision_parity_test) and from the tokenizer piece by
// piece, never from the batching code under test.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "decision/runtime.h"
#include "decision_test_util.h"
#include "infera/error.h"
#include "test_compare.h"

namespace infera::decision {
namespace {

using Json = nlohmann::json;
using test::max_abs_diff;
constexpr int32_t kCls = 4090, kSep = 4091, kMask = 4093;

class DecisionRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend(2);
    model_ = DecisionModel::load(test::fixture("decision-micro"), *backend_, {});
    tok_ = test_util::micro_tokenizer();
  }
  Runtime runtime(RuntimeOptions o = {}) { return Runtime(*model_, o, tok_, "micro"); }
  std::vector<int32_t> enc(const std::string& s) { return tok_->encode(s); }

  static Question choice(std::string text, std::vector<std::string> labels) {
    Question q;
    q.text = std::move(text);
    for (auto& l : labels) q.options.push_back({l, 0});
    return q;
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DecisionModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
};

// Twenty questions of different lengths and option counts.
Request varied_request() {
  Request r;
  r.state = "the user asked for a refund after the order arrived damaged and late";
  for (int i = 0; i < 20; ++i) {
    Question q;
    q.qtype = i % 3 == 0 ? QuestionType::Score : QuestionType::Choice;
    q.text = "question " + std::to_string(i) + std::string(static_cast<size_t>(i), '!') +
             " what should happen next";
    for (int k = 0; k <= i % 5; ++k) q.options.push_back({"option " + std::to_string(k), k * 1.5});
    if (i % 4 == 1) q.criteria = {"be fair", "be quick"};
    r.questions.push_back(q);
  }
  return r;
}

TEST_F(DecisionRuntime, LayoutIsPiecesTokenizedSeparately) {
  Request r;
  r.state = "hello world";
  Question q = choice("is it good?", {"yes", "no"});
  q.criteria = {"accuracy"};
  r.questions = {q};
  Preparer prep(model_->config(), *tok_, "micro", 8);
  int64_t hits = 0;
  const auto p = prep.prepare(r, hits);
  std::vector<int32_t> want = {kCls};
  auto add = [&](const std::vector<int32_t>& v) { want.insert(want.end(), v.begin(), v.end()); };
  add(enc("choice"));
  want.push_back(kSep);
  add(enc("is it good?"));
  add(enc("criteria:"));
  add(enc("1. accuracy"));
  want.push_back(kSep);
  want.push_back(kMask);
  add(enc("yes"));
  want.push_back(kMask);
  add(enc("no"));
  want.push_back(kSep);
  add(enc("hello world"));
  want.push_back(kSep);
  EXPECT_EQ(p[0].ids, want);
  EXPECT_FALSE(p[0].state_truncated);
}

TEST_F(DecisionRuntime, AnswersComeBackInCallersOrderAcrossBatches) {
  const Request r = varied_request();
  RuntimeOptions o;
  o.max_batch_questions = 3;
  o.token_budget = 120;
  Runtime rt = runtime(o);
  const Response all = rt.decide(r);
  EXPECT_GE(all.counts.batches, 7);  // 20 questions, at most 3 per batch
  ASSERT_EQ(all.answers.size(), r.questions.size());
  for (size_t i = 0; i < r.questions.size(); ++i) {
    Request one = r;
    one.questions = {r.questions[i]};
    const Response alone = runtime().decide(one);
    SCOPED_TRACE("question " + std::to_string(i));
    EXPECT_LE(max_abs_diff(all.answers[i].probs, alone.answers[0].probs), 1e-5);
    EXPECT_LE(max_abs_diff(all.answers[i].action_probs, alone.answers[0].action_probs), 1e-5);
    EXPECT_EQ(all.answers[i].probs.size(), r.questions[i].options.size());
    EXPECT_EQ(all.answers[i].answer, alone.answers[0].answer);
  }
}

TEST_F(DecisionRuntime, TokenIdFormKeepsInputOrderAcrossBatches) {
  Preparer prep(model_->config(), *tok_, "micro", 64);
  int64_t hits = 0;
  std::vector<std::vector<int32_t>> inputs;
  for (auto& p : prep.prepare(varied_request(), hits)) inputs.push_back(p.ids);
  RuntimeOptions o;
  o.max_batch_questions = 4;
  const IdsResponse r = runtime(o).decide_ids(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto alone = model_->forward(std::vector<std::vector<int32_t>>{inputs[i]});
    EXPECT_LE(max_abs_diff(r.results[i].option_probs, alone[0].option_probs), 1e-5) << i;
  }
  EXPECT_EQ(r.counts.batches, 5);
}

TEST_F(DecisionRuntime, DuplicatesAreComputedOnceWithTheirOwnValues) {
  Request r;
  r.state = Json{{"cart", {1, 2, 3}}, {"user", "ann"}};
  Question a = choice("ship now?", {"yes", "no", "later"});
  Question s;
  s.qtype = QuestionType::Score;
  s.text = "how urgent?";
  s.options = {{"low", 0}, {"high", 10}};
  Question s2 = s;  // same prepared input (values are not tokenized), other values
  s2.options = {{"low", 100}, {"high", 200}};
  r.questions = {a, s, a, s2, a};
  const Response out = runtime().decide(r);
  EXPECT_EQ(out.counts.questions, 5);
  EXPECT_EQ(out.counts.unique_forward_inputs, 2);
  EXPECT_EQ(out.counts.dedup_hits, 3);
  EXPECT_EQ(out.answers[0].probs, out.answers[2].probs);  // bit for bit
  EXPECT_EQ(out.answers[0].probs, out.answers[4].probs);
  EXPECT_EQ(out.answers[1].probs, out.answers[3].probs);
  const double p0 = out.answers[1].probs[0], p1 = out.answers[1].probs[1];
  EXPECT_NEAR(*out.answers[1].expected_value, p0 * 0 + p1 * 10, 1e-9);
  EXPECT_NEAR(*out.answers[3].expected_value, p0 * 100 + p1 * 200, 1e-9);
  // With dedup off the same answers come from 5 forward inputs.
  RuntimeOptions o;
  o.dedup = false;
  const Response plain = runtime(o).decide(r);
  EXPECT_EQ(plain.counts.unique_forward_inputs, 5);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_LE(max_abs_diff(plain.answers[i].probs, out.answers[i].probs), 1e-5);
}

TEST_F(DecisionRuntime, StateIsCutAtEachQuestionsRoom) {
  std::string state;
  for (int i = 0; i < 400; ++i) state += "word" + std::to_string(i % 7) + " and more ";
  const std::vector<int32_t> full = enc(state);
  ASSERT_GT(full.size(), 1000u);
  Request r;
  r.state = state;
  r.questions = {choice("short?", {"a"}),
                 choice(std::string(60, 'x') + " long question?", {"first", "second", "third"})};
  Preparer prep(model_->config(), *tok_, "micro", 8);
  int64_t hits = 0;
  const auto p = prep.prepare(r, hits);
  for (const auto& q : p) {
    EXPECT_EQ(static_cast<int64_t>(q.ids.size()), model_->config().max_length);
    EXPECT_TRUE(q.state_truncated);
    EXPECT_EQ(q.ids.back(), kSep);
    // The kept state ids are the head of the state's own tokenization.
    const size_t start = q.ids.size() - 1 - static_cast<size_t>(q.state_tokens);
    EXPECT_TRUE(
        std::equal(q.ids.begin() + static_cast<long>(start), q.ids.end() - 1, full.begin()));
    EXPECT_EQ(q.ids[start - 1], kSep);
  }
  EXPECT_GT(p[0].state_tokens, p[1].state_tokens);
  const Response out = runtime().decide(r);
  EXPECT_TRUE(out.answers[1].state_truncated);
}

TEST_F(DecisionRuntime, OneOptionAndManyOptions) {
  Request r;
  r.state = "state";
  std::vector<std::string> many;
  for (int k = 0; k < 24; ++k) many.push_back("choice " + std::to_string(k));
  r.questions = {choice("only one?", {"sure"}), choice("which one?", many)};
  const Response out = runtime().decide(r);
  EXPECT_EQ(out.answers[0].probs, std::vector<float>{1.0f});
  EXPECT_EQ(out.answers[0].entropy, 0.0f);
  ASSERT_EQ(out.answers[0].top2.size(), 1u);
  EXPECT_EQ(out.answers[0].answer, "sure");
  ASSERT_EQ(out.answers[1].probs.size(), 24u);
  double sum = 0;
  for (float p : out.answers[1].probs) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  ASSERT_EQ(out.answers[1].top2.size(), 2u);
  EXPECT_GE(out.answers[1].top2[0].second, out.answers[1].top2[1].second);
  EXPECT_EQ(out.answers[1].answer, out.answers[1].top2[0].first);
  EXPECT_GT(out.answers[1].entropy, 0.0f);
  EXPECT_LE(out.answers[1].entropy, 1.0f + 1e-6f);
}

TEST_F(DecisionRuntime, ScoreExpectedValue) {
  Request r;
  r.state = "state";
  Question s;
  s.qtype = QuestionType::Score;
  s.text = "rate it";
  s.options = {{"1", 1}, {"2", 2}, {"3", 3}, {"4", 4}, {"5", -5.5}};
  r.questions = {s};
  const Response out = runtime().decide(r);
  double ev = 0;
  for (size_t k = 0; k < 5; ++k)
    ev += static_cast<double>(out.answers[0].probs[k]) * s.options[k].value;
  ASSERT_TRUE(out.answers[0].expected_value.has_value());
  EXPECT_NEAR(*out.answers[0].expected_value, ev, 1e-12);
  const Json j = runtime().handle(Json::parse(
      R"({"state": "x", "questions": [{"qtype": "choice", "text": "t", "options": ["a", "b"]}]})"));
  EXPECT_FALSE(j["results"][0].contains("expected_value"));
}

TEST_F(DecisionRuntime, SpecialTokenLiteralsInTheStateNeverBecomeMarkers) {
  // The tokenizer itself reads the literal as the marker id: the runtime must not.
  const auto raw = enc("look [MASK] here");
  ASSERT_NE(std::find(raw.begin(), raw.end(), kMask), raw.end());
  Request r;
  r.state = "a [MASK] b [mask] c [CLS] d [SEP] e [PAD] [[MASK]MASK]";
  Question q = choice("which [MASK]?", {"x [SEP] y", "z"});
  r.questions = {q};
  Preparer prep(model_->config(), *tok_, "micro", 8);
  int64_t hits = 0;
  const auto p = prep.prepare(r, hits);
  EXPECT_EQ(std::count(p[0].ids.begin(), p[0].ids.end(), kMask), 2);
  EXPECT_EQ(std::count(p[0].ids.begin(), p[0].ids.end(), kCls), 1);
  EXPECT_EQ(std::count(p[0].ids.begin(), p[0].ids.end(), kSep), 4);
  const Response out = runtime().decide(r);
  EXPECT_EQ(out.answers[0].probs.size(), 2u);
  // The same holds for a structured state.
  r.state = Json{{"note", "[MASK][MASK]"}};
  EXPECT_EQ(runtime().decide(r).answers[0].probs.size(), 2u);
}

TEST_F(DecisionRuntime, StructuredStateIsCanonicalJson) {
  EXPECT_EQ(serialize_state(Json::parse(R"({"b": [1, 2.5, "x"], "a": {"d": null, "c": true}})")),
            R"({"a":{"c":true,"d":null},"b":[1,2.5,"x"]})");
  EXPECT_EQ(serialize_state(Json("plain text")), "plain text");
}

TEST_F(DecisionRuntime, DeterministicOver100Calls) {
  Runtime rt = runtime();
  const Json body = Runtime::to_json(rt.decide(varied_request()), model_->config());
  for (int i = 0; i < 100; ++i) {
    const Json again = Runtime::to_json(rt.decide(varied_request()), model_->config());
    ASSERT_EQ(again["results"].dump(), body["results"].dump()) << "call " << i;
  }
}

TEST_F(DecisionRuntime, PrefixCacheHitsOnRepeatedQuestions) {
  Runtime rt = runtime();
  const Request r = varied_request();
  EXPECT_EQ(rt.decide(r).counts.prefix_cache_hits, 0);
  Request other = r;
  other.state = "a different state";
  const Response second = rt.decide(other);
  EXPECT_EQ(second.counts.prefix_cache_hits, 20);
  // A cache of 1 entry still answers the same.
  RuntimeOptions o;
  o.prefix_cache_entries = 1;
  const Response small = runtime(o).decide(other);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(small.answers[i].probs, second.answers[i].probs);
}

TEST_F(DecisionRuntime, MalformedRequestsFailWhole) {
  Runtime rt = runtime();
  struct Bad {
    const char* body;
    const char* expect;
  };
  const Bad bad[] = {
      {R"({"state": "s", "questions": [{"qtype": "choice", "text": "t", "options": []}]})",
       "no options"},
      {R"({"state": "s", "questions": [{"qtype": "rank", "text": "t", "options": ["a"]}]})",
       "unknown qtype 'rank'"},
      {R"({"state": "s", "questions": [{"qtype": "score", "text": "t", "options": ["a"]}]})",
       "score option needs"},
      {R"({"state": "s", "questions": [{"qtype": "score", "text": "t", "options": [{"label": "a"}]}]})",
       "numeric 'value'"},
      {R"({"state": "s", "questions": []})", "no questions"},
      {R"({"questions": [{"qtype": "choice", "text": "t", "options": ["a"]}]})", "state: missing"},
      {R"({"state": "s", "questions": [{"qtype": "choice", "text": "", "options": ["a"]}]})",
       "text: must not be empty"},
      {R"({"state": "s", "questions": [{"qtype": "choice", "text": "t", "options": ["a"], "x": 1}]})",
       "unknown field 'x'"},
      {R"({"inputs": [[4090, 5, 4091]]})", "no option marker"},
      {R"({"inputs": [[4090, 4093, 99999]]})", "outside the vocabulary"},
      {R"({"inputs": []})", "non-empty list"},
  };
  for (const Bad& b : bad) {
    std::string err;
    try {
      rt.handle(Json::parse(b.body));
    } catch (const InvalidArgument& e) {
      err = e.what();
    }
    EXPECT_NE(err.find(b.expect), std::string::npos) << b.body << " -> " << err;
  }
  // A question whose prefix alone exceeds max_length fails the whole request (no partial answers).
  Request r;
  r.state = "s";
  std::vector<std::string> labels;
  for (int k = 0; k < 200; ++k) labels.push_back("label number " + std::to_string(k));
  r.questions = {choice("fine", {"a"}), choice("too many options", labels)};
  EXPECT_THROW(rt.decide(r), InvalidArgument);
  // Invalid UTF-8 through the library API (the JSON parser rejects it before that).
  r.questions = {choice("fine", {"a"})};
  r.state = std::string("bad \xff byte");
  try {
    rt.decide(r);
    ADD_FAILURE() << "invalid UTF-8 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos);
  }
  r.state = std::string(kMaxTextBytes + 1, 'a');
  EXPECT_THROW(rt.decide(r), InvalidArgument);
  RuntimeOptions o;
  o.max_batch_questions = 65;
  EXPECT_THROW(runtime(o), InvalidArgument);
}

}  // namespace
}  // namespace infera::decision
