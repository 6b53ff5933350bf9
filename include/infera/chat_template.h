// Qwen3 chat template (ChatML with think blocks and tool calls), rendered directly in C++. The
// output is byte-identical to what the model's Jinja template (tokenizer_config.json
// "chat_template") renders under transformers for the same messages; tests/data/make_chat_cases.py
// checks that.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace infera {

struct ChatToolCall {
  std::string name;
  // Emitted verbatim when arguments_is_object is false (OpenAI style: arguments is a JSON string).
  // When true it must be the JSON text of an object, re-serialised the way the template's `tojson`
  // does for a dict (Python json.dumps: ", " and ": " separators, key order kept, no ASCII
  // escaping).
  std::string arguments;
  bool arguments_is_object = false;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  // For assistant turns. Empty means "not given": the template then takes the reasoning from a
  // <think>...</think> prefix of `content` (the only difference from passing "" to Jinja).
  std::string reasoning_content;
  std::vector<ChatToolCall> tool_calls;  // assistant turns only
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  // false appends the empty think block "<think>\n\n</think>\n\n" after the generation prompt.
  bool enable_thinking = true;
  // Tool definitions, each the JSON text of one object (e.g. {"type": "function", "function":
  // ...}).
  std::vector<std::string> tools;
};

// Throws InvalidArgument for an unknown role or malformed tool JSON, naming the message or tool.
std::string apply_chat_template(std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& opts);

// JSON text re-serialised as Python's json.dumps(ensure_ascii=False) writes it (what the template's
// `tojson` filter produces under transformers). Throws InvalidArgument if `json_text` is not JSON.
std::string to_python_json(const std::string& json_text);

}  // namespace infera
