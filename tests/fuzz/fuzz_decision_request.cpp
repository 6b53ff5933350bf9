// Decision requests (`infera decide --request`, the library's Runtime::handle): JSON text through
// the same UTF-8 check, capped parser, request parsing, preparation, batching and forward as the
// command, on the decision-micro checkpoint with the WordPiece test tokenizer (tests/data, its
// special tokens moved to decision-micro's ids, as tests/decision does). Every input is refused
// with InvalidArgument, or every question gets an answer with finite probabilities summing to 1
// over its own options, an answer label among them, an expected value inside its values' range,
// and counts that add up; a second run of the same request gives the same bytes.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/json_limits.h"
#include "decision/runtime.h"
#include "fuzz_common.h"
#include "infera/error.h"
#include "tokenizer/utf8.h"

using namespace infera;
using Json = nlohmann::json;

namespace {

struct Fixture {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<decision::DecisionModel> model;
  std::unique_ptr<decision::Runtime> runtime;
};

std::shared_ptr<const Tokenizer> micro_tokenizer() {
  std::ifstream in(std::filesystem::path(INFERA_SOURCE_DIR) /
                   "tests/data/tokenizer_parity/wordpiece_bert.json");
  Json j = Json::parse(in);
  const std::map<std::string, int> moved = {
      {"[CLS]", 4090}, {"[SEP]", 4091}, {"[PAD]", 4092}, {"[MASK]", 4093}};
  for (auto& t : j["added_tokens"])
    if (moved.count(t["content"])) t["id"] = moved.at(t["content"]);
  for (const auto& [tok, id] : moved) j["model"]["vocab"][tok] = id;
  for (auto& [name, entry] : j["post_processor"]["special_tokens"].items())
    entry["ids"] = {moved.at(name)};
  return std::make_shared<const Tokenizer>(Tokenizer::from_json_text(j.dump()));
}

Fixture& fixture() {
  static Fixture f = [] {
    const auto dir = fuzz::shared_dir() / "fixtures" / "decision-micro";
    if (!std::filesystem::exists(dir / "model.safetensors")) {
      std::fprintf(stderr, "fuzz: %s not found (set INFERA_SHARED_DIR)\n", dir.c_str());
      std::exit(2);
    }
    Fixture x;
    x.backend = make_cpu_backend(1);
    x.model = decision::DecisionModel::load(dir, *x.backend, {});
    decision::RuntimeOptions o;
    o.max_batch_questions = 3;  // several batches even for small requests
    o.token_budget = 300;
    o.prefix_cache_entries = 4;  // eviction is exercised too
    x.runtime = std::make_unique<decision::Runtime>(*x.model, o, micro_tokenizer(), "micro");
    return x;
  }();
  return f;
}

void check_text_response(const Json& body, const Json& out) {
  const Json& qs = body["questions"];
  const Json& results = out["results"];
  fuzz::check(results.size() == qs.size(), "one result per question");
  const Json& c = out["counts"];
  fuzz::check(c["questions"] == qs.size(), "questions counted");
  fuzz::check(c["unique_forward_inputs"] <= c["questions"] &&
                  c["unique_forward_inputs"].get<int64_t>() >= 1,
              "unique inputs within [1, questions]");
  for (size_t i = 0; i < qs.size(); ++i) {
    const Json& q = qs[i];
    const Json& r = results[i];
    fuzz::check(r["probs"].size() == q["options"].size(), "one probability per option");
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    bool label_found = false;
    for (size_t k = 0; k < q["options"].size(); ++k) {
      const double p = r["probs"][k].get<double>();
      fuzz::check(std::isfinite(p) && p >= 0 && p <= 1, "probability in [0, 1]");
      sum += p;
      const Json& o = q["options"][k];
      const std::string label =
          o.is_string() ? o.get<std::string>() : o["label"].get<std::string>();
      label_found |= label == r["answer"].get<std::string>();
      if (o.is_object() && o.contains("value")) {
        lo = std::fmin(lo, o["value"].get<double>());
        hi = std::fmax(hi, o["value"].get<double>());
      }
    }
    fuzz::check(std::fabs(sum - 1.0) < 1e-4, "probabilities sum to 1");
    fuzz::check(label_found, "the answer is one of the question's labels");
    const double e = r["entropy"].get<double>();
    fuzz::check(std::isfinite(e) && e >= -1e-6 && e <= 1 + 1e-5, "normalized entropy in [0, 1]");
    if (q["qtype"] == "score") {
      const double ev = r["expected_value"].get<double>();
      const double slack = 1e-5 * (1 + std::fabs(lo) + std::fabs(hi));
      fuzz::check(ev >= lo - slack && ev <= hi + slack, "expected value within the values");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  const std::string text(reinterpret_cast<const char*>(data), size);
  Json body, out;
  try {
    if (tok::first_invalid_utf8(text)) return 0;
    body = parse_json_capped<Json, InvalidArgument>(text, "request");
    out = f.runtime->handle(body);
  } catch (const InvalidArgument&) {
    return 0;
  }
  if (decision::is_ids_request(body)) {
    fuzz::check(out["results"].size() == body["inputs"].size(), "one result per input");
  } else {
    check_text_response(body, out);
  }
  fuzz::check(f.runtime->handle(body)["results"].dump() == out["results"].dump(),
              "the same request gave different results");
  return 0;
}
