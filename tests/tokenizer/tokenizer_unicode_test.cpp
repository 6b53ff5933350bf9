// Every code point through the character classes that tokenizers' BERT normalizer, BERT
// pre-tokenizer and Lowercase normalizer use, against what tokenizers itself does with each one
// (tests/data/tokenizer_parity/unicode_props.json, probed by make_tokenizer_parity.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

using nlohmann::json;

json props() {
  std::ifstream in(std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" /
                   "tokenizer_parity" / "unicode_props.json");
  EXPECT_TRUE(in);
  return json::parse(in);
}

std::vector<bool> member(const json& ranges) {
  std::vector<bool> in(0x110000, false);
  for (const json& r : ranges) {
    for (uint32_t cp = r[0]; cp <= r[1].get<uint32_t>(); ++cp) in[cp] = true;
  }
  return in;
}

bool surrogate(char32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

// Counts code points where `ours` and the recorded set disagree; prints the first few.
template <typename F>
int disagreements(const char* what, const std::vector<bool>& theirs, F ours,
                  const std::vector<bool>* only_where_false = nullptr) {
  int bad = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (surrogate(cp) || (only_where_false && (*only_where_false)[cp])) continue;
    if (ours(cp) != theirs[cp] && ++bad <= 5) {
      ADD_FAILURE() << what << ": U+" << std::hex << static_cast<uint32_t>(cp) << " is "
                    << (theirs[cp] ? "" : "not ") << "in tokenizers' set";
    }
  }
  return bad;
}

TEST(UnicodeProps, MatchTokenizersOnEveryCodePoint) {
  const json p = props();
  // clean_text also drops NUL and U+FFFD, which are not of these categories' making.
  EXPECT_EQ(
      disagreements("control", member(p["control_removed"]),
                    [](char32_t cp) { return cp == 0 || cp == 0xFFFD || is_bert_control(cp); }),
      0);
  EXPECT_EQ(disagreements("punctuation", member(p["punctuation"]), is_bert_punctuation), 0);
  const std::vector<bool> unstable = member(p["nfd_unstable"]);
  EXPECT_EQ(
      disagreements("nonspacing mark", member(p["nonspacing_mark"]), is_nonspacing_mark, &unstable),
      0);

  std::vector<std::string> lower(0x110000);
  for (const json& e : p["lowercase"]) {
    std::string s;
    for (const json& c : e[1]) append_utf8(c.get<uint32_t>(), s);
    lower[e[0].get<uint32_t>()] = s;
  }
  ASSERT_GT(p["lowercase"].size(), 1000u);
  int bad = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (surrogate(cp)) continue;
    std::string expected = lower[cp], ours;
    if (expected.empty()) append_utf8(cp, expected);
    append_lowercase(cp, ours);
    if (ours != expected && ++bad <= 5) {
      ADD_FAILURE() << "lowercase of U+" << std::hex << static_cast<uint32_t>(cp);
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace infera::tok
