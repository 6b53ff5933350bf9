#include "decision/request.h"

#include <cmath>

#include "infera/error.h"
#include "tokenizer/utf8.h"

namespace infera::decision {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw InvalidArgument("decision request: " + where + ": " + what);
}

void check_text(const std::string& s, const std::string& where, bool allow_empty) {
  if (!allow_empty && s.empty()) fail(where, "must not be empty");
  if (s.size() > kMaxTextBytes)
    fail(where, std::to_string(s.size()) + " bytes, more than the limit of " +
                    std::to_string(kMaxTextBytes));
  if (const auto bad = tok::first_invalid_utf8(s))
    fail(where, "not valid UTF-8 (byte " + std::to_string(*bad) + ")");
}

std::string get_string(const Json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) fail(where, std::string("field '") + key + "' missing");
  if (!it->is_string()) fail(where + "." + key, "must be a string");
  return it->get<std::string>();
}

Question parse_question(const Json& q, const std::string& where) {
  if (!q.is_object()) fail(where, "must be an object");
  static const char* kKnown[] = {"qtype", "text", "options", "criteria", "id"};
  for (const auto& [key, value] : q.items()) {
    bool known = false;
    for (const char* k : kKnown) known |= key == k;
    if (!known) fail(where, "unknown field '" + key + "'");
  }
  Question out;
  const std::string qtype = get_string(q, "qtype", where);
  if (qtype == "choice") {
    out.qtype = QuestionType::Choice;
  } else if (qtype == "score") {
    out.qtype = QuestionType::Score;
  } else {
    fail(where + ".qtype", "unknown qtype '" + qtype + "' (choice or score)");
  }
  out.text = get_string(q, "text", where);
  const auto opts = q.find("options");
  if (opts == q.end() || !opts->is_array()) fail(where + ".options", "must be a list");
  for (size_t k = 0; k < opts->size(); ++k) {
    const Json& o = (*opts)[k];
    const std::string w = where + ".options[" + std::to_string(k) + "]";
    Option opt;
    if (o.is_string()) {
      opt.label = o.get<std::string>();
      if (out.qtype == QuestionType::Score)
        fail(w, "a score option needs {\"label\": ..., \"value\": number}");
    } else if (o.is_object()) {
      for (const auto& [key, value] : o.items())
        if (key != "label" && key != "value") fail(w, "unknown field '" + key + "'");
      opt.label = get_string(o, "label", w);
      const auto v = o.find("value");
      if (v != o.end()) {
        if (!v->is_number()) fail(w + ".value", "must be a number");
        opt.value = v->get<double>();
      } else if (out.qtype == QuestionType::Score) {
        fail(w, "a score option needs a numeric 'value'");
      }
    } else {
      fail(w, "must be a label string or {\"label\", \"value\"}");
    }
    out.options.push_back(std::move(opt));
  }
  if (const auto c = q.find("criteria"); c != q.end()) {
    if (!c->is_array()) fail(where + ".criteria", "must be a list of strings");
    for (size_t k = 0; k < c->size(); ++k) {
      if (!(*c)[k].is_string())
        fail(where + ".criteria[" + std::to_string(k) + "]", "must be a string");
      out.criteria.push_back((*c)[k].get<std::string>());
    }
  }
  return out;
}

}  // namespace

std::string_view question_type_name(QuestionType t) {
  return t == QuestionType::Score ? "score" : "choice";
}

void validate_request(const Request& r) {
  if (r.state.is_discarded()) fail("state", "missing");
  if (r.state.is_string()) check_text(r.state.get_ref<const std::string&>(), "state", true);
  if (r.questions.empty()) fail("questions", "no questions");
  if (r.questions.size() > kMaxQuestions)
    fail("questions", std::to_string(r.questions.size()) + " questions, more than the limit of " +
                          std::to_string(kMaxQuestions));
  for (size_t i = 0; i < r.questions.size(); ++i) {
    const Question& q = r.questions[i];
    const std::string w = "questions[" + std::to_string(i) + "]";
    check_text(q.text, w + ".text", false);
    if (q.options.empty()) fail(w + ".options", "no options (a question needs at least one)");
    if (q.options.size() > kMaxOptions)
      fail(w + ".options", std::to_string(q.options.size()) + " options, more than the limit of " +
                               std::to_string(kMaxOptions));
    for (size_t k = 0; k < q.options.size(); ++k) {
      check_text(q.options[k].label, w + ".options[" + std::to_string(k) + "].label", false);
      if (!std::isfinite(q.options[k].value))
        fail(w + ".options[" + std::to_string(k) + "].value", "must be finite");
    }
    if (q.criteria.size() > kMaxCriteria)
      fail(w + ".criteria", "more than " + std::to_string(kMaxCriteria) + " criteria");
    for (size_t k = 0; k < q.criteria.size(); ++k)
      check_text(q.criteria[k], w + ".criteria[" + std::to_string(k) + "]", false);
  }
}

bool is_ids_request(const Json& body) { return body.is_object() && body.contains("inputs"); }

Request parse_request(const Json& body) {
  if (!body.is_object()) fail("body", "must be a JSON object");
  for (const auto& [key, value] : body.items())
    if (key != "state" && key != "questions") fail("body", "unknown field '" + key + "'");
  Request r;
  const auto state = body.find("state");
  if (state == body.end()) fail("state", "missing");
  r.state = *state;
  const auto qs = body.find("questions");
  if (qs == body.end() || !qs->is_array()) fail("questions", "must be a list");
  if (qs->size() > kMaxQuestions)
    fail("questions", std::to_string(qs->size()) + " questions, more than the limit of " +
                          std::to_string(kMaxQuestions));
  for (size_t i = 0; i < qs->size(); ++i)
    r.questions.push_back(parse_question((*qs)[i], "questions[" + std::to_string(i) + "]"));
  validate_request(r);
  return r;
}

std::vector<std::vector<int32_t>> parse_ids_request(const Json& body) {
  if (!body.is_object()) fail("body", "must be a JSON object");
  for (const auto& [key, value] : body.items())
    if (key != "inputs") fail("body", "unknown field '" + key + "' beside 'inputs'");
  const Json& inputs = body["inputs"];
  if (!inputs.is_array() || inputs.empty()) fail("inputs", "must be a non-empty list of id lists");
  if (inputs.size() > kMaxQuestions)
    fail("inputs", "more than " + std::to_string(kMaxQuestions) + " inputs");
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string w = "inputs[" + std::to_string(i) + "]";
    const Json& ids = inputs[i];
    if (!ids.is_array() || ids.empty()) fail(w, "must be a non-empty list of token ids");
    if (ids.size() > (1u << 16)) fail(w, "too many ids");
    std::vector<int32_t> seq;
    for (const Json& id : ids) {
      if (!id.is_number_integer()) fail(w, "token ids must be integers");
      const int64_t v =
          id.is_number_unsigned()
              ? static_cast<int64_t>(std::min<uint64_t>(id.get<uint64_t>(), INT32_MAX + 1ull))
              : id.get<int64_t>();
      if (v < 0 || v > INT32_MAX) fail(w, "token id " + id.dump() + " is out of range");
      seq.push_back(static_cast<int32_t>(v));
    }
    out.push_back(std::move(seq));
  }
  return out;
}

}  // namespace infera::decision
