// The decision model of specs/decision-model.md (`decision-model/1`): a ModernBERT encoder (the
// project's own, loaded from the checkpoint's "encoder.*" tensors), global decision-head layers,
// head_norm, an option scorer read at the marker tokens and an action head fed with the [CLS]
// vector plus four scoring features.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "decision/decision_config.h"
#include "decision/weight_format.h"
#include "model/encoder.h"
#include "ops/backend.h"

namespace infera::decision {

struct ModelOptions {
  bool dummy_weights = false;  // seeded random weights of the config's shapes (benchmarks)
  uint64_t dummy_seed = 0;
  WeightFormat weights = WeightFormat::Stored;
  // The last head layer computes queries, Wo, MLP and norms only for position 0 and the
  // marker rows (keys and values still for every row).
  bool prune_last_layer = true;
};

// One question's outputs (the token-id form of the spec).
struct QuestionOutput {
  std::vector<float> option_logits, option_probs;
  std::array<float, 4> features{};  // p1, p2, p1 - p2, entropy / ln(options)
  std::vector<float> action_logits, action_probs;
  int32_t action = 0;  // argmax of action_probs
};

class DecisionModel {
 public:
  // Loads DIR/encoder_config.json, DIR/decision_config.json and DIR/model.safetensors (every
  // tensor's name and shape checked; unknown tensors rejected). With dummy weights only the two
  // configs are read.
  static std::unique_ptr<DecisionModel> load(const std::filesystem::path& dir, Backend& backend,
                                             const ModelOptions& options);
  ~DecisionModel();

  const DecisionConfig& config() const { return config_; }
  const ModelInfo& encoder_info() const { return encoder_->info(); }
  int64_t vocab() const { return encoder_->info().vocab; }
  const QuantReport& quant_report() const { return quant_report_; }
  Backend& backend() const { return backend_; }
  bool prune_last_layer() const { return prune_; }
  void set_prune_last_layer(bool on) { prune_ = on; }

  // Checks one prepared sequence: 1..max_length ids inside the vocabulary with at least one
  // marker. InvalidArgument naming `what` and the problem.
  void check_input(std::span<const int32_t> ids, const std::string& what) const;
  // Runs the sequences as one packed batch (no padding is ever computed); outputs in input order.
  std::vector<QuestionOutput> forward(std::span<const std::vector<int32_t>> sequences);

 private:
  struct HeadLayer {
    Tensor attn_norm, wq, wk, wv, wo, mlp_norm, w1, w2;
  };
  struct Scratch {
    int64_t rows = 0;
    Tensor xn, q, k, v, attn, proj, inner;
  };
  DecisionModel(Backend& backend) : backend_(backend) {}
  void head_layer(const HeadLayer& L, Tensor& x, const Batch& batch, int64_t n);
  void pruned_head_layer(const HeadLayer& L, const Tensor& x, const BatchDesc& desc,
                         const Batch& batch, Tensor& x_sel);
  void output_and_mlp(const HeadLayer& L, const Tensor& attn, Tensor& x, Tensor& xn, Tensor& proj,
                      Tensor& inner);
  void ensure_scratch(int64_t rows);
  Tensor& grow(Tensor& t, const char* name, int64_t rows, int64_t cols);
  void postprocess(std::span<const float> h_sel, std::span<const int32_t> first_sel,
                   std::vector<QuestionOutput>& out) const;

  Backend& backend_;
  DecisionConfig config_;
  std::unique_ptr<Encoder> encoder_;
  std::shared_ptr<const io::WeightStore> store_;
  int64_t hidden_ = 0, heads_ = 0, head_dim_ = 0;
  float eps_ = 1e-5f;
  std::vector<HeadLayer> heads_layers_;
  Tensor head_norm_;
  // Scorer and action head run on the host in the configured dtype, from f32 copies of their
  // weights (never quantized).
  std::vector<float> scorer_w_, action0_w_, action0_b_, action2_w_, action2_b_;
  float scorer_b_ = 0;
  QuantReport quant_report_;
  bool prune_ = true;
  Scratch s_;
  Tensor sel_x_, sel_xn_, sel_q_, sel_attn_, sel_proj_, sel_inner_, kv_keys_, kv_values_;
};

}  // namespace infera::decision
