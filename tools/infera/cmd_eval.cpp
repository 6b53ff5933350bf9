// `infera eval`: the quality gate of a quantized (or otherwise changed) model against its
// reference: over the same text, position by position, the KL divergence KL(P_ref || Q_cand) of
// the next-token distributions (mean, median, p95, p99, max), how often both pick the same top-1
// token, and each model's perplexity. The text is scored like `infera perplexity` (windows of
// --context tokens from an empty cache; see window_logits.h), both models in lock-step, so only
// one chunk of logits per model is held. Candidates share the reference's backend (one thread
// pool) and its tokenizer; their vocabularies must match.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/environment.h"
#include "bench/stats.h"
#include "commands.h"
#include "infera/error.h"
#include "model_options.h"
#include "next_token_metrics.h"
#include "window_logits.h"

namespace infera::cli {
namespace {

// The gate: statistics over fewer positions are too noisy to compare formats by.
constexpr int64_t kMinPositions = 512;

struct EvalOptions {
  ModelOptions model;
  std::vector<std::string> candidates;
  std::string text_file;
  int64_t positions = kMinPositions;
  int64_t context = 0;  // 0: positions + 1, at most the model's context
  int64_t chunk = 128;
  bool json = false;
  std::string out;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open --text-file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Candidate {
  std::string path;
  std::unique_ptr<CausalLM> model;
  ComparisonTotals totals;
};

nlohmann::json kl_summary(std::vector<double> kl) {
  std::sort(kl.begin(), kl.end());
  double sum = 0;
  for (double v : kl) sum += v;
  return {{"mean", sum / static_cast<double>(kl.size())},
          {"p50", bench::percentile_sorted(kl, 50)},
          {"p95", bench::percentile_sorted(kl, 95)},
          {"p99", bench::percentile_sorted(kl, 99)},
          {"max", kl.back()}};
}

void eval(const EvalOptions& o) {
  if (o.positions < kMinPositions)
    throw InvalidArgument("--positions must be at least " + std::to_string(kMinPositions));
  const std::string text = read_text(o.text_file);
  LoadedModel ref = load_model(o.model, o.json);
  if (!ref.tokenizer)
    throw InvalidArgument(
        "eval needs a tokenizer: the reference model has none; pass --tokenizer PATH");
  const ModelInfo& info = ref.model->info();
  std::vector<Candidate> candidates;
  for (const std::string& path : o.candidates) {
    Candidate c{path, load_causal_lm(path, *ref.backend, {}), {}};
    if (c.model->info().vocab != info.vocab)
      throw InvalidArgument("--candidate " + path + " has a vocabulary of " +
                            std::to_string(c.model->info().vocab) + ", the reference " +
                            std::to_string(info.vocab));
    candidates.push_back(std::move(c));
  }
  int64_t context = std::min(o.context > 0 ? o.context : o.positions + 1, info.max_positions);
  for (const Candidate& c : candidates) context = std::min(context, c.model->info().max_positions);

  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = ref.tokenizer->encode(text);
  WindowedLogits reference(*ref.model, ids, context, o.chunk, o.positions);
  std::vector<std::unique_ptr<WindowedLogits>> runs;
  for (Candidate& c : candidates)
    runs.push_back(std::make_unique<WindowedLogits>(*c.model, ids, context, o.chunk, o.positions));
  int64_t scored = 0;
  while (reference.next()) {
    for (auto& run : runs)
      if (!run->next() || run->rows() != reference.rows())
        throw Error("eval: the candidate's windows went out of step (internal error)");
    for (int64_t r = 0; r < reference.rows(); ++r) {
      const int32_t target = ids[static_cast<size_t>(reference.target_index(r))];
      for (size_t i = 0; i < candidates.size(); ++i)
        candidates[i].totals.add(compare_rows(reference.row(r), runs[i]->row(r), target));
    }
    scored += reference.rows();
  }
  if (scored < o.positions)
    throw InvalidArgument("--text-file '" + o.text_file + "' gives " + std::to_string(scored) +
                          " predicted positions (" + std::to_string(ids.size()) +
                          " tokens); --positions asks for " + std::to_string(o.positions));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The reference's NLL is the same in every comparison; take it from the first.
  const double ref_nll = candidates[0].totals.reference_nll / static_cast<double>(scored);
  nlohmann::json j = {{"schema", "infera.eval/1"},
                      {"command", command_line()},
                      {"reference",
                       {{"model", o.model.model},
                        {"summary", info.summary()},
                        {"format", info.weight_format},
                        {"dummy_weights", o.model.dummy_weights},
                        {"mean_nll", ref_nll},
                        {"perplexity", std::exp(ref_nll)}}},
                      {"text_file", o.text_file},
                      {"tokens", ids.size()},
                      {"positions", scored},
                      {"windows", reference.windows()},
                      {"context", context},
                      {"seconds", seconds},
                      {"environment", bench::capture_environment()},
                      {"candidates", nlohmann::json::array()}};
  for (const Candidate& c : candidates) {
    const double nll = c.totals.candidate_nll / static_cast<double>(scored);
    j["candidates"].push_back(
        {{"model", c.path},
         {"format", c.model->info().weight_format},
         {"weight_bytes", c.model->info().weight_bytes},
         {"kl", kl_summary(c.totals.kl)},
         {"top1_agreement", static_cast<double>(c.totals.same_top1) / static_cast<double>(scored)},
         {"mean_nll", nll},
         {"perplexity", std::exp(nll)},
         {"perplexity_ratio", std::exp(nll - ref_nll)}});
  }
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << j.dump(2) << "\n";
    if (!out) throw IoError("cannot write --out '" + o.out + "'");
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("Reference: %s, %s: perplexity %.4f\n", info.summary().c_str(),
              info.weight_format.c_str(), std::exp(ref_nll));
  std::printf("Text: %s: %lld positions in %lld windows of up to %lld tokens (%.1f s)\n",
              o.text_file.c_str(), static_cast<long long>(scored),
              static_cast<long long>(reference.windows()), static_cast<long long>(context),
              seconds);
  std::printf("%-10s %11s %11s %11s %11s %8s %11s %9s\n", "format", "KL mean", "KL p50", "KL p95",
              "KL max", "top-1", "perplexity", "ppl ratio");
  for (const auto& c : j["candidates"])
    std::printf("%-10s %11.3e %11.3e %11.3e %11.3e %7.2f%% %11.4f %9.4f  %s\n",
                c["format"].get<std::string>().c_str(), c["kl"]["mean"].get<double>(),
                c["kl"]["p50"].get<double>(), c["kl"]["p95"].get<double>(),
                c["kl"]["max"].get<double>(), 100.0 * c["top1_agreement"].get<double>(),
                c["perplexity"].get<double>(), c["perplexity_ratio"].get<double>(),
                c["model"].get<std::string>().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Quality of candidate models against a reference: KL divergence and top-1 agreement of "
      "next-token distributions, and perplexity, over the same text");
  opts->model.add_to(*cmd);
  cmd->add_option("-c,--candidate", opts->candidates,
                  "Model compared with --model (a folder or a .gguf file); repeatable")
      ->required();
  cmd->add_option("-f,--text-file", opts->text_file, "UTF-8 text, tokenized as is")->required();
  cmd->add_option("--positions", opts->positions,
                  "Predicted positions compared (at least 512); the text must provide them")
      ->capture_default_str();
  cmd->add_option("--context", opts->context,
                  "Window length in tokens (0: positions + 1, at most the models' context)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--chunk", opts->chunk, "Tokens fed per forward pass inside a window")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "One JSON object instead of the table");
  cmd->add_option("--out", opts->out, "Also write the JSON result (indented) to this file");
  cmd->callback([opts] { eval(*opts); });
}

}  // namespace infera::cli
