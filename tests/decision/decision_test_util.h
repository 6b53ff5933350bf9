// Shared pieces of the decision tests: the decision-micro model and a text tokenizer whose ids fit
// its 4096-id vocabulary. decision-micro has no tokenizer.json, so the tests build one from
// tests/data/tokenizer_parity/wordpiece_bert.json (a 700-id uncased BERT WordPiece file made by HF
// tokenizers) with its four special tokens moved to the ids decision-micro's config uses
// ([CLS] 4090, [SEP] 4091, [PAD] 4092, [MASK] 4093): so a literal "[MASK]" in a state really would
// tokenize to the marker id unless the runtime neutralises it.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "infera/tokenizer.h"
#include "test_paths.h"

namespace infera::decision::test_util {

inline std::string micro_tokenizer_json() {
  const auto path = test::source_dir() / "tests/data/tokenizer_parity/wordpiece_bert.json";
  std::ifstream in(path);
  // A binary run away from its source tree (a GPU machine) should say so, not fail to parse "".
  if (!in) throw std::runtime_error("cannot open " + path.string() + " (set INFERA_SOURCE_DIR)");
  nlohmann::json j = nlohmann::json::parse(in);
  const std::map<std::string, int> moved = {
      {"[CLS]", 4090}, {"[SEP]", 4091}, {"[PAD]", 4092}, {"[MASK]", 4093}};
  for (auto& t : j["added_tokens"])
    if (moved.count(t["content"])) t["id"] = moved.at(t["content"]);
  for (const auto& [tok, id] : moved) j["model"]["vocab"][tok] = id;
  for (auto& [name, entry] : j["post_processor"]["special_tokens"].items())
    entry["ids"] = {moved.at(name)};
  return j.dump();
}

inline std::shared_ptr<const Tokenizer> micro_tokenizer() {
  return std::make_shared<const Tokenizer>(
      Tokenizer::from_json_text(micro_tokenizer_json(), "micro tokenizer.json"));
}

}  // namespace infera::decision::test_util
