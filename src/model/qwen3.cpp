// Qwen3 decoder (transformers' Qwen3ForCausalLM): hyper-parameters, tensor-name table and forward
// pass in one place, written against the op interface only.
//   embed -> N x [rmsnorm, attention (q/k/v proj, per-head q/k rmsnorm, rope, causal GQA, o proj),
//   residual, rmsnorm, swiglu mlp, residual] -> rmsnorm -> lm head (tied to embed or not)
#include <cmath>
#include <set>
#include <stdexcept>
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
  Tensor x, xn, q, k, v, attn, proj, gate, up;
  Tensor head_in, logits;  // [rows asked for, hidden / vocab], grown on demand
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
    for (int64_t i = 0; i < p.layers; ++i) {
      LayerWeights& layer = layers_[static_cast<size_t>(i)];
      // q, k and v read the same normed x: prepared together, so that a device backend can place
      // them as one matrix (one GEMM instead of a launch for q and one for k and v).
      std::vector<Tensor> qkv_host;
      std::vector<Tensor LayerWeights::*> qkv_slots;
      for (const LayerTensor& t : kLayerTensors) {
        const std::string name = layer_prefix(i) + t.suffix;
        if (t.slot == &LayerWeights::q_proj || t.slot == &LayerWeights::k_proj ||
            t.slot == &LayerWeights::v_proj) {
          qkv_host.push_back(store_.require(name, t.shape(p)));
          qkv_slots.push_back(t.slot);
        } else {
          layer.*(t.slot) = w(name, t.shape(p));
        }
      }
      std::vector<Tensor> qkv = backend_.prepare_weights(qkv_host);
      if (qkv.size() != qkv_slots.size())
        throw std::logic_error("prepare_weights returned " + std::to_string(qkv.size()) +
                               " tensors for " + std::to_string(qkv_slots.size()));
      for (size_t j = 0; j < qkv.size(); ++j) layer.*(qkv_slots[j]) = std::move(qkv[j]);
    }
  }

  const ModelInfo& info() const override { return info_; }
  Backend& backend() const override { return backend_; }

  KvShape kv_shape() const override { return {p_.layers, p_.kv_heads, p_.head_dim}; }

  void forward(const BatchDesc& desc, KvPool& cache, std::span<float> logits) override {
    if (logits.size() != desc.output_rows.size() * static_cast<size_t>(p_.vocab))
      throw InvalidArgument("forward: logits buffer size does not match output rows x vocab");
    const Tensor out = run(desc, cache);
    if (!out.empty()) backend_.to_host(out, logits);
  }

  void forward_argmax(const BatchDesc& desc, KvPool& cache, std::span<int32_t> ids) override {
    if (ids.size() != desc.output_rows.size())
      throw InvalidArgument("forward_argmax: ids buffer size does not match output rows");
    const Tensor out = run(desc, cache);
    if (!out.empty()) backend_.argmax_rows(out, ids);
  }

  void forward_sample(const BatchDesc& desc, KvPool& cache, std::span<const RowSampling> rows,
                      std::span<SampledId> sampled) override {
    if (rows.size() != desc.output_rows.size() || sampled.size() != rows.size())
      throw InvalidArgument("forward_sample: rows or out size does not match output rows");
    const Tensor out = run(desc, cache);
    if (!out.empty()) backend_.sample_rows(out, rows, sampled);
  }

 private:
  // The forward pass up to the logits of the output rows, left on the backend (empty when the
  // batch asks for none).
  Tensor run(const BatchDesc& desc, KvPool& cache) {
    check_cache(cache);
    desc.validate(p_.vocab, p_.max_positions, cache.num_blocks, cache.block_size);
    const int64_t n = desc.num_tokens();
    ensure_scratch(n);
    const Batch batch = backend_.upload_batch(desc);

    Tensor x = s_.x.rows(0, n);
    backend_.embedding(embed_, batch.tokens, x);
    emit(x, "embed", -1);
    if (hook_) {
      for (int64_t il = 0; il < p_.layers; ++il)
        layer(static_cast<int>(il), n, batch, cache.layers[static_cast<size_t>(il)]);
    } else {
      stack(n, batch, cache);
    }
    if (desc.output_rows.empty()) return {};

    // Only the requested rows go through the final norm and the (large) LM head.
    const auto r = static_cast<int64_t>(desc.output_rows.size());
    if (s_.head_in.empty() || s_.head_in.dim(0) < r) {
      s_.head_in = backend_.alloc("head_in", DType::F32, {r, p_.hidden});
      s_.logits = backend_.alloc("logits", DType::F32, {r, p_.vocab});
    }
    Tensor head_in = s_.head_in.rows(0, r);
    backend_.gather_rows(x, batch.output_rows, head_in);
    backend_.rmsnorm(head_in, final_norm_, p_.eps, head_in);
    emit(head_in, "final_norm", -1);
    Tensor out = s_.logits.rows(0, r);
    backend_.matmul(head_in, lm_head_, out);
    return out;
  }

  // Without the activation hook: the layers as one op (ops/backend.h: exactly the fused ops a
  // hookless forward calls, which a backend may run as one kernel).
  void stack(int64_t n, const Batch& batch, KvPool& cache) {
    refs_.clear();
    for (int64_t il = 0; il < p_.layers; ++il) {
      const LayerWeights& w = layers_[static_cast<size_t>(il)];
      refs_.push_back({&w.attn_norm, &w.q_proj, &w.k_proj, &w.v_proj, &w.q_norm, &w.k_norm,
                       &w.o_proj, &w.mlp_norm, &w.gate_proj, &w.up_proj, &w.down_proj,
                       &cache.layers[static_cast<size_t>(il)]});
    }
    Tensor x = s_.x.rows(0, n), xn = s_.xn.rows(0, n), proj = s_.proj.rows(0, n);
    Tensor q = s_.q.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
    Tensor attn = s_.attn.rows(0, n), gate = s_.gate.rows(0, n), up = s_.up.rows(0, n);
    const DecoderStackParams params{p_.q_heads, p_.kv_heads, p_.head_dim, p_.eps, p_.rope_theta,
                                    1.0f / std::sqrt(static_cast<float>(p_.head_dim))};
    backend_.decoder_stack(x, refs_, batch, params, {&xn, &q, &k, &v, &attn, &proj, &gate, &up});
  }

  // With the activation hook: one op at a time, each activation handed to the hook.
  void layer(int il, int64_t n, const Batch& batch, KvLayer& cache) {
    const LayerWeights& w = layers_[static_cast<size_t>(il)];
    Tensor x = s_.x.rows(0, n), xn = s_.xn.rows(0, n), proj = s_.proj.rows(0, n);
    Tensor q = s_.q.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
    Tensor attn = s_.attn.rows(0, n), gate = s_.gate.rows(0, n), up = s_.up.rows(0, n);

    const Tensor* qkv_w[] = {&w.q_proj, &w.k_proj, &w.v_proj};
    Tensor* qkv[] = {&q, &k, &v};
    // The previous layer's residual add already normed x into xn (add_rmsnorm).
    if (il == 0) backend_.rmsnorm(x, w.attn_norm, p_.eps, xn);
    emit(xn, "attn_norm", il);
    backend_.matmul_multi(xn, qkv_w, qkv);
    Tensor qh = q.reshaped({n, p_.q_heads, p_.head_dim});
    Tensor kh = k.reshaped({n, p_.kv_heads, p_.head_dim});
    backend_.qk_norm_rope_kv_write(qh, kh, v.reshaped({n, p_.kv_heads, p_.head_dim}), w.q_norm,
                                   w.k_norm, p_.eps, p_.rope_theta, cache, batch);
    emit(qh, "q_rope", il);
    emit(kh, "k_rope", il);
    Tensor attn_h = attn.reshaped({n, p_.q_heads, p_.head_dim});
    backend_.attention(qh, cache, batch,
                       {.scale = 1.0f / std::sqrt(static_cast<float>(p_.head_dim)), .causal = true},
                       attn_h);
    emit(attn, "attn", il);
    const Tensor no_norm;
    const LayerWeights* next = il + 1 < p_.layers ? &layers_[static_cast<size_t>(il) + 1] : nullptr;
    const Tensor& next_norm = next ? next->attn_norm : no_norm;
    backend_.matmul(attn, w.o_proj, proj);
    backend_.add_rmsnorm(x, proj, w.mlp_norm, p_.eps, xn);
    emit(x, "attn_residual", il);

    backend_.matmul_swiglu_down(xn, w.gate_proj, w.up_proj, w.down_proj, gate, up, proj);
    if (!next_norm.empty())
      backend_.add_rmsnorm(x, proj, next_norm, p_.eps, xn);
    else
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

  // The cache must have been made for this model's kv_shape(), by any KV cache manager.
  void check_cache(const KvPool& cache) const {
    if (cache.layers.size() != static_cast<size_t>(p_.layers))
      throw InvalidArgument("forward: the KV cache has " + std::to_string(cache.layers.size()) +
                            " layers, the model " + std::to_string(p_.layers));
    for (const KvLayer& l : cache.layers)
      if (l.keys.rank() != 4 || l.keys.dim(1) != cache.num_blocks || l.keys.dim(0) != p_.kv_heads ||
          l.keys.dim(2) != cache.block_size || l.keys.dim(3) != p_.head_dim ||
          !(l.values.shape() == l.keys.shape()))
        throw InvalidArgument("forward: KV cache pool " + l.keys.shape().str() +
                              " does not match [" + std::to_string(p_.kv_heads) +
                              ", blocks, block_size, " + std::to_string(p_.head_dim) + "]");
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
          std::move(s_.head_in),
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
  std::vector<DecoderLayerRefs> refs_;  // stack()'s view of layers_, rebuilt per call
  Scratch s_;
};

std::unique_ptr<CausalLM> load_qwen3(ModelSource source, Backend& backend,
                                     const LoadOptions& options) {
  const Qwen3Params p = Qwen3Params::from(source.config);
  io::WeightStore store = source.weights          ? std::move(*source.weights)
                          : options.dummy_weights ? make_dummy_weights(qwen3_weight_specs(p),
                                                                       p.dtype, options.dummy_seed)
                                                  : io::WeightStore::open_folder(source.path);
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
  // What the file holds decides (a GGUF file has no torch_dtype; its matrices may be quantized).
  const std::string q_proj = layer_prefix(0) + "self_attn.q_proj.weight";
  if (store.contains(q_proj)) info.weight_dtype = store.get(q_proj).dtype();
  info.weight_format = source.weight_format.empty() ? std::string(dtype_name(info.weight_dtype))
                                                    : source.weight_format;
  info.weight_bytes = static_cast<int64_t>(store.total_bytes());
  if (store.contains("model.embed_tokens.weight"))
    info.embedding_bytes = static_cast<int64_t>(store.get("model.embed_tokens.weight").nbytes());
  info.tied_embeddings = p.tied;
  for (const WeightSpec& s : qwen3_weight_specs(p)) info.parameters += s.shape.numel();
  info.name = "Qwen3-" + format_parameter_count(info.parameters);
  return std::make_unique<Qwen3>(std::move(info), p, std::move(store), backend);
}

}  // namespace

const ModelFactory kQwen3Factory{"qwen3", &load_qwen3, [](const io::HfConfig& config) {
                                   return qwen3_weight_specs(Qwen3Params::from(config));
                                 }};

}  // namespace infera
