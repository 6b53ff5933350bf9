// The C++ Qwen3 chat template against strings rendered from the model's real Jinja template by
// tests/data/make_chat_cases.py (regenerate the JSON with that script when adding cases).
#include "infera/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "infera/error.h"
#include "infera/tokenizer.h"
#include "test_paths.h"

namespace infera {
namespace {

using ojson = nlohmann::ordered_json;

ojson load_cases() {
  const auto path =
      std::filesystem::path(INFERA_SOURCE_DIR) / "tests" / "data" / "chat_template_cases.json";
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing " << path << " (run tests/data/make_chat_cases.py)";
    return ojson::array();
  }
  return ojson::parse(in);
}

ChatMessage to_message(const ojson& m) {
  ChatMessage msg;
  msg.role = m.at("role");
  msg.content = m.at("content");
  if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"];
  if (m.contains("tool_calls")) {
    for (const ojson& call : m["tool_calls"]) {
      const ojson& f = call.contains("function") ? call["function"] : call;
      ChatToolCall tc;
      tc.name = f.at("name");
      const ojson& args = f.at("arguments");
      tc.arguments_is_object = !args.is_string();
      tc.arguments = args.is_string() ? args.get<std::string>() : args.dump();
      msg.tool_calls.push_back(std::move(tc));
    }
  }
  return msg;
}

TEST(TokenizerChatTemplate, MatchesJinjaRendering) {
  const ojson cases = load_cases();
  ASSERT_GE(cases.size(), 5u);
  for (const ojson& c : cases) {
    std::vector<ChatMessage> messages;
    for (const ojson& m : c.at("messages")) messages.push_back(to_message(m));
    ChatTemplateOptions opts;
    opts.add_generation_prompt = c["options"].at("add_generation_prompt");
    opts.enable_thinking = c["options"].value("enable_thinking", true);
    for (const ojson& t : c.at("tools")) opts.tools.push_back(t.dump());
    EXPECT_EQ(apply_chat_template(messages, opts), c.at("expected").get<std::string>())
        << "case " << c.at("name").get<std::string>();
  }
}

TEST(TokenizerChatTemplate, ThinkingDisabledAddsEmptyThinkBlock) {
  const std::vector<ChatMessage> messages = {{"user", "Hi", "", {}}};
  ChatTemplateOptions opts;
  opts.enable_thinking = false;
  EXPECT_EQ(apply_chat_template(messages, opts),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(TokenizerChatTemplate, RejectsUnknownRoleAndBadToolJson) {
  const std::vector<ChatMessage> messages = {{"developer", "x", "", {}}};
  EXPECT_THROW(apply_chat_template(messages, {}), InvalidArgument);
  ChatTemplateOptions opts;
  opts.tools = {"{not json"};
  const std::vector<ChatMessage> user = {{"user", "x", "", {}}};
  EXPECT_THROW(apply_chat_template(user, opts), InvalidArgument);
}

TEST(TokenizerChatTemplate, PromptTokenizesWithSpecialTokens) {
  const Tokenizer tok = Tokenizer::load(test::shared_dir() / "models" / "qwen3-0.6b");
  const std::vector<ChatMessage> messages = {{"user", "What is 2+2?", "", {}}};
  // The same ids tokenizers gives for this prompt (a case of the recorded corpus).
  EXPECT_EQ(tok.encode(apply_chat_template(messages, {})),
            (std::vector<int32_t>{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198,
                                  151644, 77091, 198}));
}

}  // namespace
}  // namespace infera
