// What the engine needs from a decoder-only language model, whatever its architecture.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infera/tensor.h"
#include "io/hf_config.h"
#include "ops/backend.h"

namespace infera {

struct ModelInfo {
  std::string architecture;  // "Qwen3"
  std::string name;          // folder name or "Qwen3-0.6B (dummy)"
  int64_t layers = 0, hidden = 0, q_heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t max_positions = 0;
  int64_t parameters = 0;  // weights counted once (tied embeddings once)
  DType weight_dtype = DType::BF16;
  bool tied_embeddings = false;
  std::string summary() const;  // "Qwen3-0.6B (28 layers, 1024 dim, 16 Q heads, 8 KV heads)"
};

// Keys and values of every layer for one sequence, pre-allocated for `capacity` positions.
struct KvCache {
  std::vector<Tensor> keys, values;  // per layer, [kv_heads, capacity, head_dim]
  int64_t capacity = 0;
  int64_t length = 0;  // positions filled
};

// Called with each named intermediate activation ("attn_norm", "q_proj", ...) and its layer
// (-1 outside layers), to locate a mismatch with a reference layer by layer.
using ActivationHook = std::function<void(const Tensor&, std::string_view name, int layer)>;

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelInfo& info() const = 0;
  virtual Backend& backend() const = 0;
  virtual KvCache new_cache(int64_t capacity) const = 0;

  // Runs `tokens` at positions [cache.length, cache.length + tokens.size()), appends their keys
  // and values to the cache, and writes the logits of the token rows listed in `logit_rows`
  // (indices into `tokens`) to `logits`, row-major [logit_rows.size(), vocab].
  virtual void forward(std::span<const int32_t> tokens, KvCache& cache,
                       std::span<const int64_t> logit_rows, std::span<float> logits) = 0;

  void set_activation_hook(ActivationHook hook) { hook_ = std::move(hook); }

 protected:
  ActivationHook hook_;
};

// How to obtain weights.
struct LoadOptions {
  bool dummy_weights = false;  // seeded random weights of the right shapes; no weight file read
  uint64_t dummy_seed = 0;
};

// Loads the model in `dir` (config.json + safetensors) for its `model_type`, on `backend`.
std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& dir, Backend& backend,
                                         const LoadOptions& options);

}  // namespace infera
