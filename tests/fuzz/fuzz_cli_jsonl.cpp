// The JSON-lines input of `infera tokenize` and `infera detokenize`, through the same parsing and
// tokenizer calls as the commands (tools/infera/json_lines.h), one input line at a time. Every
// line is answered with a JSON line or refused with InvalidArgument naming the line; the answers
// are serialised as the commands do (a decode result that is not valid UTF-8 would throw there).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "infera/error.h"
#include "json_lines.h"

using namespace infera;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::qwen3_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = fuzz::qwen3_tokenizer();
  size_t line_no = 0;
  for (std::string_view line :
       fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), "\n")) {
    ++line_no;
    if (cli::is_blank_line(line)) continue;
    const std::string prefix = "stdin line " + std::to_string(line_no) + ": ";
    const auto names_the_line = [&](const InvalidArgument& e) {
      fuzz::check(std::string(e.what()).rfind(prefix, 0) == 0,
                  std::string("error does not start with the line: ") + e.what());
    };
    std::optional<cli::TextRequest> request;
    try {
      request = cli::parse_text_request(line, line_no);
    } catch (const InvalidArgument& e) {
      names_the_line(e);
    }
    if (request) {
      std::optional<std::string_view> pair;
      if (request->text_pair) pair = *request->text_pair;
      try {
        const Encoding enc = tok.encode(request->text, pair, true);
        const std::string out = nlohmann::json{{"ids", enc.ids}}.dump();
        fuzz::check(out.rfind("{\"ids\":[", 0) == 0, "ids line: " + out);
        fuzz::check(enc.type_ids.empty() || enc.type_ids.size() == enc.ids.size(),
                    "type ids do not match the ids");
      } catch (const InvalidArgument&) {
        fuzz::check(!fuzz::valid_utf8(request->text) ||
                        (request->text_pair && !fuzz::valid_utf8(*request->text_pair)),
                    "encode() refused valid UTF-8");
      }
    }
    std::optional<std::vector<int32_t>> ids;
    try {
      ids = cli::parse_ids_request(line, line_no);
    } catch (const InvalidArgument& e) {
      names_the_line(e);
    }
    if (ids) {
      try {
        // dump() throws type_error (aborting here) if decode ever returned invalid UTF-8.
        const std::string out =
            nlohmann::json{{"text", tok.decode(*ids, line.size() % 2 == 0)}}.dump();
        fuzz::check(out.rfind("{\"text\":", 0) == 0, "text line: " + out);
      } catch (const InvalidArgument& e) {
        fuzz::check(std::string(e.what()).rfind("token id ", 0) == 0,
                    std::string("decode error does not name the id: ") + e.what());
      }
    }
  }
  return 0;
}
