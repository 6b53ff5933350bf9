// Qwen3 decoder (transformers' Qwen3ForCausalLM): hyper-parameters, tensor-name table and forward
// pass in one place, written against the op interface only.
//   embed -> N x [rmsnorm, attention (q/k/v proj, per-head q/k rmsnorm, rope, causal GQA, o proj),
//   residual, rmsnorm, swiglu mlp, residual] -> rmsnorm -> lm head (tied to embed or not)
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "infera/error.h"
#include "io/hf_config.h"
#include "io/weight_store.h"
#include "model/causal_lm.h"
#include "model/dummy_weights.h"
#include "model/model_registry.h"

namespace infera {
namespace {

struct Qwen3Params {
  int64_t vocab, hidden, intermediate, layers, q_heads, kv_heads, head_dim, max_positions;
  float eps;
  double rope_theta;
  bool tied;
  DType dtype;

  static Qwen3Params from(const io::HfConfig& c) {
    Qwen3Params p{};
    p.vocab = c.get_int("vocab_size");
    p.hidden = c.get_int("hidden_size");
    p.intermediate = c.get_int("intermediate_size");
    p.layers = c.get_int("num_hidden_layers");
    p.q_heads = c.get_int("num_attention_heads");
    p.kv_heads = c.get_int_or("num_key_value_heads", p.q_heads);
    p.head_dim = c.get_int_or("head_dim", p.hidden / p.q_heads);
    p.max_positions = c.get_int_or("max_position_embeddings", 40960);
    p.eps = static_cast<float>(c.get_float_or("rms_norm_eps", 1e-6));
    p.rope_theta = c.rope_theta(1e6);
    p.tied = c.get_bool_or("tie_word_embeddings", false);
    p.dtype = c.weight_dtype().value_or(DType::BF16);
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) throw FormatError(c.origin() + ": " + what);
    };
    check(p.vocab <= (int64_t{1} << 24), "vocab_size too large");
    check(p.hidden <= 65536 && p.intermediate <= 1 << 20 && p.layers <= 1024,
          "hidden_size, intermediate_size or num_hidden_layers out of range");
    check(p.q_heads <= 1024 && p.kv_heads > 0 && p.q_heads % p.kv_heads == 0,
          "num_attention_heads must be a multiple of num_key_value_heads");
    check(p.head_dim > 0 && p.head_dim % 2 == 0 && p.head_dim <= 1024,
          "head_dim must be even and at most 1024");
    check(p.eps > 0 && p.rope_theta > 0, "rms_norm_eps and rope_theta must be positive");
    if (c.has("rope_scaling") && !c.json()["rope_scaling"].is_null())
      throw FormatError(c.origin() + ": rope_scaling is not supported yet");
    return p;
  }
};

struct LayerWeights {
  Tensor attn_norm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  Tensor mlp_norm, gate_proj, up_proj, down_proj;
};

// The tensor-name table, the one place that names and shapes the weights: the loader, the
// dummy-weight maker and the unknown-tensor check all read it.
struct LayerTensor {
  const char* suffix;  // after "model.layers.<i>."
  Tensor LayerWeights::*slot;
  Shape (*shape)(const Qwen3Params&);
  bool norm;  // norm weights are initialised around 1 in dummy mode
};
using P = const Qwen3Params&;
const LayerTensor kLayerTensors[] = {
    {"input_layernorm.weight", &LayerWeights::attn_norm, [](P p) { return Shape{p.hidden}; }, true},
    {"self_attn.q_proj.weight", &LayerWeights::q_proj,
     [](P p) {
       return Shape{p.q_heads * p.head_dim, p.hidden};
     },
     false},
    {"self_attn.k_proj.weight", &LayerWeights::k_proj,
     [](P p) {
       return Shape{p.kv_heads * p.head_dim, p.hidden};
     },
     false},
    {"self_attn.v_proj.weight", &LayerWeights::v_proj,
     [](P p) {
       return Shape{p.kv_heads * p.head_dim, p.hidden};
     },
     false},
    {"self_attn.o_proj.weight", &LayerWeights::o_proj,
     [](P p) {
       return Shape{p.hidden, p.q_heads * p.head_dim};
     },
     false},
    {"self_attn.q_norm.weight", &LayerWeights::q_norm, [](P p) { return Shape{p.head_dim}; }, true},
    {"self_attn.k_norm.weight", &LayerWeights::k_norm, [](P p) { return Shape{p.head_dim}; }, true},
    {"post_attention_layernorm.weight", &LayerWeights::mlp_norm,
     [](P p) { return Shape{p.hidden}; }, true},
    {"mlp.gate_proj.weight", &LayerWeights::gate_proj,
     [](P p) {
       return Shape{p.intermediate, p.hidden};
     },
     false},
    {"mlp.up_proj.weight", &LayerWeights::up_proj,
     [](P p) {
       return Shape{p.intermediate, p.hidden};
     },
     false},
    {"mlp.down_proj.weight", &LayerWeights::down_proj,
     [](P p) {
       return Shape{p.hidden, p.intermediate};
     },
     false},
};

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::vector<WeightSpec> qwen3_weight_specs(const Qwen3Params& p) {
  std::vector<WeightSpec> specs = {{"model.embed_tokens.weight", {p.vocab, p.hidden}, 0.02f},
                                   {"model.norm.weight", {p.hidden}, -1.0f}};
  if (!p.tied) specs.push_back({"lm_head.weight", {p.vocab, p.hidden}, 0.02f});
  for (int64_t i = 0; i < p.layers; ++i)
    for (const LayerTensor& t : kLayerTensors)
      specs.push_back({layer_prefix(i) + t.suffix, t.shape(p), t.norm ? -1.0f : 0.02f});
  return specs;
}

