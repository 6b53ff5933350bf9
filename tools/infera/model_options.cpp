#include "model_options.h"

#include <chrono>
#include <cstdio>

#include "backend/registry.h"
#include "infera/error.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "io/gguf_tokenizer.h"
#include "io/mapped_file.h"

namespace infera::cli {

namespace {

// A Hugging Face folder's stop ids (generation_config.json, else config.json) and tokenizer.
void load_folder_extras(const std::filesystem::path& dir, const ModelOptions& options,
                        LoadedModel& loaded) {
  namespace fs = std::filesystem;
  loaded.generation = io::load_generation_defaults(dir);
  if (loaded.generation.eos_token_ids.empty()) {
    // Older folders carry eos_token_id only in config.json.
    const auto config = io::HfConfig::load(dir / "config.json");
    if (config.has("eos_token_id") && config.json()["eos_token_id"].is_number_integer())
      loaded.generation.eos_token_ids.push_back(config.json()["eos_token_id"].get<int32_t>());
  }
  const fs::path tok = options.tokenizer.empty() ? dir : fs::path(options.tokenizer);
  if (!options.tokenizer.empty() || fs::exists(dir / "tokenizer.json"))
    loaded.tokenizer = load_tokenizer(tok);
}

}  // namespace

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model,
                 "Model folder: config.json and model.safetensors (or sharded, with "
                 "model.safetensors.index.json) as Hugging Face publishes it; or a .gguf file "
                 "(weights, config, tokenizer and stop tokens in one file)")
      ->required();
  cmd.add_option("--tokenizer", tokenizer,
                 "tokenizer.json, or a folder holding one (default: the model folder)");
  cmd.add_flag("--dummy-weights", dummy_weights,
               "Seeded random weights of the config's shapes instead of reading weight files "
               "(speed measurements only; the output is meaningless)");
  cmd.add_option("--dummy-seed", dummy_seed, "Seed of --dummy-weights")->capture_default_str();
  cmd.add_option("-t,--threads", threads, "CPU threads (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd.add_option("--device", device,
                 "Where to run: cpu, cuda, or auto (CUDA when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd.add_option("--matmul-precision", matmul_precision,
                 "CPU matmuls with bf16 weights: f32 (activations stay f32: transformers' f32 "
                 "numbers) or bf16 (activations rounded to bf16, AVX512-BF16 dot products where "
                 "the CPU has them, elsewhere the f32 path: faster, with bf16 compute's errors). "
                 "Default: bf16 for run, chat and bench; f32 for the commands that report numbers")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
}

LoadedModel load_model(const ModelOptions& options, bool quiet) {
  namespace fs = std::filesystem;
  LoadedModel loaded;
  fs::path dir = options.model;
  // --dummy-weights accepts a bare config.json as well as its folder.
  if (options.dummy_weights && fs::is_regular_file(dir) && dir.filename() == "config.json")
    dir = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const bool file = fs::is_regular_file(dir);  // a GGUF file (the reader checks it is one)
  if (!file && !fs::is_directory(dir))
    throw IoError("model '" + options.model +
                  "' does not exist (expected a Hugging Face model folder or a .gguf file)");

  const auto start = std::chrono::steady_clock::now();
  if (!quiet)
    std::fprintf(stderr, "Loading %s%s ...\n", dir.string().c_str(),
                 options.dummy_weights ? " with dummy weights" : "");
  loaded.backend = make_backend(options.backend_options());
  const LoadOptions load{.dummy_weights = options.dummy_weights, .dummy_seed = options.dummy_seed};
  if (file) {
    // One parse gives the weights, the tokenizer and the stop ids.
    io::GgufModel gguf = io::load_gguf_model(dir);
    const std::string tokenizer_json = std::move(gguf.tokenizer_json);
    loaded.generation = gguf.generation;
    loaded.model = load_causal_lm(std::move(gguf), dir, *loaded.backend, load);
    loaded.tokenizer = options.tokenizer.empty()
                           ? Tokenizer::from_json_text(tokenizer_json, dir.string())
                           : load_tokenizer(options.tokenizer);
  } else {
    loaded.model = load_causal_lm(dir, *loaded.backend, load);
    load_folder_extras(dir, options, loaded);
  }
  loaded.load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) std::fprintf(stderr, "Loaded in %.2f s\n", loaded.load_seconds);
  return loaded;
}

Tokenizer load_tokenizer(const std::filesystem::path& path) {
  if (!io::is_gguf_file(path)) return Tokenizer::load(path);
  const auto mapped = io::MappedFile::open(path);
  const io::GgufFile file = io::parse_gguf(mapped->data(), mapped->size(), path.string());
  return Tokenizer::from_json_text(io::tokenizer_json_from_gguf(file, path.string()),
                                   path.string());
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& option) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 0 || value > INT32_MAX)
      throw InvalidArgument(option + ": '" + item +
                            "' is not a token id (expected e.g. 785,6722,315)");
    ids.push_back(static_cast<int32_t>(value));
    pos = comma + 1;
  }
  return ids;
}

}  // namespace infera::cli
