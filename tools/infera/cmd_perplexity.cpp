// `infera perplexity`: the model's perplexity on a text file, for quality checks against
// transformers and between weight formats.
//
// Method (the usual fixed-window evaluation, as in transformers' perplexity guide with stride equal
// to the window): the text is tokenized as is (no chat template; special tokens written in the
// text, such as <|endoftext|>, become their ids), cut into consecutive non-overlapping windows of
// --context tokens, and each window is run from an empty cache. Every token of a window but its
// first is predicted from the tokens before it in that window; perplexity is exp of the mean of
// those negative log-likelihoods. The window is fed in chunks of --chunk tokens so that only
// chunk x vocab logits are held at once (Qwen3-0.6B's vocabulary is 151,936).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "infera/error.h"
#include "model_options.h"
#include "next_token_metrics.h"
#include "window_logits.h"

namespace infera::cli {
namespace {

struct PerplexityOptions {
  ModelOptions model;
  std::string text_file;
  int64_t context = 0;  // 0: the model's max_position_embeddings, at most kDefaultContext
  int64_t chunk = 128;
  bool json = false;
};

constexpr int64_t kDefaultContext = 1024;

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open --text-file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError("cannot read --text-file '" + path + "'");
  return text.str();
}

void perplexity(const PerplexityOptions& o) {
  if (o.chunk < 1) throw InvalidArgument("--chunk must be at least 1");
  const std::string text = read_text_file(o.text_file);
  LoadedModel m = load_model(o.model, o.json);
  if (!m.tokenizer)
    throw InvalidArgument(
        "perplexity needs a tokenizer: the model folder has no tokenizer.json; "
        "pass --tokenizer PATH");
  const ModelInfo& info = m.model->info();
  int64_t context = o.context;
  if (context == 0) context = std::min(info.max_positions, kDefaultContext);
  if (context < 2) throw InvalidArgument("--context must be at least 2 tokens");
  if (context > info.max_positions)
    throw InvalidArgument("--context " + std::to_string(context) +
                          " exceeds the model's max_position_embeddings " +
                          std::to_string(info.max_positions));

  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = m.tokenizer->encode(text);
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 2)
    throw InvalidArgument("--text-file '" + o.text_file + "' has " + std::to_string(n) +
                          " tokens; perplexity needs at least 2");

  double total_nll = 0.0;
  int64_t scored = 0;
  WindowedLogits windows(*m.model, ids, context, o.chunk);
  while (windows.next()) {
    for (int64_t r = 0; r < windows.rows(); ++r) {
      const int64_t target = windows.target_index(r);
      try {
        total_nll += negative_log_likelihood(windows.row(r), ids[static_cast<size_t>(target)]);
      } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (predicting token " + std::to_string(target) +
                    " of the text)");
      }
      ++scored;
    }
  }
  const int64_t n_windows = windows.windows();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mean_nll = total_nll / static_cast<double>(scored);
  const double ppl = std::exp(mean_nll);
  if (o.json) {
    const nlohmann::json j = {
        {"model", info.summary()}, {"text_file", o.text_file}, {"tokens", n},
        {"scored_tokens", scored}, {"windows", n_windows},     {"context", context},
        {"mean_nll", mean_nll},    {"perplexity", ppl},        {"seconds", seconds}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("Model: %s\n", info.summary().c_str());
  std::printf("Text: %s (%lld tokens, %lld windows of up to %lld)\n", o.text_file.c_str(),
              static_cast<long long>(n), static_cast<long long>(n_windows),
              static_cast<long long>(context));
  std::printf("Perplexity: %.4f (mean NLL %.6f nats over %lld predicted tokens) in %.2f s\n", ppl,
              mean_nll, static_cast<long long>(scored), seconds);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto opts = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of the model on a text file (non-overlapping windows)");
  opts->model.add_to(*cmd);
  cmd->add_option("-f,--text-file", opts->text_file, "UTF-8 text, tokenized as is")->required();
  cmd->add_option("--context", opts->context,
                  "Window length in tokens (0: the model's max_position_embeddings, at most 1024)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--chunk", opts->chunk, "Tokens fed per forward pass inside a window")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "One JSON object instead of text");
  cmd->callback([opts] { perplexity(*opts); });
}

}  // namespace infera::cli
