// A hand-written rendering of Qwen3's Jinja chat template. Each block below mirrors one block of
// the template, in the same order, so the two can be compared side by side when the template
// changes.
#include "infera/chat_template.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_limits.h"
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

// Python's repr(float), which json.dumps writes: the shortest digits that round-trip (as
// std::to_chars gives them), positional when the decimal exponent is in [-4, 16), scientific
// otherwise ("1e-05", "1e+16", "1.5e+300"), and ".0" on integral positional values.
// nlohmann's dump() differs for 1e15 ("1e+15" against Python's "1000000000000000.0").
void dump_python_float(double v, std::string& out) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));  // "-1.2345e+15"
  const std::size_t e = sci.find('e');
  const bool negative = sci.front() == '-';
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e - (negative ? 1 : 0)))
    if (c != '.') digits.push_back(c);
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int point = exponent + 1;  // digits before the decimal point
  if (negative) out.push_back('-');
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (point <= 0) {
    out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (static_cast<std::size_t>(point) >= digits.size()) {
    out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(point)) + "." +
           digits.substr(static_cast<std::size_t>(point));
  }
}

// Builds the value as Python's json.loads would: an object keeps its first key order and a
// repeated key takes its last value (dict semantics, as ordered_json's operator[] does); an
// integer too large for 64 bits keeps its exact digits, which nlohmann's DOM cannot hold (its
// lexer hands them over as a lossy double, with the text they came from). Those digits are stored
// as a `binary` value, a type JSON text never produces otherwise. Nesting is capped as it opens
// (kMaxJsonDepth), so the recursive renderer below never recurses deeper than that.
class PythonJsonBuilder {
 public:
  explicit PythonJsonBuilder(std::string what) : what_(std::move(what)) {}
  ojson take() { return std::move(root_); }

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(ojson::number_integer_t v) { return put(v); }
  bool number_unsigned(ojson::number_unsigned_t v) { return put(v); }
  bool number_float(ojson::number_float_t v, const std::string& text) {
    if (text.find_first_of(".eE") != std::string::npos) return put(v);
    return put(ojson::binary(ojson::binary_t::container_type(text.begin(), text.end())));
  }
  bool string(std::string& v) { return put(std::move(v)); }
  bool binary(ojson::binary_t& v) { return put(std::move(v)); }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const ojson::exception& e) {
    // nlohmann's lexer converts every number through a double first and gives up past 1.8e308
    // (an integer of more than 308 digits, or 1e400). Python would keep such an integer exact
    // (up to its 4300-digit limit) and read 1e400 as inf, written as Infinity, which is not JSON;
    // rendering neither is a stated limit, and the message says so instead of quoting the number.
    constexpr int kNumberOverflow = 406;
    if (e.id == kNumberOverflow)
      throw InvalidArgument("chat template: " + what_ +
                            " has a number beyond 1.8e308 (more than 308 digits), which is not "
                            "supported");
    throw InvalidArgument("chat template: " + what_ + " is not valid JSON: " + e.what());
  }

 private:
  // Stores `v` where the parser is (top level, array element, or object member under key_) and
  // returns it. Only the open containers' pointers are kept: a container's storage can move only
  // when a sibling is added to its parent, which happens after it is closed.
  template <typename V>
  ojson* place(V&& v) {
    if (open_.empty()) {
      root_ = std::forward<V>(v);
      return &root_;
    }
    ojson& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::forward<V>(v));
      return &parent.back();
    }
    ojson& slot = parent[key_];
    slot = std::forward<V>(v);
    return &slot;
  }
  template <typename V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(ojson container) {
    if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      throw InvalidArgument("chat template: " + what_ + ": JSON nests deeper than " +
                            std::to_string(kMaxJsonDepth) + " levels");
    open_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  std::string what_;
  ojson root_;
  std::vector<ojson*> open_;
  std::string key_;
};

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
    case ojson::value_t::binary: {  // an integer beyond 64 bits, digits as written (see above)
      const auto& digits = j.get_binary();
      out.append(digits.begin(), digits.end());
      break;
    }
    case ojson::value_t::number_float:
      dump_python_float(j.get<double>(), out);
      break;
    default:  // integers, booleans, null: nlohmann and Python agree (-5, 18446744073709551615)
      out += j.dump();
  }
}

std::string python_json_or_throw(const std::string& text, const std::string& what) {
  PythonJsonBuilder builder(what);
  ojson::sax_parse(text, &builder);
  std::string out;
  dump_python(builder.take(), out);
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
