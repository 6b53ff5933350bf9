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
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"
#include "model_options.h"

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

// -log softmax(row)[target], in double so that thousands of terms sum without loss.
double negative_log_likelihood(std::span<const float> row, int32_t target, int64_t position) {
  double max = row[0];
  for (float v : row) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  const double nll = max + std::log(sum) - static_cast<double>(row[static_cast<size_t>(target)]);
  if (!std::isfinite(nll))
    throw Error("non-finite logits at token " + std::to_string(position) +
                " of the text: the model's output is not usable");
  return nll;
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

  const auto vocab = static_cast<size_t>(info.vocab);
  std::vector<float> logits;
  double total_nll = 0.0;
  int64_t scored = 0, windows = 0;
  constexpr int64_t kBlock = 32;
  for (int64_t begin = 0; begin + 1 < n; begin += context) {
    const int64_t len = std::min(context, n - begin);
    std::span<const int32_t> window(ids.data() + begin, static_cast<size_t>(len));
    // Each window is one sequence over its own cache, fed chunk by chunk through the batch
    // contract; the rows whose logits are wanted are listed explicitly.
    KvCache cache(m.model->backend(), m.model->kv_shape(),
                  {.block_size = kBlock, .num_blocks = (len + kBlock - 1) / kBlock});
    const SeqId seq = cache.add_sequence();
    if (!cache.reserve(seq, len)) throw Error("perplexity: the KV cache could not hold a window");
    for (int64_t c0 = 0; c0 < len; c0 += o.chunk) {
      const int64_t rows = std::min(o.chunk, len - c0);
      // The window's last token predicts nothing inside the window: no logits needed for it.
      const int64_t wanted = std::min(rows, len - 1 - c0);
      if (wanted <= 0) break;
      const SeqChunk chunk{seq, window.subspan(static_cast<size_t>(c0), static_cast<size_t>(rows)),
                           OutputRows::None};
      BatchDesc batch = build_batch(cache, std::span<const SeqChunk>(&chunk, 1));
      for (int64_t r = 0; r < wanted; ++r) batch.output_rows.push_back(static_cast<int32_t>(r));
      logits.resize(static_cast<size_t>(wanted) * vocab);
      m.model->forward(batch, cache.pool(), logits);
      cache.commit(seq, rows);
      for (int64_t r = 0; r < wanted; ++r) {
        const int64_t pos = c0 + r;
        std::span<const float> row(logits.data() + static_cast<size_t>(r) * vocab, vocab);
        total_nll +=
            negative_log_likelihood(row, window[static_cast<size_t>(pos + 1)], begin + pos + 1);
        ++scored;
      }
    }
    ++windows;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mean_nll = total_nll / static_cast<double>(scored);
  const double ppl = std::exp(mean_nll);
  if (o.json) {
    const nlohmann::json j = {
        {"model", info.summary()}, {"text_file", o.text_file}, {"tokens", n},
        {"scored_tokens", scored}, {"windows", windows},       {"context", context},
        {"mean_nll", mean_nll},    {"perplexity", ppl},        {"seconds", seconds}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("Model: %s\n", info.summary().c_str());
  std::printf("Text: %s (%lld tokens, %lld windows of up to %lld)\n", o.text_file.c_str(),
              static_cast<long long>(n), static_cast<long long>(windows),
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
