// Options shared by the subcommands that load a model: where it is, how to get its weights, which
// tokenizer, how many threads; and the loaded bundle they produce.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "infera/tokenizer.h"
#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "ops/backend.h"

namespace infera::cli {

// Generation (run, chat, bench) multiplies bf16 weights as llama.cpp does, in bf16 dot products
// where the CPU has them (x1.5 prefill, x1.25 decode on the 0.6B shape; errors of bf16 compute,
// about 1e-1 of a logit at most on the fixtures); the commands that report numbers (logits,
// perplexity, eval, the encoder commands, decide) keep f32 activations, transformers' f32 numbers
// within 1e-4. `--matmul-precision` overrides either default.
inline constexpr const char* kGenerationMatmulPrecision = "bf16";

struct ModelOptions {
  std::string model;      // folder with config.json (+ weights unless dummy)
  std::string tokenizer;  // tokenizer.json or a folder holding one; default: the model folder
  bool dummy_weights = false;
  uint64_t dummy_seed = 0;
  int threads = 0;
  std::string device = "auto";
  std::string matmul_precision = "f32";  // kGenerationMatmulPrecision for run and chat

  void add_to(CLI::App& cmd);
  // The backend these options ask for (every command that loads a model builds it from here).
  BackendOptions backend_options() const {
    return {.device = device, .threads = threads, .matmul_precision = matmul_precision};
  }
};

struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> model;
  std::optional<Tokenizer> tokenizer;  // absent when the folder has none and none was given
  io::GenerationDefaults generation;
  double load_seconds = 0.0;
};

// Loads the model, printing progress to stderr ("Loading ... done in 0.4 s") unless quiet.
LoadedModel load_model(const ModelOptions& options, bool quiet);

// A tokenizer from tokenizer.json, a folder holding one, or a .gguf file (its tokenizer.ggml.*
// metadata); any other regular file is read as tokenizer.json.
Tokenizer load_tokenizer(const std::filesystem::path& path);

// "785,6722,315" -> ids; errors name the bad item.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& option);

}  // namespace infera::cli
