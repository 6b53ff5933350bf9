// Parity with Hugging Face `tokenizers` on the Qwen3 tokenizer: the recorded corpus (ids and
// decoded text produced by tokenizers itself), plus streaming decode and invalid-input behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "infera/error.h"
#include "infera/tokenizer.h"
#include "test_paths.h"
#include "tokenizer/utf8.h"

namespace infera {
namespace {

std::filesystem::path qwen3_dir() { return test::shared_dir() / "models" / "qwen3-0.6b"; }

const Tokenizer& qwen3() {
  static const Tokenizer tok = Tokenizer::load(qwen3_dir());
  return tok;
}

struct CorpusCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<CorpusCase> load_cases(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "missing fixture " << path << " (set INFERA_SHARED_DIR)";
  std::vector<CorpusCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("text"), j.at("ids").get<std::vector<int32_t>>(), j.at("decoded")});
  }
  return cases;
}

std::vector<CorpusCase> load_corpus() {
  return load_cases(test::fixture("tokenizer") / "qwen3_corpus.jsonl");
}

TEST(TokenizerQwen3, KnownSentence) {
  EXPECT_EQ(qwen3().encode("The capital of France is"),
            (std::vector<int32_t>{785, 6722, 315, 9625, 374}));
}

TEST(TokenizerQwen3, CorpusEncodeAndDecodeExactly) {
  const auto cases = load_corpus();
  ASSERT_EQ(cases.size(), 1500u);
  std::size_t encode_ok = 0, decode_ok = 0;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    const auto ids = qwen3().encode(c.text);
    if (ids == c.ids) {
      ++encode_ok;
    } else {
      ADD_FAILURE() << "encode mismatch in case " << k << ": " << c.text;
    }
    const std::string text = qwen3().decode(c.ids);
    if (text == c.decoded) {
      ++decode_ok;
    } else {
      ADD_FAILURE() << "decode mismatch in case " << k << ": " << c.decoded;
    }
  }
  EXPECT_EQ(encode_ok, cases.size());
  EXPECT_EQ(decode_ok, cases.size());
}

// Random strings of characters where regex engines and Unicode tables disagree (U+180E is \s for
// PCRE2 but not for Oniguruma, which tokenizers uses), from
// tests/data/make_tokenizer_edge_cases.py.
TEST(TokenizerQwen3, UnicodeEdgeCasesMatchTokenizers) {
  const auto cases = load_cases(std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" /
                                "qwen3_unicode_edge_cases.jsonl");
  ASSERT_EQ(cases.size(), 1000u);
  int failures = 0;
  for (std::size_t k = 0; k < cases.size() && failures < 10; ++k) {
    const auto ids = qwen3().encode(cases[k].text);
    if (ids != cases[k].ids || qwen3().decode(ids) != cases[k].decoded) {
      ++failures;
      ADD_FAILURE() << "edge case " << k << ": " << nlohmann::json(cases[k].text).dump();
    }
  }
}

TEST(TokenizerQwen3, StreamingDecodeMatchesDecodeAndIsAlwaysValidUtf8) {
  const auto cases = load_corpus();
  for (const auto& c : cases) {
    StreamDecoder stream(qwen3());
    std::string joined;
    for (int32_t id : c.ids) {
      const std::string piece = stream.push(id);
      // encode() rejects invalid UTF-8, so this checks every piece is complete characters.
      ASSERT_NO_THROW(qwen3().encode(piece));
      joined += piece;
    }
    joined += stream.flush();
    ASSERT_EQ(joined, c.decoded);
  }
}

// Ids of the single-byte tokens spelling `bytes` (the GPT-2 alphabet character of each byte).
std::vector<int32_t> byte_token_ids(std::string_view bytes) {
  std::vector<int32_t> ids;
  for (unsigned char b : bytes) {
    ids.push_back(*qwen3().token_to_id(tok::ByteLevelAlphabet::get().byte_to_utf8[b]));
  }
  return ids;
}

TEST(TokenizerQwen3, StreamingHoldsBackSplitCharacters) {
  // "a", then the four bytes of U+1F600 one token each, then "b€" (generation can emit this).
  std::vector<int32_t> ids = qwen3().encode("a");
  for (int32_t id : byte_token_ids("\xF0\x9F\x98\x80")) ids.push_back(id);
  for (int32_t id : qwen3().encode("b\xE2\x82\xAC")) ids.push_back(id);
  StreamDecoder stream(qwen3());
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.push(id));
  const std::string tail = stream.flush();
  ASSERT_GE(pieces.size(), 6u);
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[1], "");  // held back: incomplete sequence
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "");
  EXPECT_EQ(pieces[4], "\xF0\x9F\x98\x80");
  std::string rest;
  for (std::size_t k = 5; k < pieces.size(); ++k) rest += pieces[k];
  EXPECT_EQ(rest + tail, "b\xE2\x82\xAC");
  EXPECT_EQ(qwen3().decode(ids),
            "a\xF0\x9F\x98\x80"
            "b\xE2\x82\xAC");

  // An incomplete character at the end of a stream becomes one U+FFFD on flush, as in decode().
  const std::vector<int32_t> partial_ids = byte_token_ids("\xF0\x9F\x98");
  StreamDecoder partial(qwen3());
  for (int32_t id : partial_ids) EXPECT_EQ(partial.push(id), "");
  EXPECT_EQ(partial.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(qwen3().decode(partial_ids), "\xEF\xBF\xBD");
  // A byte that can never start a character is replaced at once instead of being held.
  StreamDecoder stray(qwen3());
  EXPECT_EQ(stray.push(byte_token_ids("\x80")[0]), "\xEF\xBF\xBD");
  EXPECT_EQ(stray.flush(), "");
}

