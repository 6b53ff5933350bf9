// Architectures by config.json `model_type`. Each architecture file defines its factory; the
// table in model_registry.cpp lists them (static libraries drop self-registering objects).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "io/weight_store.h"
#include "model/causal_lm.h"
#include "model/dummy_weights.h"
#include "model/encoder.h"

namespace infera {

// What a model path provides to an architecture's loader.
struct ModelSource {
  std::filesystem::path path;  // the folder or file (names the model)
  io::HfConfig config;         // config.json, or its equivalent built from GGUF metadata
  // Already opened (a GGUF file's tensors under Hugging Face names); absent: the folder's
  // safetensors, or dummy weights when asked for.
  std::optional<io::WeightStore> weights;
  std::string weight_format;  // a GGUF file type ("Q4_K_M"); empty: named by the dtype
};

struct ModelFactory {
  const char* model_type;
  std::unique_ptr<CausalLM> (*load)(ModelSource source, Backend& backend,
                                    const LoadOptions& options);
  // The weights a config implies (names, shapes, dummy init), for dummy weights.
  std::vector<WeightSpec> (*weight_specs)(const io::HfConfig& config);
};

extern const ModelFactory kQwen3Factory;

struct EncoderFactory {
  const char* model_type;
  std::unique_ptr<Encoder> (*load)(const std::filesystem::path& dir, const io::HfConfig& config,
                                   Backend& backend, const LoadOptions& options);
};

extern const EncoderFactory kModernBertFactory;

// Seeded random weights (dtype: the config's torch_dtype, else BF16) for a decoder config, as
// --dummy-weights loads them: `infera quantize --dummy-weights` writes these to GGUF so that
// speed can be compared on a real shape without downloading weights.
io::WeightStore make_dummy_causal_lm_weights(const io::HfConfig& config, uint64_t seed);

// "0.6B", "1.7B", "14M": the parameter count the way model names state it.
std::string format_parameter_count(int64_t parameters);

}  // namespace infera
