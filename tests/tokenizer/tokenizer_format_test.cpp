// tokenizer.json handling on small hand-written files: malformed input gives FormatError naming the
// component, and added-token matching follows tokenizers (expected ids were checked against
// tokenizers 0.23.3 with the same JSON; it only accepts merges all in one form, we accept a mix).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infera/error.h"
#include "infera/tokenizer.h"
#include "tokenizer/normalizer.h"

namespace infera {
namespace {

using nlohmann::json;

// A byte-level BPE over a handful of tokens, shaped like Qwen's file.
json tiny() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 12, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 13, "content": "[L]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": false},
      {"id": 14, "content": "[R]", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": false},
      {"id": 15, "content": "[W]", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
      {"id": 16, "content": "<s>x", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}
    ],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+|\\p{N}|[^\\s\\p{L}\\p{N}]+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5, "ĠĠ": 6, "x": 7, "[": 8, "]": 9,
                        "1": 10, "2": 11},
              "merges": ["a b", ["ab", "c"], "Ġ Ġ"]}
  })");
}

Tokenizer make(const json& j) { return Tokenizer::from_json_text(j.dump(), "tiny.json"); }

std::string format_error(const json& j) {
  try {
    make(j);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no FormatError)";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(TokenizerFormat, TinyTokenizerEncodes) {
  const Tokenizer tok = make(tiny());
  EXPECT_EQ(tok.vocab_size(), 17);
  EXPECT_EQ(tok.encode("abc ab"), (std::vector<int32_t>{5, 3, 4}));
  EXPECT_EQ(tok.encode("  12"), (std::vector<int32_t>{6, 10, 11}));
  EXPECT_EQ(tok.decode(tok.encode("abc  ab")), "abc  ab");
}

TEST(TokenizerFormat, AddedTokensLongestFirstAndStripping) {
  const Tokenizer tok = make(tiny());
  // Longest match wins: "<s>x" (16) rather than "<s>" (12) followed by "x".
  EXPECT_EQ(tok.encode("<s>x<s>a"), (std::vector<int32_t>{16, 12, 0}));
  // lstrip absorbs the whitespace before [L]; rstrip the whitespace after [R].
  EXPECT_EQ(tok.encode("a  [L]b"), (std::vector<int32_t>{0, 13, 1}));
  EXPECT_EQ(tok.encode("a[R]  b"), (std::vector<int32_t>{0, 14, 1}));
  // single_word: only when not glued to a word character on either side.
  EXPECT_EQ(tok.encode("a [W] b"), (std::vector<int32_t>{0, 3, 15, 3, 1}));
  EXPECT_EQ(tok.encode("a[W]"), (std::vector<int32_t>{0, 8, 9}));  // "W" is not in the vocab
  EXPECT_EQ(tok.decode(tok.encode("<s>ab"), /*skip_special_tokens=*/true), "ab");
}

TEST(TokenizerFormat, StringAndPairMergesAreEquivalent) {
  json j = tiny();
  j["model"]["merges"] = json::array({json::array({"a", "b"}), "ab c", json::array({"Ġ", "Ġ"})});
  EXPECT_EQ(make(j).encode("abc ab"), (std::vector<int32_t>{5, 3, 4}));
}

TEST(TokenizerFormat, LoadsFromFileAndFolderAndReportsMissingFile) {
  EXPECT_THROW(Tokenizer::load("/nonexistent/dir/for/infera"), IoError);
}