// Activation buffers for up to `rows` tokens, reused across calls.
struct Scratch {
  int64_t rows = 0;
  Tensor x, xn, q, k, v, attn, proj, gate, up, head_in;
  Tensor logits;  // [rows asked for, vocab], grown on demand
};

class Qwen3 final : public CausalLM {
 public:
  Qwen3(ModelInfo info, Qwen3Params p, io::WeightStore store, Backend& backend)
      : info_(std::move(info)), p_(p), store_(std::move(store)), backend_(backend) {
    reject_unknown_tensors();
    auto w = [&](const std::string& name, Shape shape) {
      return backend_.prepare_weight(store_.require(name, shape));
    };
    embed_ = w("model.embed_tokens.weight", {p.vocab, p.hidden});
    final_norm_ = w("model.norm.weight", {p.hidden});
    lm_head_ = p.tied ? embed_ : w("lm_head.weight", {p.vocab, p.hidden});
    layers_.resize(static_cast<size_t>(p.layers));
    for (int64_t i = 0; i < p.layers; ++i)
      for (const LayerTensor& t : kLayerTensors)
        layers_[static_cast<size_t>(i)].*(t.slot) = w(layer_prefix(i) + t.suffix, t.shape(p));
  }

  const ModelInfo& info() const override { return info_; }
  Backend& backend() const override { return backend_; }

  KvCache new_cache(int64_t capacity) const override {
    if (capacity <= 0 || capacity > p_.max_positions)
      throw InvalidArgument("KV cache of " + std::to_string(capacity) +
                            " positions: the model supports 1 to " +
                            std::to_string(p_.max_positions));
    KvCache cache;
    cache.capacity = capacity;
    for (int64_t i = 0; i < p_.layers; ++i) {
      const std::string l = "kv." + std::to_string(i);
      cache.keys.push_back(
          backend_.alloc(l + ".k", DType::F32, {p_.kv_heads, capacity, p_.head_dim}));
      cache.values.push_back(
          backend_.alloc(l + ".v", DType::F32, {p_.kv_heads, capacity, p_.head_dim}));
    }
    return cache;
  }

  void forward(std::span<const int32_t> tokens, KvCache& cache, std::span<const int64_t> logit_rows,
               std::span<float> logits) override {
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) throw InvalidArgument("forward: no tokens");
    if (cache.keys.size() != static_cast<size_t>(p_.layers) || cache.length + n > cache.capacity)
      throw InvalidArgument("forward: " + std::to_string(cache.length + n) +
                            " positions exceed the KV cache capacity " +
                            std::to_string(cache.capacity));
    if (logits.size() != logit_rows.size() * static_cast<size_t>(p_.vocab))
      throw InvalidArgument("forward: logits buffer size does not match logit_rows x vocab");
    for (int64_t r : logit_rows)
      if (r < 0 || r >= n) throw InvalidArgument("forward: logit row out of range");

    ensure_scratch(n);
    std::vector<int32_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      positions[static_cast<size_t>(i)] = static_cast<int32_t>(cache.length + i);

    Tensor x = s_.x.rows(0, n);
    backend_.embedding(embed_, tokens, x);
    emit(x, "embed", -1);
    for (int64_t il = 0; il < p_.layers; ++il) layer(static_cast<int>(il), n, positions, cache);
    cache.length += n;
    if (logit_rows.empty()) return;

