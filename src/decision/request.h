// Decision requests (specs/decision-model.md "Questions and input layout"), as the library API
// takes them and as the CLI reads them from JSON. Parsing checks everything a forward pass relies
// on, so a malformed request fails whole, with a message naming the question and field, before
// any work is done.
//
// Text form:   {"state": "text" | any JSON value, "questions": [
//                 {"qtype": "choice", "text": "...", "options": ["a", "b"], "criteria": ["..."]},
//                 {"qtype": "score", "text": "...", "options": [{"label": "low", "value": 1},
//                 ...]}]}
// Token-id form: {"inputs": [[ids...], ...]} (each a complete prepared question).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace infera::decision {

enum class QuestionType : uint8_t { Choice, Score };
std::string_view question_type_name(QuestionType t);  // "choice", "score"

struct Option {
  std::string label;
  double value = 0;  // score questions only
};

struct Question {
  QuestionType qtype = QuestionType::Choice;
  std::string text;
  std::vector<Option> options;        // >= 1
  std::vector<std::string> criteria;  // optional, in order
};

struct Request {
  // The state: a JSON string is used as its text; any other JSON value (object, array, number...)
  // is serialized canonically (keys sorted, no whitespace) first.
  nlohmann::json state;
  std::vector<Question> questions;
};

// Limits that keep a request's work bounded; exceeding one is a request error.
inline constexpr size_t kMaxQuestions = 4096;
inline constexpr size_t kMaxOptions = 256;
inline constexpr size_t kMaxCriteria = 64;
inline constexpr size_t kMaxTextBytes = 1 << 20;  // any one string, the serialized state included

// Checks a request built through the library API (same rules as parse_request). InvalidArgument.
void validate_request(const Request& request);
// A request from JSON: text form only (see parse_ids_request for the other). InvalidArgument
// naming the field ("questions[3].options[1].value: ...").
Request parse_request(const nlohmann::json& body);
// The token-id form: {"inputs": [[...], ...]}. Ids are range-checked by the model.
std::vector<std::vector<int32_t>> parse_ids_request(const nlohmann::json& body);
// Whether `body` is the token-id form.
bool is_ids_request(const nlohmann::json& body);

}  // namespace infera::decision
