// Architectures by config.json `model_type`. Each architecture file defines its factory; the
// table in model_registry.cpp lists them (static libraries drop self-registering objects).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "model/encoder.h"

namespace infera {

struct ModelFactory {
  const char* model_type;
  std::unique_ptr<CausalLM> (*load)(const std::filesystem::path& dir, const io::HfConfig& config,
                                    Backend& backend, const LoadOptions& options);
};

extern const ModelFactory kQwen3Factory;

struct EncoderFactory {
  const char* model_type;
  std::unique_ptr<Encoder> (*load)(const std::filesystem::path& dir, const io::HfConfig& config,
                                   Backend& backend, const LoadOptions& options);
};

extern const EncoderFactory kModernBertFactory;

// "0.6B", "1.7B", "14M": the parameter count the way model names state it.
std::string format_parameter_count(int64_t parameters);

}  // namespace infera
