// Parity with Hugging Face `tokenizers` on the small tokenizer files that
// tests/data/make_tokenizer_parity.py builds with that library (WordPiece/BERT, byte-level BPE in
// the ModernBERT and RoBERTa shapes, BPE with byte fallback in the Gemma/mmBERT shape, Metaspace
// in the Llama and T5 shapes, Prepend/Replace/Strip normalizers). Every id, type id and decoded
// string must be equal, and a StreamDecoder fed the same ids must add up to the same text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infera/error.h"
#include "infera/tokenizer.h"
#include "test_paths.h"
#include "tokenizer/utf8.h"

namespace infera {
namespace {

using nlohmann::json;

std::filesystem::path data_dir() {
  return std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" / "tokenizer_parity";
}

std::vector<json> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << "cannot open " << file;
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }

// Streams `ids` through a StreamDecoder; every piece must be valid UTF-8.
std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                          bool& pieces_valid) {
  StreamDecoder stream(tok, skip);
  std::string text;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    pieces_valid = pieces_valid && !tok::first_invalid_utf8(piece);
    text += piece;
  }
  text += stream.flush();
  return text;
}

// Compares everything one case line records; returns the number of mismatches (and reports them).
int check_case(const Tokenizer& tok, const json& c, const std::string& where) {
  int bad = 0;
  const auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      if (++bad <= 3) ADD_FAILURE() << where << ": " << what << "\n  case: " << c.dump();
    }
  };
  std::vector<int32_t> decode_ids;
  if (c.contains("text")) {
    const std::string text = c["text"];
    expect(tok.encode(text) == ids_of(c["ids"]), "encode without special tokens");
    expect(tok.encode(text, false) == ids_of(c["ids"]), "encode(text, false)");
    const std::vector<int32_t> special = tok.encode(text, true);
    expect(special == ids_of(c["ids_special"]), "encode with special tokens");
    if (c.contains("pair")) {
      const std::string pair = c["pair"];
      const Encoding e = tok.encode(text, pair, true);
      expect(e.ids == ids_of(c["pair_ids"]), "pair ids");
      expect(e.type_ids == ids_of(c["pair_type_ids"]), "pair type ids");
      const Encoding p = tok.encode(text, pair, false);
      expect(p.ids == ids_of(c["pair_ids_plain"]), "pair ids without special tokens");
      expect(p.type_ids == ids_of(c["pair_type_ids_plain"]), "pair type ids without special");
    }
    decode_ids = ids_of(c["ids_special"]);
  } else {
    decode_ids = ids_of(c["decode_ids"]);
  }
  if (!c.contains("decoded")) return bad;  // tokenizers itself panics on this one (see script)
  for (const bool skip : {false, true}) {
    const std::string expected = c[skip ? "decoded_skip" : "decoded"];
    expect(tok.decode(decode_ids, skip) == expected,
           std::string("decode") + (skip ? " skipping special tokens" : "") + " gave '" +
               tok.decode(decode_ids, skip) + "'");
    bool valid = true;
    expect(stream_decode(tok, decode_ids, skip, valid) == expected, "stream decode");
    expect(valid, "stream piece not valid UTF-8");
  }
  return bad;
}

class TokenizerParity : public testing::TestWithParam<const char*> {};

TEST_P(TokenizerParity, MatchesHuggingFaceTokenizers) {
  const std::string name = GetParam();
  const Tokenizer tok = Tokenizer::load(data_dir() / (name + ".json"));
  const std::vector<json> cases = read_lines(data_dir() / (name + ".cases.jsonl"));
  // The script writes 260 texts and up to 60 decodes of random ids per file.
  ASSERT_GE(cases.size(), 300u);
  int bad = 0, texts = 0, pairs = 0, decodes = 0;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    bad += check_case(tok, cases[k], name + " case " + std::to_string(k));
    texts += cases[k].contains("text");
    pairs += cases[k].contains("pair");
    decodes += cases[k].contains("decoded");
  }
  EXPECT_EQ(bad, 0) << name;
  EXPECT_GE(texts, 260);
  EXPECT_GE(pairs, 80);
  EXPECT_GE(decodes, 300);
}

INSTANTIATE_TEST_SUITE_P(Files, TokenizerParity,
                         testing::Values("wordpiece_bert", "wordpiece_cased",
                                         "bytelevel_modernbert", "bytelevel_roberta",
                                         "bytefallback_gemma", "metaspace_llama", "metaspace_split",
                                         "legacy_prepend"),
                         [](const auto& info) { return std::string(info.param); });

// Issue 6: a model's embedding can have more rows than the tokenizer has tokens (Qwen3: 151,669
// tokens, 151,936 rows); generated pad ids are skipped in the text, as tokenizers' decode does,
// and never abort decode or a stream.
TEST(TokenizerParity, UnknownIdsAreSkippedLikeHuggingFace) {
  const Tokenizer tok = Tokenizer::load(test::shared_dir() / "models" / "qwen3-0.6b");
  ASSERT_EQ(tok.vocab_size(), 151669);
  const std::vector<json> cases = read_lines(data_dir() / "qwen3_unknown_ids.jsonl");
  ASSERT_GE(cases.size(), 20u);
  int bad = 0;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    bad += check_case(tok, cases[k], "qwen3 unknown ids case " + std::to_string(k));
  }
  EXPECT_EQ(bad, 0);
  // Ids a model cannot produce at all are skipped too, never an abort.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{-1, 785, 1 << 30}), "The");
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(151935), "");
  EXPECT_EQ(stream.push(785), "The");
  EXPECT_EQ(stream.push(-7), "");
  EXPECT_EQ(stream.flush(), "");
  EXPECT_THROW(tok.id_to_token(151700), InvalidArgument);  // a lookup still says it is unknown
}

}  // namespace
}  // namespace infera
