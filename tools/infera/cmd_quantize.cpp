// `infera quantize`: a Hugging Face Qwen3 folder to a GGUF file (llama.cpp's format and names),
// in f32 / f16 / bf16 / q8_0 / q4_0 / q4_k_m; the per-tensor rule is in src/io/gguf_convert.h.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "commands.h"
#include "infera/error.h"
#include "io/gguf_convert.h"
#include "io/hf_config.h"
#include "model/model_registry.h"

namespace infera::cli {
namespace {

struct QuantizeOptions {
  std::string model;
  std::string type;
  std::string out;
  std::string tokenizer;
  int threads = 0;
  bool dummy_weights = false;
  uint64_t dummy_seed = 0;
};

void quantize(const QuantizeOptions& o) {
  const io::GgufFileType type = io::parse_gguf_file_type(o.type);
  // A GGUF input is refused rather than converted: its matrices may already be rounded to a
  // block type, and quantizing again adds a second rounding the result would not show.
  if (std::filesystem::is_regular_file(o.model))
    throw InvalidArgument("quantize --model " + o.model +
                          ": takes a Hugging Face folder (config.json + full-precision "
                          "safetensors), not a file; re-quantizing a GGUF file compounds rounding");
  std::optional<io::WeightStore> dummy;
  if (o.dummy_weights)
    dummy = make_dummy_causal_lm_weights(
        io::HfConfig::load(std::filesystem::path(o.model) / "config.json"), o.dummy_seed);
  const auto start = std::chrono::steady_clock::now();
  size_t count = 0;
  io::ConvertOptions options;
  options.tokenizer_dir = o.tokenizer;
  options.threads = o.threads;
  options.weights = dummy ? &*dummy : nullptr;
  options.progress = [&](const io::ConvertedTensor& t) {
    std::fprintf(stderr, "\r[%zu] %-32s %-5s %-16s", ++count, t.gguf_name.c_str(),
                 std::string(dtype_name(t.dtype)).c_str(), t.shape.str().c_str());
  };
  const auto tensors = io::convert_qwen3_to_gguf(o.model, type, o.out, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(o.out, ec);
  std::fprintf(stderr, "\nWrote %s: %zu tensors, %s, %.1f MB in %.1f s\n", o.out.c_str(),
               tensors.size(), io::gguf_file_type_name(type), ec ? 0.0 : double(bytes) / 1e6,
               seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opts = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Convert a Hugging Face model folder to GGUF");
  cmd->add_option("--model", opts->model, "Hugging Face model folder (config.json, safetensors)")
      ->required();
  cmd->add_option("--type", opts->type, "f32, f16, bf16, q8_0, q4_0 or q4_k_m")->required();
  cmd->add_option("--out", opts->out, "GGUF file to write")->required();
  cmd->add_option("--tokenizer", opts->tokenizer,
                  "Folder with tokenizer.json and tokenizer_config.json (default: --model)");
  cmd->add_option("--threads", opts->threads, "Threads quantizing rows (default: one per core)");
  cmd->add_flag("--dummy-weights", opts->dummy_weights,
                "Write seeded random weights of config.json's shapes (the same as --dummy-weights "
                "elsewhere) instead of reading safetensors: speed comparisons on a real shape");
  cmd->add_option("--dummy-seed", opts->dummy_seed, "Seed of --dummy-weights")
      ->capture_default_str();
  cmd->callback([opts] { quantize(*opts); });
}

}  // namespace infera::cli
