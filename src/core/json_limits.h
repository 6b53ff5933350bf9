// JSON from untrusted files and requests, parsed with its nesting depth capped while it is parsed.
// nlohmann's parser itself is iterative, but what comes after it walks a value recursively, one
// stack frame per level (dump() for an error message, copies, our own renderers): a value nested
// 100,000 levels deep, a few hundred KB of "[[[[", would overflow the stack there. The cap stops
// such input inside the parser, before any deep value exists, so that no later code has to care.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "infera/error.h"

namespace infera {

// 128 levels: serde_json's default recursion limit, which Hugging Face tokenizers applies to
// tokenizer.json. Real config, tokenizer, tool and request JSON nest fewer than 10 levels.
constexpr int kMaxJsonDepth = 128;

// Parses `text`, throwing `Err` (FormatError for files, InvalidArgument for requests) with
// "WHAT: not valid JSON: ..." or "WHAT: JSON nests deeper than N levels". The top-level object or
// array is level 1.
template <typename Json = nlohmann::json, typename Err = FormatError>
Json parse_json_capped(std::string_view text, const std::string& what,
                       int max_depth = kMaxJsonDepth) {
  const typename Json::parser_callback_t cap = [&](int depth, typename Json::parse_event_t event,
                                                   Json&) {
    // `depth` counts the containers already open around this event.
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw Err(what + ": JSON nests deeper than " + std::to_string(max_depth) + " levels");
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cap);
  } catch (const typename Json::exception& e) {
    throw Err(what + ": not valid JSON: " + e.what());
  }
}

}  // namespace infera
