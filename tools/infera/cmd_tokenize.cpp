// `infera tokenize` and `infera detokenize`: JSON lines on stdin -> JSON lines on stdout, one
// output line per input line (blank lines are skipped), flushed per line so the commands work in a
// pipe. tokenize takes {"text": ...} or a pair {"text": ..., "text_pair": ...} (then the output
// also has "type_ids"); --add-special-tokens applies the tokenizer's post-processor.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "infera/error.h"
#include "infera/tokenizer.h"
#include "json_lines.h"
#include "model_options.h"

namespace infera::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  bool skip_special_tokens = false;
  bool add_special_tokens = false;
};

void run_tokenize(const TokenizeOptions& opts) {
  const Tokenizer tok = load_tokenizer(opts.model);
  std::string line;
  for (std::size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    if (is_blank_line(line)) continue;
    const TextRequest request = parse_text_request(line, line_no);
    std::optional<std::string_view> pair;
    if (request.text_pair) pair = *request.text_pair;
    Encoding enc;
    try {
      enc = tok.encode(request.text, pair, opts.add_special_tokens);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("stdin line " + std::to_string(line_no) + ": " + e.what());
    }
    nlohmann::json out{{"ids", enc.ids}};
    if (request.text_pair) out["type_ids"] = enc.type_ids;
    std::cout << out.dump() << '\n' << std::flush;
  }
}

void run_detokenize(const TokenizeOptions& opts) {
  const Tokenizer tok = load_tokenizer(opts.model);
  std::string line;
  for (std::size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    if (is_blank_line(line)) continue;
    const std::vector<int32_t> ids = parse_ids_request(line, line_no);
    std::string text;
    try {
      text = tok.decode(ids, opts.skip_special_tokens);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("stdin line " + std::to_string(line_no) + ": " + e.what());
    }
    std::cout << nlohmann::json{{"text", text}}.dump() << '\n' << std::flush;
  }
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();

  CLI::App* tokenize = app.add_subcommand(
      "tokenize",
      "Read {\"text\": ...} (or {\"text\": ..., \"text_pair\": ...}) JSON lines on stdin, "
      "write {\"ids\": [...]} lines (with \"type_ids\" for pairs)");
  tokenize->add_option("--model", opts->model, "Model folder, tokenizer.json, or a .gguf file")
      ->required();
  tokenize->add_flag(
      "--add-special-tokens", opts->add_special_tokens,
      "Add the tokenizer's special tokens (its post-processor, e.g. [CLS] ... [SEP])");
  tokenize->callback([opts] { run_tokenize(*opts); });

  CLI::App* detokenize = app.add_subcommand(
      "detokenize", "Read {\"ids\": [...]} JSON lines on stdin, write {\"text\": ...} lines");
  detokenize->add_option("--model", opts->model, "Model folder, tokenizer.json, or a .gguf file")
      ->required();
  detokenize->add_flag("--skip-special-tokens", opts->skip_special_tokens,
                       "Drop special tokens (e.g. <|im_end|>) from the text");
  detokenize->callback([opts] { run_detokenize(*opts); });
}

}  // namespace infera::cli
