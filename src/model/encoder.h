// What the engine and the CLI need from an encoder-only model (ModernBERT and its family),
// whatever its architecture: last hidden states, and the head the checkpoint carries (masked-LM
// logits or sequence-classification logits). Encoders take the same packed, padding-free batch
// as decoders (ops/batch.h) without a KV cache; right-padded batches are packed at this API.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "io/weight_store.h"
#include "model/causal_lm.h"
#include "model/dummy_weights.h"
#include "ops/backend.h"
#include "ops/batch.h"

namespace infera {

enum class EncoderHead : uint8_t { None, MaskedLM, Classifier };

struct EncoderInfo {
  EncoderHead head = EncoderHead::None;
  std::vector<std::string> labels;  // classifier: id2label in id order
  int32_t cls_token_id = -1, sep_token_id = -1, mask_token_id = -1, pad_token_id = -1;
};

class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual const ModelInfo& info() const = 0;
  virtual const EncoderInfo& encoder_info() const = 0;
  virtual Backend& backend() const = 0;

  // Every row of `batch` (sequences packed end to end: query_start per sequence, positions the
  // offsets within each, no cache slots; see encoder_batch()) through the encoder; writes the
  // final-norm hidden states [T, hidden] row-major to `hidden`.
  virtual void hidden_states(const BatchDesc& batch, std::span<float> hidden) = 0;
  // The same hidden states [T, hidden] F32 left on the backend's device, for a model that
  // continues from them (the decision heads). Valid until the next call on this encoder.
  virtual Tensor hidden_states_on_device(const BatchDesc& batch) = 0;
  // Masked-LM logits [output_rows.size(), vocab] of the rows batch.output_rows lists.
  // InvalidArgument when the model has no masked-LM head.
  virtual void masked_lm_logits(const BatchDesc& batch, std::span<float> logits) = 0;
  // Sequence-classification logits [num_seqs, labels], pooled as the config says (the first
  // row, or the mean of the sequence's rows). InvalidArgument without a classifier head.
  virtual void classify(const BatchDesc& batch, std::span<float> logits) = 0;

  void set_activation_hook(ActivationHook hook) { hook_ = std::move(hook); }

 protected:
  ActivationHook hook_;
};

// The packed batch of these sequences (each non-empty): rows end to end, positions 0..len-1.
BatchDesc encoder_batch(std::span<const std::vector<int32_t>> sequences);

// A right-padded batch as Hugging Face tokenizers produce it: ids and attention_mask [batch,
// length] row-major, the mask 1 on a prefix of each row and 0 after it. Throws InvalidArgument
// for a mask that is not right padding, an empty row or mismatched sizes.
struct PaddedIds {
  int64_t batch = 0, length = 0;
  std::vector<int32_t> ids, attention_mask;
};
// The sequences of the unpadded rows (padding is dropped, never run).
std::vector<std::vector<int32_t>> unpad(const PaddedIds& padded);
// Hidden states of a right-padded batch: [batch, length, hidden], padded rows zero.
std::vector<float> padded_hidden_states(Encoder& model, const PaddedIds& padded);

// Loads the encoder in `dir` (config.json + safetensors) for its `model_type`.
std::unique_ptr<Encoder> load_encoder(const std::filesystem::path& dir, Backend& backend,
                                      const LoadOptions& options);

// Makes the tensor a model reads usable by its backend (quantizing it first, say); the default is
// Backend::prepare_weight.
using WeightPrepare = std::function<Tensor(const Tensor& host_weight)>;

// A ModernBERT backbone (bare ModernBertModel, no head) stored under `prefix` inside a larger
// checkpoint, as the decision model's "encoder.*". Tensors outside `prefix` belong to the host
// model, which checks them; tensors under it are checked here like a standalone encoder's.
struct EmbeddedEncoder {
  std::shared_ptr<const io::WeightStore> store;
  std::string prefix;
  WeightPrepare prepare;  // empty: the backend's prepare_weight
};
std::unique_ptr<Encoder> load_embedded_modernbert(const io::HfConfig& config,
                                                  EmbeddedEncoder source, Backend& backend);
// The backbone's tensor table under `prefix` (dummy weights, the host model's unknown-tensor
// check).
std::vector<WeightSpec> modernbert_backbone_specs(const io::HfConfig& config,
                                                  const std::string& prefix);

}  // namespace infera
