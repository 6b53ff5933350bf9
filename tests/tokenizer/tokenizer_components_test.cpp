// The pieces added for encoder tokenizers, one at a time: malformed JSON for each gives a
// FormatError naming the component, and streamed decoding emits text as soon as the decoder chain
// has made it final. Parity of the values themselves is tokenizer_parity_test.cpp's job.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infera/error.h"
#include "infera/tokenizer.h"

namespace infera {
namespace {

using nlohmann::json;

std::filesystem::path parity_file(const std::string& name) {
  return std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" / "tokenizer_parity" /
         (name + ".json");
}

json load_json(const std::string& name) {
  std::ifstream in(parity_file(name));
  return json::parse(in);
}

std::string format_error(const json& j) {
  try {
    Tokenizer::from_json_text(j.dump(), "t.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no FormatError)";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

int32_t id(const Tokenizer& tok, const std::string& token) {
  const auto v = tok.token_to_id(token);
  EXPECT_TRUE(v.has_value()) << token;
  return v.value_or(-1);
}

TEST(TokenizerComponents, MalformedPiecesAreNamed) {
  json j = load_json("metaspace_split");
  j["pre_tokenizer"]["add_prefix_space"] = false;  // contradicts prepend_scheme "always"
  EXPECT_TRUE(has(format_error(j), "pre_tokenizer Metaspace: add_prefix_space does not match"))
      << format_error(j);
  j = load_json("metaspace_split");
  j["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  EXPECT_TRUE(has(format_error(j), "unsupported prepend_scheme 'sometimes'")) << format_error(j);
  j = load_json("metaspace_split");
  j["pre_tokenizer"]["replacement"] = "ab";
  EXPECT_TRUE(has(format_error(j), "'replacement' must be a single character")) << format_error(j);

  j = load_json("wordpiece_bert");
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "[NOPE]";
  EXPECT_TRUE(has(format_error(j), "special token '[NOPE]' is not in 'special_tokens'"))
      << format_error(j);
  j = load_json("wordpiece_bert");
  j["post_processor"]["single"][1]["Sequence"]["id"] = "B";
  EXPECT_TRUE(has(format_error(j), "a single-text template cannot use sequence B"))
      << format_error(j);
  j = load_json("wordpiece_cased");
  j["post_processor"]["sep"] = "[SEP]";
  EXPECT_TRUE(has(format_error(j), "BertProcessing: 'sep' must be [token, id]")) << format_error(j);
  j = load_json("wordpiece_bert");
  j["model"]["vocab"]["hello"] = "x";
  EXPECT_TRUE(has(format_error(j), "model WordPiece: vocab entry 'hello'")) << format_error(j);

  j = load_json("bytefallback_gemma");
  j["normalizer"]["pattern"] = {{"String", ""}};
  EXPECT_TRUE(has(format_error(j), "normalizer Replace: empty pattern")) << format_error(j);
  j = load_json("metaspace_llama");
  j["decoder"]["decoders"][3]["content"] = "  ";
  EXPECT_TRUE(has(format_error(j), "decoder Strip: field 'content' must be a single character"))
      << format_error(j);
  j = load_json("metaspace_llama");
  j["decoder"]["decoders"][3]["start"] = -1;
  EXPECT_TRUE(has(format_error(j), "'start' must be a non-negative integer")) << format_error(j);
  j = load_json("legacy_prepend");
  j["post_processor"]["processors"][1] = nullptr;
  EXPECT_TRUE(has(format_error(j), "post_processor Sequence: entries must not be null"))
      << format_error(j);
  j = load_json("legacy_prepend");
  j["normalizer"]["normalizers"][0].erase("strip_right");
  EXPECT_TRUE(has(format_error(j), "normalizer Strip: missing field 'strip_right'"))
      << format_error(j);
}

// tokenizers fails an encode that needs a missing unk token (MissingUnkToken), not the load.
TEST(TokenizerComponents, WordPieceWithoutUnkTokenFailsOnlyWhenNeeded) {
  json j = load_json("wordpiece_bert");
  j["model"]["unk_token"] = "[NOT-THERE]";
  const Tokenizer tok = Tokenizer::from_json_text(j.dump(), "t.json");
  EXPECT_EQ(tok.encode("hello world"), (std::vector<int32_t>{id(tok, "hello"), id(tok, "world")}));
  EXPECT_THROW(tok.encode("hello \xF0\x9F\xA6\x9C"), InvalidArgument);
}

// Byte-fallback runs are decoded as a whole (invalid UTF-8 gives U+FFFD per byte), so a stream
// holds a run back until an ordinary token ends it; ordinary tokens come out at once.
TEST(TokenizerComponents, StreamHoldsByteFallbackRunsUntilTheyEnd) {
  const Tokenizer tok = Tokenizer::load(parity_file("bytefallback_gemma"));
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(id(tok, "<0xF0>")), "");
  EXPECT_EQ(stream.push(id(tok, "<0x9F>")), "");
  EXPECT_EQ(stream.push(id(tok, "<0x98>")), "");
  EXPECT_EQ(stream.push(id(tok, "<0x80>")), "");
  EXPECT_EQ(stream.push(id(tok, "\xE2\x96\x81")), "\xF0\x9F\x98\x80 ");  // "▁" ends the run
  EXPECT_EQ(stream.push(id(tok, "<0xF0>")), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // a lone lead byte: one U+FFFD
  // The same stream object starts over after flush().
  EXPECT_EQ(stream.push(id(tok, "\xE2\x96\x81")), " ");
  EXPECT_EQ(stream.flush(), "");
}

TEST(TokenizerComponents, StreamEmitsWordPieceAndByteLevelTokensAtOnce) {
  const Tokenizer wp = Tokenizer::load(parity_file("wordpiece_bert"));
  StreamDecoder a(wp);
  EXPECT_EQ(a.push(id(wp, "hello")), "hello");
  EXPECT_EQ(a.push(id(wp, "world")), " world");
  EXPECT_EQ(a.push(id(wp, "##s")), "s");
  EXPECT_EQ(a.flush(), "");

  const Tokenizer bl = Tokenizer::load(parity_file("bytelevel_modernbert"));
  const std::vector<int32_t> ids = bl.encode("Hello world!");
  std::vector<StreamDecoder> streams;  // movable, e.g. one per request
  streams.emplace_back(bl);
  streams.emplace_back(bl, /*skip_special_tokens=*/true);
  std::string text;
  for (int32_t i : ids) {
    const std::string piece = streams[0].push(i);
    EXPECT_FALSE(piece.empty());
    text += piece;
  }
  EXPECT_EQ(text + streams[0].flush(), "Hello world!");
}

// Strip with stop > 0 can only remove a trailing run once the token ends, so it is held back.
TEST(TokenizerComponents, StreamHoldsTrailingStripCandidates) {
  const Tokenizer tok =
      Tokenizer::load(parity_file("legacy_prepend"));  // ... Fuse, Strip(" ", 0, 1)
  const std::vector<int32_t> ids = tok.encode("Hello world");
  ASSERT_FALSE(ids.empty());
  StreamDecoder stream(tok);
  std::string text;
  for (int32_t i : ids) text += stream.push(i);
  text += stream.push(id(tok, "\xE2\x96\x81"));  // a trailing "▁" decodes to ' ', then stripped
  EXPECT_EQ(text + stream.flush(), tok.decode(ids));
}

}  // namespace
}  // namespace infera
