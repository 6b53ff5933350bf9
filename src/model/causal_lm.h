// What the engine needs from a decoder-only language model, whatever its architecture.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infera/tensor.h"
#include "ops/backend.h"
#include "ops/batch.h"

namespace infera {

struct ModelInfo {
  std::string architecture;  // "Qwen3"
  std::string name;          // folder name or "Qwen3-0.6B (dummy)"
  int64_t layers = 0, hidden = 0, q_heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t max_positions = 0;
  int64_t parameters = 0;            // weights counted once (tied embeddings once)
  DType weight_dtype = DType::BF16;  // of the layer matrices (a GGUF file may mix types)
  std::string weight_format;         // "BF16", or a GGUF file type such as "Q4_K_M"
  int64_t weight_bytes = 0;          // every weight tensor as stored (tied embeddings once)
  int64_t embedding_bytes = 0;       // the embedding table as stored
  bool tied_embeddings = false;
  std::string summary() const;  // "Qwen3-0.6B (28 layers, 1024 dim, 16 Q heads, 8 KV heads)"
};

// Called with each named intermediate activation ("attn_norm", "q_proj", ...) and its layer
// (-1 outside layers), to locate a mismatch with a reference layer by layer.
using ActivationHook = ActivationEmit;  // ops/backend.h: what the ops' compositions hand on

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelInfo& info() const = 0;
  virtual Backend& backend() const = 0;
  // What one cached token needs: the engine's KV cache manager allocates pools of this shape.
  virtual KvShape kv_shape() const = 0;

  // Runs every row of `batch` (any mix of sequences, prefill chunks and decode tokens), writes
  // their keys and values to `cache` at the batch's slots, and writes the logits of the rows in
  // batch.output_rows to `logits`, row-major [output_rows.size(), vocab]. Throws InvalidArgument
  // for a batch that does not fit the model or the cache (nothing is written then).
  virtual void forward(const BatchDesc& batch, KvPool& cache, std::span<float> logits) = 0;
  // forward() followed by a greedy choice per output row: ids[i] is the index of the largest
  // logit of output row i (ties: the lowest; NaN never wins), -1 when none is above -inf. A model
  // overrides it to keep the logits on the backend (Backend::argmax_rows), so that a device
  // backend sends only the ids to the host; the default reads the logits back and picks there.
  virtual void forward_argmax(const BatchDesc& batch, KvPool& cache, std::span<int32_t> ids);
  // forward() followed by Backend::sample_rows over the output rows' logits where they are (only
  // for backends that report supports(Op::SampleRows)): rows[i] filters output row i, out[i]
  // receives its choice. The default reads the logits back and asks the backend anyway, which
  // throws for backends that do not sample.
  virtual void forward_sample(const BatchDesc& batch, KvPool& cache,
                              std::span<const RowSampling> rows, std::span<SampledId> out);

  void set_activation_hook(ActivationHook hook) { hook_ = std::move(hook); }

 protected:
  ActivationHook hook_;
};

// How to obtain weights.
struct LoadOptions {
  bool dummy_weights = false;  // seeded random weights of the right shapes; no weight file read
  uint64_t dummy_seed = 0;
};

namespace io {
struct GgufModel;
}

// Loads the model at `path` on `backend`: a Hugging Face folder (config.json + safetensors, by
// its `model_type`) or a GGUF file (llama.cpp's layout, by general.architecture). Any regular
// file is read as GGUF, so a wrong or damaged file fails with the GGUF reader's FormatError
// naming the file and the field. --dummy-weights needs a folder (its config.json).
std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& path, Backend& backend,
                                         const LoadOptions& options);
// The same from a GGUF file already opened (callers that also want its tokenizer and stop ids
// parse it once). `file` names the model.
std::unique_ptr<CausalLM> load_causal_lm(io::GgufModel&& gguf, const std::filesystem::path& file,
                                         Backend& backend, const LoadOptions& options);

}  // namespace infera
