// A hand-written rendering of Qwen3's Jinja chat template. Each block below mirrors one block of
// the template, in the same order, so the two can be compared side by side when the template
// changes.
#include "infera/chat_template.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "infera/error.h"

namespace infera {
namespace {

using ojson = nlohmann::ordered_json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
// Python's str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view lstrip_nl(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_nl(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_nl(std::string_view s) { return lstrip_nl(rstrip_nl(s)); }
// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  return s.substr(0, std::min(s.find(sep), s.size()));
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  const std::size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

void dump_python_string(const std::string& s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void dump_python(const ojson& j, std::string& out) {
  switch (j.type()) {
    case ojson::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        dump_python_string(it.key(), out);
        out += ": ";
        dump_python(it.value(), out);
      }
      out.push_back('}');
      break;
    }
    case ojson::value_t::array: {
      out.push_back('[');
      for (std::size_t k = 0; k < j.size(); ++k) {
        if (k) out += ", ";
        dump_python(j[k], out);
      }
      out.push_back(']');
      break;
    }
    case ojson::value_t::string:
      dump_python_string(j.get_ref<const std::string&>(), out);
      break;
    default:  // numbers, booleans, null: nlohmann and Python agree (1.0, 1e-05, true, null)
      out += j.dump();
  }
}

std::string python_json_or_throw(const std::string& text, const std::string& what) {
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const ojson::exception& e) {
    throw InvalidArgument("chat template: " + what + " is not valid JSON: " + e.what());
  }
  std::string out;
  dump_python(j, out);
  return out;
}

}  // namespace

std::string to_python_json(const std::string& json_text) {
  return python_json_or_throw(json_text, "value");
}

std::string apply_chat_template(std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& opts) {
  const std::size_t n = messages.size();
  const bool first_is_system = n > 0 && messages[0].role == "system";
  std::string out;

  // System block, with the tool list when tools are given.
  if (!opts.tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) out += messages[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (std::size_t k = 0; k < opts.tools.size(); ++k) {
      out += "\n" + python_json_or_throw(opts.tools[k], "tools[" + std::to_string(k) + "]");
    }
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (first_is_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }

  // The last real user query (tool responses wrapped as user turns do not count). Reasoning is
  // kept only for assistant turns after it.
  std::size_t last_query = n == 0 ? 0 : n - 1;
  for (std::size_t k = n; k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == n;
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (!m.reasoning_content.empty()) {
        reasoning = m.reasoning_content;
      } else if (content.find("</think>") != std::string_view::npos) {
        content = lstrip_nl(after_last(m.content, "</think>"));
        reasoning =
            lstrip_nl(after_last(rstrip_nl(before_first(m.content, "</think>")), "<think>"));
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_nl(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_nl(content);
      } else {
        out += content;
      }
      for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ChatToolCall& call = m.tool_calls[k];
        if (k > 0 || !content.empty()) out += "\n";
        out += "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": ";
        out += call.arguments_is_object
                   ? python_json_or_throw(call.arguments, "messages[" + std::to_string(i) +
                                                              "].tool_calls[" + std::to_string(k) +
                                                              "].arguments")
                   : call.arguments;
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else if (m.role != "system") {
      // The Jinja template silently drops other roles; a caller mistake is better reported.
      throw InvalidArgument("chat template: messages[" + std::to_string(i) +
                            "] has unknown role '" + m.role +
                            "' (expected system, user, assistant or tool)");
    }
  }

  if (opts.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!opts.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace infera