    // Only the requested rows go through the final norm and the (large) LM head.
    const auto r = static_cast<int64_t>(logit_rows.size());
    Tensor head_in = s_.head_in.rows(0, r);
    for (int64_t i = 0; i < r; ++i)
      backend_.copy_rows(x.rows(logit_rows[static_cast<size_t>(i)], 1), head_in, i);
    backend_.rmsnorm(head_in, final_norm_, p_.eps, head_in);
    emit(head_in, "final_norm", -1);
    if (s_.logits.empty() || s_.logits.dim(0) < r)
      s_.logits = backend_.alloc("logits", DType::F32, {r, p_.vocab});
    Tensor out = s_.logits.rows(0, r);
    backend_.matmul(head_in, lm_head_, out);
    backend_.to_host(out, logits);
  }

 private:
  void layer(int il, int64_t n, std::span<const int32_t> positions, KvCache& cache) {
    const LayerWeights& w = layers_[static_cast<size_t>(il)];
    Tensor x = s_.x.rows(0, n), xn = s_.xn.rows(0, n), proj = s_.proj.rows(0, n);
    Tensor q = s_.q.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
    Tensor attn = s_.attn.rows(0, n), gate = s_.gate.rows(0, n), up = s_.up.rows(0, n);

    backend_.rmsnorm(x, w.attn_norm, p_.eps, xn);
    emit(xn, "attn_norm", il);
    backend_.matmul(xn, w.q_proj, q);
    backend_.matmul(xn, w.k_proj, k);
    backend_.matmul(xn, w.v_proj, v);
    Tensor qh = q.reshaped({n, p_.q_heads, p_.head_dim});
    Tensor kh = k.reshaped({n, p_.kv_heads, p_.head_dim});
    backend_.rmsnorm(qh, w.q_norm, p_.eps, qh);
    backend_.rmsnorm(kh, w.k_norm, p_.eps, kh);
    backend_.rope(qh, positions, p_.rope_theta);
    backend_.rope(kh, positions, p_.rope_theta);
    emit(qh, "q_rope", il);
    emit(kh, "k_rope", il);
    backend_.kv_append(kh, cache.keys[static_cast<size_t>(il)], cache.length);
    backend_.kv_append(v.reshaped({n, p_.kv_heads, p_.head_dim}),
                       cache.values[static_cast<size_t>(il)], cache.length);
    Tensor attn_h = attn.reshaped({n, p_.q_heads, p_.head_dim});
    backend_.attention_causal(qh, cache.keys[static_cast<size_t>(il)],
                              cache.values[static_cast<size_t>(il)], cache.length,
                              1.0f / std::sqrt(static_cast<float>(p_.head_dim)), attn_h);
    emit(attn, "attn", il);
    backend_.matmul(attn, w.o_proj, proj);
    backend_.add(x, proj, x);
    emit(x, "attn_residual", il);

    backend_.rmsnorm(x, w.mlp_norm, p_.eps, xn);
    backend_.matmul(xn, w.gate_proj, gate);
    backend_.matmul(xn, w.up_proj, up);
    backend_.swiglu(gate, up, gate);
    backend_.matmul(gate, w.down_proj, proj);
    backend_.add(x, proj, x);
    emit(x, "layer_out", il);
  }

  // A tensor the config does not account for means the config and the weights disagree (e.g.
  // more layers in the file than num_hidden_layers): fail rather than run a different model.
  void reject_unknown_tensors() const {
    std::set<std::string> expected;
    for (const WeightSpec& spec : qwen3_weight_specs(p_)) expected.insert(spec.name);
    for (const std::string& name : store_.names()) {
      if (expected.count(name) || (p_.tied && name == "lm_head.weight")) continue;
      throw FormatError("unexpected tensor " + name +
                        ": not part of a Qwen3 model with this config.json (num_hidden_layers=" +
                        std::to_string(p_.layers) +
                        ", tie_word_embeddings=" + (p_.tied ? "true" : "false") + ")");
    }
  }

  void ensure_scratch(int64_t n) {
    if (n <= s_.rows) return;
    const int64_t q = p_.q_heads * p_.head_dim, kv = p_.kv_heads * p_.head_dim;
    auto a = [&](const char* name, int64_t cols) {
      return backend_.alloc(name, DType::F32, {n, cols});
    };
    s_ = {n,
          a("x", p_.hidden),
          a("xn", p_.hidden),
          a("q", q),
          a("k", kv),
          a("v", kv),
          a("attn", q),
          a("proj", p_.hidden),
          a("gate", p_.intermediate),
          a("up", p_.intermediate),
          a("head_in", p_.hidden),
          std::move(s_.logits)};
  }

  void emit(const Tensor& t, std::string_view name, int layer) const {
    if (hook_) hook_(t, name, layer);
  }

  ModelInfo info_;
  Qwen3Params p_;
  io::WeightStore store_;  // keeps the mmapped weights alive
  Backend& backend_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  Scratch s_;
};

std::unique_ptr<CausalLM> load_qwen3(const std::filesystem::path& dir, const io::HfConfig& config,
                                     Backend& backend, const LoadOptions& options) {
  const Qwen3Params p = Qwen3Params::from(config);
  io::WeightStore store =
      options.dummy_weights ? make_dummy_weights(qwen3_weight_specs(p), p.dtype, options.dummy_seed)
                            : io::WeightStore::open_folder(dir);
  ModelInfo info;
  info.architecture = "Qwen3";
  info.layers = p.layers;
  info.hidden = p.hidden;
  info.q_heads = p.q_heads;
  info.kv_heads = p.kv_heads;
  info.head_dim = p.head_dim;
  info.vocab = p.vocab;
  info.max_positions = p.max_positions;
  info.weight_dtype = p.dtype;
  info.tied_embeddings = p.tied;
  for (const WeightSpec& s : qwen3_weight_specs(p)) info.parameters += s.shape.numel();
  info.name = "Qwen3-" + format_parameter_count(info.parameters);
  return std::make_unique<Qwen3>(std::move(info), p, std::move(store), backend);
}

}  // namespace

const ModelFactory kQwen3Factory{"qwen3", &load_qwen3};

}  // namespace infera
