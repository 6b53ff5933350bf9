// Chat template rendering and its Python-style JSON (tool definitions and tool-call arguments).
// The input is split at "\x1e" (record separator) into records; each record's first byte picks
// what the rest is: a message of some role (content, then "\x1f" and reasoning), a tool call on
// the last assistant message ("name\x1farguments", arguments as an object or verbatim), or a tool
// definition. apply_chat_template must render or throw InvalidArgument. Separately, the whole
// input is read as JSON: when to_python_json renders it, rendering that output again must give it
// back unchanged (the output is JSON, and Python's rendering of its own output is a fixed point).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "infera/chat_template.h"
#include "infera/error.h"

using namespace infera;

namespace {

const char* const kRoles[] = {"system", "user", "assistant", "tool", "developer"};

void render(std::string_view input) {
  std::vector<ChatMessage> messages;
  ChatTemplateOptions opts;
  for (std::string_view record : fuzz::split(input, "\x1e")) {
    if (record.empty()) continue;
    const uint8_t kind = static_cast<uint8_t>(record[0]);
    const auto fields = fuzz::split(record.substr(1), "\x1f");
    switch (kind % 8) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        messages.push_back({kRoles[kind % 8],
                            std::string(fields[0]),
                            fields.size() > 1 ? std::string(fields[1]) : "",
                            {}});
        break;
      case 5:
      case 6:
        if (!messages.empty() && messages.back().role == "assistant")
          messages.back().tool_calls.push_back({std::string(fields[0]),
                                                fields.size() > 1 ? std::string(fields[1]) : "",
                                                kind % 8 == 5});
        break;
      case 7:
        opts.tools.emplace_back(record.substr(1));
        break;
    }
  }
  opts.add_generation_prompt = !input.empty() && input.back() % 2 == 0;
  opts.enable_thinking = input.size() % 2 == 0;
  try {
    apply_chat_template(messages, opts);
  } catch (const InvalidArgument&) {
  }
}

void python_json_fixed_point(std::string_view input) {
  std::string once;
  try {
    once = to_python_json(std::string(input));
  } catch (const InvalidArgument&) {
    return;
  }
  fuzz::check(fuzz::valid_utf8(once), "to_python_json produced invalid UTF-8");
  std::string twice;
  try {
    twice = to_python_json(once);
  } catch (const InvalidArgument& e) {
    fuzz::fail(std::string("to_python_json cannot read its own output: ") + e.what());
  }
  fuzz::check(once == twice, "to_python_json(to_python_json(x)) != to_python_json(x)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  render(input);
  python_json_fixed_point(input);
  return 0;
}
