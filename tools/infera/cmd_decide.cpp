// `infera decide --model DIR --request FILE.json`: the decision runtime (specs/decision-model.md)
// on one request, JSON in and JSON out. DIR holds a decision-model/1 checkpoint; text requests
// need its tokenizer.json (or --tokenizer), token-id requests ({"inputs": [[...]]}) do not.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/registry.h"
#include "commands.h"
#include "core/json_limits.h"
#include "decision/runtime.h"
#include "infera/error.h"
#include "model_options.h"
#include "tokenizer/utf8.h"

namespace infera::cli {
namespace {

struct DecideOptions {
  ModelOptions model;
  std::string request;
  std::string out;
  std::string weights = "stored";
  bool no_prune = false, no_dedup = false, timing = false, quant_report = false;
  int max_batch_questions = decision::kDefaultQuestionCap;
  int64_t token_budget = 8192;
};

std::string read_request(const std::string& path) {
  if (path == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open --request file " + path);
  return {std::istreambuf_iterator<char>(in), {}};
}

void run_decide(const DecideOptions& o) {
  namespace fs = std::filesystem;
  const fs::path dir = o.model.model;
  if (!fs::is_directory(dir)) throw IoError("model folder '" + o.model.model + "' does not exist");
  // Parse the request before loading anything: a malformed file fails fast.
  // UTF-8 first: the JSON parser's own message would echo the invalid bytes.
  const std::string text = read_request(o.request);
  if (const auto bad = tok::first_invalid_utf8(text))
    throw InvalidArgument("request " + o.request + ": not valid UTF-8 (byte " +
                          std::to_string(*bad) + ")");
  const nlohmann::json body =
      parse_json_capped<nlohmann::json, InvalidArgument>(text, "request " + o.request);
  auto backend = make_backend(o.model.backend_options());
  decision::ModelOptions mo;
  mo.dummy_weights = o.model.dummy_weights;
  mo.dummy_seed = o.model.dummy_seed;
  mo.weights = decision::parse_weight_format(o.weights);
  mo.prune_last_layer = !o.no_prune;
  auto model = decision::DecisionModel::load(dir, *backend, mo);
  if (o.quant_report) {
    const auto& r = model->quant_report();
    std::fprintf(stderr, "%zu tensors quantized (%lld parameters); kept in full precision:\n",
                 r.quantized.size(), static_cast<long long>(r.quantized_params));
    for (const auto& k : r.kept)
      std::fprintf(stderr, "  %s: %s\n", k.tensor.c_str(), k.reason.c_str());
  }
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string identity;
  const fs::path tok =
      o.model.tokenizer.empty() ? dir / "tokenizer.json" : fs::path(o.model.tokenizer);
  if (!o.model.tokenizer.empty() || fs::exists(tok)) {
    const fs::path file = fs::is_directory(tok) ? tok / "tokenizer.json" : tok;
    tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(file));
    identity = decision::tokenizer_identity_of_file(file);
  }
  decision::Runtime runtime(*model,
                            {.max_batch_questions = o.max_batch_questions,
                             .token_budget = o.token_budget,
                             .dedup = !o.no_dedup},
                            tokenizer, identity);
  nlohmann::json out;
  if (decision::is_ids_request(body)) {
    const auto r = runtime.decide_ids(decision::parse_ids_request(body));
    out = decision::Runtime::to_json(r, model->config());
    if (o.timing) out["timing_ms"] = {{"forward", r.times.forward_ms}, {"total", r.times.total_ms}};
  } else {
    const auto r = runtime.decide(decision::parse_request(body));
    out = decision::Runtime::to_json(r, model->config());
    if (o.timing)
      out["timing_ms"] = {{"prepare", r.times.prepare_ms},
                          {"forward", r.times.forward_ms},
                          {"postprocess", r.times.postprocess_ms},
                          {"total", r.times.total_ms}};
  }
  const std::string response = out.dump() + "\n";
  if (o.out.empty()) {
    std::fwrite(response.data(), 1, response.size(), stdout);
  } else {
    std::ofstream f(o.out, std::ios::binary);
    if (!f || !f.write(response.data(), static_cast<std::streamsize>(response.size())))
      throw IoError("cannot write " + o.out);
  }
}

}  // namespace

void add_decide_command(CLI::App& app) {
  auto o = std::make_shared<DecideOptions>();
  CLI::App* cmd = app.add_subcommand(
      "decide", "Answer a decision request (JSON in, JSON out) with a decision-model/1 checkpoint");
  o->model.add_to(*cmd);
  cmd->add_option("--request", o->request, "request JSON file ('-': stdin)")->required();
  cmd->add_option("--out", o->out, "write the response here instead of stdout");
  cmd->add_option("--weights", o->weights,
                  "encoder and head-layer weights: stored, int8-g64 or int4-g64");
  cmd->add_option("--max-batch-questions", o->max_batch_questions,
                  "questions per forward (1-64, default 16)");
  cmd->add_option("--token-budget", o->token_budget, "tokens per forward (default 8192)");
  cmd->add_flag("--no-prune", o->no_prune, "run the last head layer on every row");
  cmd->add_flag("--no-dedup", o->no_dedup, "run identical questions separately");
  cmd->add_flag("--timing", o->timing, "add per-stage wall times (ms) to the response");
  cmd->add_flag("--quant-report", o->quant_report,
                "list, on stderr, the tensors left in full precision and why");
  cmd->callback([o] { run_decide(*o); });
}

}  // namespace infera::cli
