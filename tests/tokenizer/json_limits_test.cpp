// Regression tests for the defects a fuzzing review found in the tokenizer's JSON paths:
// stack overflow on deeply nested tokenizer.json and tool JSON, hundreds of MB allocated for one
// large vocab id in a tiny file, and integers past 64 bits rendered as floats where Python
// (transformers' `tojson`) keeps them exact. Python's renderings come from
// tests/data/make_python_json_cases.py (regenerate python_json_cases.json with it).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infera/chat_template.h"
#include "infera/error.h"
#include "infera/tokenizer.h"

namespace infera {
namespace {

using nlohmann::json;

// "[[[...0...]]]" with `depth` levels.
std::string nested_array(int depth) {
  return std::string(static_cast<size_t>(depth), '[') + "0" +
         std::string(static_cast<size_t>(depth), ']');
}

// A minimal byte-level BPE tokenizer.json with `extra` spliced into the top-level object.
std::string tokenizer_json(const std::string& vocab, const std::string& extra = "") {
  return R"({"model": {"type": "BPE", "vocab": )" + vocab +
         R"(, "merges": []}, "decoder": {"type": "ByteLevel"}, )"
         R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false})" +
         extra + "}";
}

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

// 100,000 levels is a 200 KB file, far below any size cap; as an added token's id or a vocab
// entry's id it used to overflow the stack (the error message dumped the value recursively). Now
// the parser stops at level 129, wherever the value is.
TEST(TokenizerJsonLimits, DeepNestingIsRejectedWhileParsing) {
  const std::string deep = nested_array(100000);
  const std::vector<std::pair<std::string, std::string>> files = {
      {R"({"a": 0})", R"(, "added_tokens": [{"id": )" + deep + R"(, "content": "x"}])"},
      {R"({"a": )" + deep + "}", ""},
      {R"({"a": 0})", ", \"x\": " + nested_array(129)},
  };
  for (const auto& [vocab, extra] : files) {
    const std::string msg = error_of<FormatError>(
        [&] { Tokenizer::from_json_text(tokenizer_json(vocab, extra), "deep.json"); });
    EXPECT_EQ(msg, "deep.json: JSON nests deeper than 128 levels");
  }
  // 128 levels parse; the tokenizer then rejects the value for what it is, not for its depth.
  // (The model object is level 2, so a value at its vocab holding 126 arrays reaches level 128.)
  const std::string msg = error_of<FormatError>(
      [&] { Tokenizer::from_json_text(tokenizer_json(nested_array(126)), "ok.json"); });
  EXPECT_NE(msg.find("'vocab' must be an object"), std::string::npos) << msg;
}

// One id near 2^24 in a three-token file used to size id tables by the id (about 650 MB).
TEST(TokenizerJsonLimits, SparseIdsAreRejectedBeforeAllocating) {
  const std::string vocab_msg = error_of<FormatError>([] {
    Tokenizer::from_json_text(tokenizer_json(R"({"a": 0, "b": 1, "c": 16777000})"), "sparse.json");
  });
  EXPECT_EQ(vocab_msg,
            "sparse.json: model BPE: vocab: token id 16777000 is far beyond the 3 tokens defined "
            "(ids must stay below 2 x tokens + 65536 = 65542)");
  const std::string added = R"(, "added_tokens": [{"id": 16000000, "content": "<x>"}])";
  const std::string added_msg = error_of<FormatError>(
      [&] { Tokenizer::from_json_text(tokenizer_json(R"({"a": 0})", added), "sparse.json"); });
  EXPECT_NE(added_msg.find("added_tokens: token id 16000000 is far beyond"), std::string::npos)
      << added_msg;
  // Holes within the allowance still load, and the vocab size still counts the largest id.
  const Tokenizer ok = Tokenizer::from_json_text(
      tokenizer_json(R"({"a": 0})", R"(, "added_tokens": [{"id": 65000, "content": "<x>"}])"));
  EXPECT_EQ(ok.vocab_size(), 65001);
  EXPECT_EQ(ok.token_to_id("<x>"), 65000);
}

TEST(ChatTemplateJson, DeepToolJsonIsRejectedNotRecursed) {
  for (int depth : {129, 100000}) {
    ChatTemplateOptions opts;
    opts.tools = {"{\"type\": \"function\", \"f\": " + nested_array(depth) + "}"};
    const std::vector<ChatMessage> user = {{"user", "x", "", {}}};
    EXPECT_EQ(error_of<InvalidArgument>([&] { apply_chat_template(user, opts); }),
              "chat template: tools[0]: JSON nests deeper than 128 levels");
    ChatMessage call{"assistant", "", "", {}};
    call.tool_calls.push_back({"f", "{\"a\": " + nested_array(depth) + "}", true});
    const std::vector<ChatMessage> messages = {{"user", "x", "", {}}, call};
    EXPECT_EQ(error_of<InvalidArgument>([&] { apply_chat_template(messages, {}); }),
              "chat template: messages[1].tool_calls[0].arguments: JSON nests deeper than 128 "
              "levels");
  }
  EXPECT_EQ(to_python_json(nested_array(128)), nested_array(128));
}

TEST(ChatTemplateJson, RendersLikePythonJsonDumps) {
  const auto path =
      std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" / "python_json_cases.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << " (run tests/data/make_python_json_cases.py)";
  const json cases = json::parse(in).at("cases");
  ASSERT_GE(cases.size(), 10u);
  for (const json& c : cases)
    EXPECT_EQ(to_python_json(c.at("input")), c.at("expected").get<std::string>()) << c.at("input");
}

// The tool-call path renders arguments through the same function: a 2^64 argument stays exact.
TEST(ChatTemplateJson, ToolCallArgumentsKeepIntegersPast64Bits) {
  ChatMessage call{"assistant", "", "", {}};
  call.tool_calls.push_back(
      {"f", R"({"n": 18446744073709551616, "m": -18446744073709551617})", true});
  const std::vector<ChatMessage> messages = {{"user", "x", "", {}}, call};
  const std::string out = apply_chat_template(messages, {.add_generation_prompt = false});
  EXPECT_NE(out.find(R"({"name": "f", "arguments": {"n": 18446744073709551616, )"
                     R"("m": -18446744073709551617}})"),
            std::string::npos)
      << out;
}

// The stated limit: numbers past 1.8e308 (nlohmann's lexer reads every number through a double)
// are errors. Python would keep a 309-digit integer exact and write 1e400 as Infinity (not JSON).
TEST(ChatTemplateJson, NumbersBeyondDoubleRangeAreAnError) {
  const std::string big(309, '7');
  for (const std::string& text : {big, std::string("[1e400]"), "{\"a\": -" + big + "}"})
    EXPECT_EQ(error_of<InvalidArgument>([&] { to_python_json(text); }),
              "chat template: value has a number beyond 1.8e308 (more than 308 digits), which is "
              "not supported");
  EXPECT_EQ(to_python_json(std::string(308, '7')), std::string(308, '7'));
}

}  // namespace
}  // namespace infera