TEST(TokenizerQwen3, SpecialTokens) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_to_id("Ġthe"), 279);
  EXPECT_FALSE(tok.token_to_id("definitely not a token").has_value());
  EXPECT_EQ(tok.id_to_token(151644), "<|im_start|>");
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is an added but non-special token
  EXPECT_FALSE(tok.is_special(785));
  const std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), "user\nhi");
}

TEST(TokenizerQwen3, InvalidUtf8InputIsRejectedWithOffset) {
  const std::string bad = std::string("abc") + "\xC3\x28" + "def";
  try {
    qwen3().encode(bad);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
  }
  for (const char* s : {"\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "x\xE2\x82"}) {
    EXPECT_THROW(qwen3().encode(s), InvalidArgument) << s;
  }
}

TEST(TokenizerQwen3, DecodeInvalidBytesGivesReplacementLikeHf) {
  const Tokenizer& tok = qwen3();
  // Byte-level tokens for single bytes: 0xE2 0x82 (truncated €) then 'A', and a lone 0x80.
  const int32_t e2 = *tok.token_to_id("â");   // byte 0xE2
  const int32_t x82 = *tok.token_to_id("Ĥ");  // byte 0x82
  const int32_t x80 = *tok.token_to_id("Ģ");  // byte 0x80
  const int32_t a = *tok.token_to_id("A");
  const std::vector<int32_t> ids = {e2, x82, a, x80};
  // from_utf8_lossy: the maximal subpart E2 82 is one U+FFFD, the lone 0x80 another.
  EXPECT_EQ(tok.decode(ids),
            "\xEF\xBF\xBD"
            "A"
            "\xEF\xBF\xBD");
}

// Decoding skips ids without a token (tokenizer_parity_test.cpp checks this against tokenizers);
// looking one up by id still fails.
TEST(TokenizerQwen3, IdToTokenRejectsIdsOutOfRange) {
  EXPECT_THROW(qwen3().id_to_token(-5), InvalidArgument);
  EXPECT_THROW(qwen3().id_to_token(151669), InvalidArgument);
  EXPECT_EQ(qwen3().decode(std::vector<int32_t>{785, 151669}), "The");
}

TEST(TokenizerQwen3, ConcurrentEncodingAgrees) {
  const auto cases = load_corpus();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t k = t; k < cases.size(); k += 2) {
        if (qwen3().encode(cases[k].text) != cases[k].ids) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerQwen3, LongAndOddInputsDoNotCrash) {
  const std::string spaces(1 << 20, ' ');
  const auto ids = qwen3().encode(spaces);
  EXPECT_EQ(qwen3().decode(ids), spaces);
  std::string mixed;
  for (int k = 0; k < 20000; ++k) mixed += "x\n \t\r\n<|im_end|>é 12345 ";
  EXPECT_EQ(qwen3().decode(qwen3().encode(mixed)), mixed);
  EXPECT_TRUE(qwen3().encode("").empty());
  // NFC: a decomposed "e" + U+0301 encodes like the precomposed character.
  EXPECT_EQ(qwen3().encode("caf"
                           "e\xCC\x81"),
            qwen3().encode("caf\xC3\xA9"));
  const std::string nul("a\0b", 3);
  EXPECT_EQ(qwen3().decode(qwen3().encode(nul)), nul);
}

// Untrusted input: random bytes either encode (when valid UTF-8) or throw InvalidArgument, and
// random ids either decode to valid UTF-8 or throw InvalidArgument; nothing else may happen.
TEST(TokenizerQwen3, RandomBytesAndIdsNeverCrash) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s(rng() % 40, '\0');
    for (char& ch : s)
      ch =
          static_cast<char>(iter % 2 ? rng() % 256 : "a \n<|>\xC3\xA9\xE2\x82\xAC\xF0"[rng() % 13]);
    try {
      const auto ids = qwen3().encode(s);
      EXPECT_EQ(qwen3().decode(ids), qwen3().decode(qwen3().encode(qwen3().decode(ids))));
    } catch (const InvalidArgument&) {
    }
    std::vector<int32_t> ids(rng() % 12);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 151700) - (iter % 50 == 0 ? 5 : 0);
    try {
      StreamDecoder stream(qwen3());
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.flush();
      EXPECT_EQ(streamed, qwen3().decode(ids));
      EXPECT_NO_THROW(qwen3().encode(streamed));  // i.e. valid UTF-8
    } catch (const InvalidArgument&) {
    }
  }
}

}  // namespace
}  // namespace infera