TEST(TokenizerFormat, UnknownComponentTypesAreNamed) {
  json j = tiny();
  j["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_TRUE(contains(format_error(j), "normalizer: unsupported type 'Precompiled'"))
      << format_error(j);

  j = tiny();
  j["normalizer"]["normalizers"].push_back({{"type", "StripAccents"}});
  EXPECT_TRUE(contains(format_error(j), "'StripAccents'")) << format_error(j);

  j = tiny();
  j["pre_tokenizer"] = {{"type", "Digits"}};
  EXPECT_TRUE(contains(format_error(j), "pre_tokenizer: unsupported type 'Digits'"));

  j = tiny();
  j["decoder"] = {{"type", "CTC"}};
  EXPECT_TRUE(contains(format_error(j), "decoder: unsupported type 'CTC'"));

  j = tiny();
  j["model"]["type"] = "Unigram";
  EXPECT_TRUE(contains(format_error(j), "model: unsupported type 'Unigram'"));

  j = tiny();
  j["post_processor"] = {{"type", "Nonsense"}};
  EXPECT_TRUE(contains(format_error(j), "post_processor: unsupported type 'Nonsense'"));

  j = tiny();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_TRUE(contains(format_error(j), "'Sideways'"));
}

TEST(TokenizerFormat, MissingOrBrokenModel) {
  json j = tiny();
  j.erase("model");
  const std::string msg = format_error(j);
  EXPECT_TRUE(contains(msg, "tiny.json") && contains(msg, "missing field 'model'")) << msg;

  j = tiny();
  j["model"].erase("vocab");
  EXPECT_TRUE(contains(format_error(j), "missing field 'vocab'"));

  j = tiny();
  j["model"]["vocab"]["a"] = -3;
  EXPECT_TRUE(contains(format_error(j), "vocab entry 'a'"));

  j = tiny();
  j["model"]["dropout"] = 0.1;
  EXPECT_TRUE(contains(format_error(j), "dropout"));
}

TEST(TokenizerFormat, BadMerges) {
  json j = tiny();
  j["model"]["merges"].push_back("a z");
  EXPECT_TRUE(contains(format_error(j), "merge #3: token 'z' is not in the vocab"))
      << format_error(j);

  j = tiny();
  j["model"]["merges"].push_back("b c");  // "bc" is not in the vocab
  EXPECT_TRUE(contains(format_error(j), "merged token 'bc'")) << format_error(j);

  j = tiny();
  j["model"]["merges"].push_back("abc");
  EXPECT_TRUE(contains(format_error(j), "merge #3 'abc' is not of the form 'a b'"));

  j = tiny();
  j["model"]["merges"].push_back(42);
  EXPECT_TRUE(contains(format_error(j), "merge #3 must be"));

  j = tiny();
  j["model"]["merges"] = "a b";
  EXPECT_TRUE(contains(format_error(j), "'merges' must be an array"));
}

TEST(TokenizerFormat, OtherMalformedInput) {
  EXPECT_THROW(Tokenizer::from_json_text("{not json", "x.json"), FormatError);
  EXPECT_THROW(Tokenizer::from_json_text("[]", "x.json"), FormatError);
  EXPECT_THROW(Tokenizer::from_json_text("", "x.json"), FormatError);

  json j = tiny();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([a-";
  EXPECT_TRUE(contains(format_error(j), "does not compile")) << format_error(j);

  j = tiny();
  j["added_tokens"][0].erase("content");
  EXPECT_TRUE(contains(format_error(j), "added_tokens[0]: missing field 'content'"));

  j = tiny();
  j["added_tokens"][0]["id"] = "seven";
  EXPECT_TRUE(contains(format_error(j), "added_tokens[0]: invalid id"));

  j = tiny();
  j["normalizer"]["normalizers"] = 5;
  EXPECT_TRUE(contains(format_error(j), "'normalizers' must be an array"));

  j = tiny();
  j["model"]["vocab"] = json::array();
  EXPECT_TRUE(contains(format_error(j), "'vocab' must be an object"));
}

TEST(TokenizerFormat, SplitBehaviorsAndLiteralPattern) {
  // Without ByteLevel the model sees characters; the vocab covers them directly.
  json j = tiny();
  j["decoder"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"String", "-"}}},
                        {"behavior", "Removed"},
                        {"invert", false}};
  j["model"]["vocab"]["-"] = 17;
  EXPECT_EQ(make(j).encode("ab-c"), (std::vector<int32_t>{4, 2}));
  j["pre_tokenizer"]["behavior"] = "MergedWithPrevious";
  EXPECT_EQ(make(j).encode("ab-c"), (std::vector<int32_t>{4, 17, 2}));
  // The default decoder joins tokens with spaces (tokenizers' behaviour without a decoder).
  EXPECT_EQ(make(j).decode(std::vector<int32_t>{4, 17, 2}), "ab - c");
}

// GPT-2 / ModernBERT style: ByteLevel does the regex split itself and may add a prefix space.
TEST(TokenizerFormat, ByteLevelWithRegexAndPrefixSpace) {
  json j = tiny();
  j["added_tokens"] = json::array();
  j["model"]["merges"] = {"a b", "ab c", "Ġ Ġ", "Ġ a", "Ġa b"};
  j["model"]["vocab"]["Ġa"] = 17;
  j["model"]["vocab"]["Ġab"] = 18;
  j["pre_tokenizer"] = {{"type", "ByteLevel"},
                        {"add_prefix_space", true},
                        {"trim_offsets", true},
                        {"use_regex", true}};
  const Tokenizer tok = make(j);
  EXPECT_EQ(tok.encode("ab abc  a"), (std::vector<int32_t>{3, 4, 3, 5, 3, 17}));
  EXPECT_EQ(tok.encode("a'll 12"), (std::vector<int32_t>{17, 3, 10, 11}));  // ' and l: not in vocab
  EXPECT_EQ(tok.encode(" a"), (std::vector<int32_t>{17}));
  EXPECT_EQ(tok.decode(tok.encode("ab abc  a")), " ab abc  a");
}

TEST(TokenizerFormat, NormalizationFormsOnlyTouchWhatChanges) {
  // Expected strings from Python's unicodedata.normalize; the input mixes ASCII runs (copied as is)
  // with decomposed, out-of-order, Hangul-jamo and compatibility characters.
  const std::string in =
      "e\u0301 caf\u00e9 A\u030a\u0327 \u1100\u1161\u11a8 x\u0323\u0307y \u212b "
      "\u00bd\u00a0q\u0301\u0300";
  const auto norm = [&](const char* form) {
    return tok::make_normalizer(json{{"type", form}})->normalize(in);
  };
  EXPECT_EQ(norm("NFC"),
            "\u00e9 caf\u00e9 \u00c5\u0327 \uac01 \u1e8b\u0323y \u00c5 \u00bd\u00a0q\u0301\u0300");
  EXPECT_EQ(norm("NFKC"),
            "\u00e9 caf\u00e9 \u00c5\u0327 \uac01 \u1e8b\u0323y \u00c5 1\u20442 q\u0301\u0300");
  EXPECT_EQ(norm("NFD"),
            "e\u0301 cafe\u0301 A\u0327\u030a \u1100\u1161\u11a8 x\u0323\u0307y A\u030a "
            "\u00bd\u00a0q\u0301\u0300");
  EXPECT_EQ(tok::make_normalizer(json{{"type", "NFC"}})->normalize("plain ascii"), "plain ascii");
}

}  // namespace
}  // namespace infera
