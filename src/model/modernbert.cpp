// ModernBERT encoder (transformers' ModernBertModel, ModernBertForMaskedLM,
// ModernBertForSequenceClassification): hyper-parameters, tensor-name table and forward pass in
// one place, written against the op interface only.
//   embed -> LayerNorm -> N x [attn_norm (none in layer 0), fused Wqkv, rope (the layer type's
//   theta), bidirectional attention (global, or local |i - j| <= local_attention / 2), Wo,
//   residual, mlp_norm, Wi -> (input, gate), GeGLU, Wo, residual] -> final LayerNorm
//   masked-LM head: dense, GELU, LayerNorm, decoder (tied to the embedding) + bias
//   classifier head: pool (first row or mean), dense, GELU, LayerNorm, classifier + bias
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "infera/error.h"
#include "io/hf_config.h"
#include "io/weight_store.h"
#include "model/dummy_weights.h"
#include "model/encoder.h"
#include "model/model_registry.h"

namespace infera {
namespace {

struct ModernBertParams {
  int64_t vocab, hidden, intermediate, layers, heads, head_dim, max_positions, window;
  float eps;
  double global_theta, local_theta;
  std::vector<bool> global;  // per layer: full attention (else local)
  bool norm_bias, attention_bias, mlp_bias, classifier_bias, decoder_bias, tied, mean_pooling;
  EncoderInfo enc;
  std::string
      prefix;  // "model." when a head wraps the backbone; "encoder." inside a decision model
  bool embedded = false;  // part of a larger checkpoint: tensors outside `prefix` are not ours
  DType dtype;

  static ModernBertParams from(const io::HfConfig& c) {
    ModernBertParams p{};
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) throw FormatError(c.origin() + ": " + what);
    };
    p.vocab = c.get_int("vocab_size");
    p.hidden = c.get_int("hidden_size");
    p.intermediate = c.get_int("intermediate_size");
    p.layers = c.get_int("num_hidden_layers");
    p.heads = c.get_int("num_attention_heads");
    p.max_positions = c.get_int_or("max_position_embeddings", 8192);
    check(p.vocab <= (int64_t{1} << 24), "vocab_size too large");
    check(p.hidden <= 65536 && p.intermediate <= 1 << 20 && p.layers <= 1024 && p.heads <= 1024,
          "hidden_size, intermediate_size, num_hidden_layers or num_attention_heads out of range");
    check(p.hidden % p.heads == 0, "hidden_size must be a multiple of num_attention_heads");
    p.head_dim = p.hidden / p.heads;
    check(p.head_dim % 2 == 0, "the head size hidden_size / num_attention_heads must be even");
    p.eps = static_cast<float>(c.get_float_or("norm_eps", 1e-5));
    check(p.eps > 0, "norm_eps must be positive");
    const int64_t local = c.get_int_or("local_attention", 128);
    p.window = local / 2;  // transformers: |i - j| <= local_attention // 2

    // Layer types: transformers 5 lists them; transformers 4 makes every n-th layer global.
    if (c.has("layer_types")) {
      const auto& types = c.json()["layer_types"];
      check(types.is_array() && static_cast<int64_t>(types.size()) == p.layers,
            "layer_types must list one type per layer (" + std::to_string(p.layers) + ")");
      for (const auto& t : types) {
        check(t.is_string() && (t == "full_attention" || t == "sliding_attention"),
              "layer_types entries must be full_attention or sliding_attention");
        p.global.push_back(t == "full_attention");
      }
    } else {
      const int64_t every = c.get_int_or("global_attn_every_n_layers", 1);
      for (int64_t i = 0; i < p.layers; ++i) p.global.push_back(i % every == 0);
    }
    // Thetas: v5 rope_parameters per layer type, v4 global_rope_theta / local_rope_theta (a
    // missing or null local theta means the global one, as transformers 4 does).
    p.global_theta = c.rope_theta_for("full_attention", 160000.0);
    p.local_theta = c.rope_theta_for("sliding_attention", p.global_theta);
    check(!c.has("rope_scaling"), "rope_scaling is not supported for ModernBERT");
    check(c.rope_type() == "default", "rope type " + c.rope_type() + " is not supported");
    for (const char* key : {"hidden_activation", "classifier_activation"}) {
      const std::string act = c.get_string_or(key, "gelu");
      check(act == "gelu" || act == "gelu_python",
            std::string(key) + " '" + act + "' is not supported (exact-erf gelu only)");
    }
    p.norm_bias = c.get_bool_or("norm_bias", false);
    p.attention_bias = c.get_bool_or("attention_bias", false);
    p.mlp_bias = c.get_bool_or("mlp_bias", false);
    p.classifier_bias = c.get_bool_or("classifier_bias", false);
    p.decoder_bias = c.get_bool_or("decoder_bias", true);
    p.tied = c.get_bool_or("tie_word_embeddings", true);
    const std::string pooling = c.get_string_or("classifier_pooling", "cls");
    check(pooling == "cls" || pooling == "mean",
          "classifier_pooling '" + pooling + "' is not supported (cls or mean)");
    p.mean_pooling = pooling == "mean";
    p.dtype = c.weight_dtype().value_or(DType::BF16);

    std::string arch = "ModernBertModel";
    if (c.has("architectures")) {
      const auto& a = c.json()["architectures"];
      check(a.is_array() && !a.empty() && a[0].is_string(), "architectures must list a name");
      arch = a[0].get<std::string>();
    }
    if (arch == "ModernBertForMaskedLM") {
      p.enc.head = EncoderHead::MaskedLM;
    } else if (arch == "ModernBertForSequenceClassification") {
      p.enc.head = EncoderHead::Classifier;
    } else {
      check(arch == "ModernBertModel",
            "architecture " + arch +
                " is not supported (ModernBertModel, ModernBertForMaskedLM, "
                "ModernBertForSequenceClassification)");
    }
    p.prefix = p.enc.head == EncoderHead::None ? "" : "model.";
    if (p.enc.head == EncoderHead::Classifier) {
      int64_t labels = c.get_int_or("num_labels", 2);
      if (c.has("id2label")) {
        const auto& m = c.json()["id2label"];
        check(m.is_object() && !m.empty() && m.size() <= 65536, "id2label must be an object");
        labels = static_cast<int64_t>(m.size());
        p.enc.labels.resize(static_cast<size_t>(labels));
        for (int64_t i = 0; i < labels; ++i) {
          const auto it = m.find(std::to_string(i));
          check(it != m.end() && it->is_string(),
                "id2label must name every label id 0.." + std::to_string(labels - 1));
          p.enc.labels[static_cast<size_t>(i)] = it->get<std::string>();
        }
      } else {
        for (int64_t i = 0; i < labels; ++i) p.enc.labels.push_back("LABEL_" + std::to_string(i));
      }
    }
    auto token = [&](const char* key) {
      return static_cast<int32_t>(c.get_int_in(key, -1, p.vocab - 1, -1));
    };
    p.enc.cls_token_id = token("cls_token_id");
    p.enc.sep_token_id = token("sep_token_id");
    p.enc.mask_token_id = token("mask_token_id");
    p.enc.pad_token_id = token("pad_token_id");
    return p;
  }
};

struct LayerWeights {
  Tensor attn_norm, attn_norm_b, wq, wk, wv, bq, bk, bv, wo, bo;
  Tensor mlp_norm, mlp_norm_b, wi_in, wi_gate, bi_in, bi_gate, wo2, bo2;
  bool global = true;
  double theta = 0;
};

// The tensor-name table: every weight with its shape, for the dummy-weight maker and the
// unknown-tensor check. Optional pieces (biases, layer 0's attn_norm, heads) follow the config.
// The constructor reads the same names into their slots; a test loads dummy weights made from
// this table with every optional piece switched on, so the two cannot drift apart unnoticed.
std::vector<WeightSpec> modernbert_weight_specs(const ModernBertParams& p) {
  const int64_t d = p.hidden, f = p.intermediate;
  std::vector<WeightSpec> s;
  auto norm = [&](const std::string& name) {
    s.push_back({name + ".weight", {d}, -1.0f});
    if (p.norm_bias) s.push_back({name + ".bias", {d}, 0.02f});
  };
  auto linear = [&](const std::string& name, Shape shape, bool bias) {
    s.push_back({name + ".weight", shape, 0.02f});
    if (bias) s.push_back({name + ".bias", {shape[0]}, 0.02f});
  };
  const std::string& m = p.prefix;
  s.push_back({m + "embeddings.tok_embeddings.weight", {p.vocab, d}, 0.02f});
  norm(m + "embeddings.norm");
  for (int64_t i = 0; i < p.layers; ++i) {
    const std::string l = m + "layers." + std::to_string(i) + ".";
    if (i > 0) norm(l + "attn_norm");
    linear(l + "attn.Wqkv", {3 * d, d}, p.attention_bias);
    linear(l + "attn.Wo", {d, d}, p.attention_bias);
    norm(l + "mlp_norm");
    linear(l + "mlp.Wi", {2 * f, d}, p.mlp_bias);
    linear(l + "mlp.Wo", {d, f}, p.mlp_bias);
  }
  norm(m + "final_norm");
  if (p.enc.head != EncoderHead::None) {
    linear("head.dense", {d, d}, p.classifier_bias);
    norm("head.norm");
  }
  if (p.enc.head == EncoderHead::MaskedLM) {
    if (!p.tied) s.push_back({"decoder.weight", {p.vocab, d}, 0.02f});
    if (p.decoder_bias) s.push_back({"decoder.bias", {p.vocab}, 0.02f});
  }
  if (p.enc.head == EncoderHead::Classifier)
    linear("classifier", {static_cast<int64_t>(p.enc.labels.size()), d}, true);
  return s;
}

// Activation buffers for up to `rows` tokens, reused across calls.
struct Scratch {
  int64_t rows = 0;
  Tensor x, xn, q, k, v, attn, proj, inner, gate;
};

class ModernBert final : public Encoder {
 public:
  ModernBert(ModelInfo info, ModernBertParams p, std::shared_ptr<const io::WeightStore> store,
             Backend& backend, WeightPrepare prepare = {})
      : info_(std::move(info)),
        p_(std::move(p)),
        store_(std::move(store)),
        backend_(backend),
        prepare_(std::move(prepare)) {
    reject_unknown_tensors();
    const int64_t d = p_.hidden, f = p_.intermediate;
    const std::string& m = p_.prefix;
    embed_ = w(m + "embeddings.tok_embeddings.weight", {p_.vocab, d});
    norm(m + "embeddings.norm", embed_norm_, embed_norm_b_);
    layers_.resize(static_cast<size_t>(p_.layers));
    for (int64_t i = 0; i < p_.layers; ++i) {
      LayerWeights& L = layers_[static_cast<size_t>(i)];
      const std::string l = m + "layers." + std::to_string(i) + ".";
      if (i > 0) norm(l + "attn_norm", L.attn_norm, L.attn_norm_b);
      // Fused projections are split by rows: Wqkv's output is (q, k, v), Wi's is (input, gate).
      const Tensor qkv = w(l + "attn.Wqkv.weight", {3 * d, d});
      L.wq = qkv.rows(0, d), L.wk = qkv.rows(d, d), L.wv = qkv.rows(2 * d, d);
      L.wo = w(l + "attn.Wo.weight", {d, d});
      if (p_.attention_bias) {
        const Tensor b = w(l + "attn.Wqkv.bias", {3 * d});
        L.bq = b.rows(0, d), L.bk = b.rows(d, d), L.bv = b.rows(2 * d, d);
        L.bo = w(l + "attn.Wo.bias", {d});
      }
      norm(l + "mlp_norm", L.mlp_norm, L.mlp_norm_b);
      const Tensor wi = w(l + "mlp.Wi.weight", {2 * f, d});
      L.wi_in = wi.rows(0, f), L.wi_gate = wi.rows(f, f);
      L.wo2 = w(l + "mlp.Wo.weight", {d, f});
      if (p_.mlp_bias) {
        const Tensor b = w(l + "mlp.Wi.bias", {2 * f});
        L.bi_in = b.rows(0, f), L.bi_gate = b.rows(f, f);
        L.bo2 = w(l + "mlp.Wo.bias", {d});
      }
      L.global = p_.global[static_cast<size_t>(i)];
      L.theta = L.global ? p_.global_theta : p_.local_theta;
    }
    norm(m + "final_norm", final_norm_, final_norm_b_);
    if (p_.enc.head != EncoderHead::None) {
      head_dense_ = w("head.dense.weight", {d, d});
      if (p_.classifier_bias) head_dense_b_ = w("head.dense.bias", {d});
      norm("head.norm", head_norm_, head_norm_b_);
    }
    if (p_.enc.head == EncoderHead::MaskedLM) {
      decoder_ = p_.tied ? embed_ : w("decoder.weight", {p_.vocab, d});
      if (p_.decoder_bias) decoder_b_ = w("decoder.bias", {p_.vocab});
    }
    if (p_.enc.head == EncoderHead::Classifier) {
      const auto labels = static_cast<int64_t>(p_.enc.labels.size());
      classifier_ = w("classifier.weight", {labels, d});
      classifier_b_ = w("classifier.bias", {labels});
    }
  }

  const ModelInfo& info() const override { return info_; }
  const EncoderInfo& encoder_info() const override { return p_.enc; }
  Backend& backend() const override { return backend_; }

  void hidden_states(const BatchDesc& desc, std::span<float> hidden) override {
    if (hidden.size() != static_cast<size_t>(desc.num_tokens() * p_.hidden))
      throw InvalidArgument("hidden_states: the buffer does not hold tokens x hidden floats");
    encode(desc);
    backend_.to_host(s_.x.rows(0, desc.num_tokens()), hidden);
  }

  Tensor hidden_states_on_device(const BatchDesc& desc) override {
    encode(desc);
    return s_.x.rows(0, desc.num_tokens());
  }

  void masked_lm_logits(const BatchDesc& desc, std::span<float> logits) override {
    if (p_.enc.head != EncoderHead::MaskedLM)
      throw InvalidArgument(info_.name + " has no masked-LM head (its architecture is not " +
                            "ModernBertForMaskedLM)");
    const auto r = static_cast<int64_t>(desc.output_rows.size());
    if (r == 0 || logits.size() != static_cast<size_t>(r * p_.vocab))
      throw InvalidArgument("masked_lm_logits: give output rows and a rows x vocab buffer");
    const Batch batch = encode(desc);
    // Only the asked-for rows go through the head and the vocabulary-sized decoder.
    Tensor h = head_in(r);
    backend_.gather_rows(s_.x.rows(0, desc.num_tokens()), batch.output_rows, h);
    prediction_head(h);
    Tensor out = head_out(r, p_.vocab);
    backend_.matmul(h, decoder_, out);
    if (!decoder_b_.empty()) backend_.add_bias(out, decoder_b_, out);
    backend_.to_host(out, logits);
  }

  void classify(const BatchDesc& desc, std::span<float> logits) override {
    if (p_.enc.head != EncoderHead::Classifier)
      throw InvalidArgument(info_.name + " has no classifier head (its architecture is not " +
                            "ModernBertForSequenceClassification)");
    const int64_t b = desc.num_seqs(), labels = static_cast<int64_t>(p_.enc.labels.size());
    if (logits.size() != static_cast<size_t>(b * labels))
      throw InvalidArgument("classify: the buffer does not hold sequences x labels floats");
    // CLS pooling reads each sequence's first row: the batch's output rows, set here.
    BatchDesc& with_rows = with_rows_;  // reused: assigning into its vectors allocates nothing
    with_rows = desc;
    with_rows.output_rows.assign(desc.query_start.begin(), desc.query_start.end() - 1);
    const Batch batch = encode(with_rows);
    Tensor pooled = head_in(b);
    const Tensor x = s_.x.rows(0, desc.num_tokens());
    if (p_.mean_pooling) {
      backend_.mean_pool(x, batch, pooled);
    } else {
      backend_.gather_rows(x, batch.output_rows, pooled);
    }
    emit(pooled, "pooled", -1);
    prediction_head(pooled);
    Tensor out = head_out(b, labels);
    backend_.matmul(pooled, classifier_, out);
    backend_.add_bias(out, classifier_b_, out);
    backend_.to_host(out, logits);
  }

 private:
  // The backbone over every row of `desc`; the final hidden states are in s_.x.
  Batch encode(const BatchDesc& desc) {
    desc.validate(p_.vocab, p_.max_positions, 0, 0);
    for (int64_t s = 0; s < desc.num_seqs(); ++s)
      for (int32_t i = desc.query_start[static_cast<size_t>(s)];
           i < desc.query_start[static_cast<size_t>(s + 1)]; ++i)
        if (desc.positions[static_cast<size_t>(i)] != i - desc.query_start[static_cast<size_t>(s)])
          throw InvalidArgument("encoder batch: row " + std::to_string(i) +
                                " must sit at its offset in its sequence (see encoder_batch)");
    const int64_t n = desc.num_tokens();
    ensure_scratch(n);
    Batch batch = backend_.upload_batch(desc);
    Tensor x = s_.x.rows(0, n);
    backend_.embedding(embed_, batch.tokens, x);
    backend_.layernorm(x, embed_norm_, embed_norm_b_, p_.eps, x);
    emit(x, "embed", -1);
    stack(n, batch);
    backend_.layernorm(x, final_norm_, final_norm_b_, p_.eps, x);
    emit(x, "final_norm", -1);
    return batch;
  }

  // The layers as one op (ops/backend.h: exactly the per-layer composition, which a backend may
  // run without its f32 round trips); with the activation hook, that composition op by op, each
  // layer's activations handed to the hook.
  void stack(int64_t n, const Batch& batch) {
    if (refs_.empty())
      for (const LayerWeights& w : layers_)
        refs_.push_back({&w.attn_norm, &w.attn_norm_b, &w.wq, &w.wk, &w.wv, &w.bq, &w.bk, &w.bv,
                         &w.wo, &w.bo, &w.mlp_norm, &w.mlp_norm_b, &w.wi_in, &w.wi_gate, &w.bi_in,
                         &w.bi_gate, &w.wo2, &w.bo2, w.theta,
                         w.global ? -1 : static_cast<int32_t>(p_.window)});
    Tensor x = s_.x.rows(0, n), xn = s_.xn.rows(0, n), proj = s_.proj.rows(0, n);
    Tensor q = s_.q.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
    Tensor attn = s_.attn.rows(0, n), inner = s_.inner.rows(0, n), gate = s_.gate.rows(0, n);
    const EncoderStackParams params{p_.heads, p_.head_dim, p_.eps,
                                    1.0f / std::sqrt(static_cast<float>(p_.head_dim))};
    const EncoderStackScratch scratch{&xn, &q, &k, &v, &attn, &proj, &inner, &gate};
    if (hook_)
      encoder_stack_composed(backend_, x, refs_, batch, params, scratch, hook_);
    else
      backend_.encoder_stack(x, refs_, batch, params, scratch);
  }

  // ModernBertPredictionHead, in place on h [rows, hidden]: dense, GELU, LayerNorm.
  void prediction_head(Tensor& h) {
    Tensor t = s_head_tmp_.rows(0, h.dim(0));
    linear(h, head_dense_, head_dense_b_, t);
    backend_.gelu(t, t);
    backend_.layernorm(t, head_norm_, head_norm_b_, p_.eps, h);
    emit(h, "head", -1);
  }

  void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out) {
    backend_.matmul(x, weight, out);
    if (!bias.empty()) backend_.add_bias(out, bias, out);
  }

  Tensor w(const std::string& name, Shape shape) {
    const Tensor& t = store_->require(name, shape);
    return prepare_ ? prepare_(t) : backend_.prepare_weight(t);
  }
  void norm(const std::string& name, Tensor& weight, Tensor& bias) {
    weight = w(name + ".weight", {p_.hidden});
    if (p_.norm_bias) bias = w(name + ".bias", {p_.hidden});
  }

  // A tensor the config does not account for means the config and the weights disagree (more
  // layers, biases the config says are absent, a head of another architecture): fail rather
  // than run a different model.
  void reject_unknown_tensors() const {
    std::set<std::string> expected;
    for (const WeightSpec& spec : modernbert_weight_specs(p_)) expected.insert(spec.name);
    for (const std::string& name : store_->names()) {
      if (expected.count(name) || (p_.tied && name == "decoder.weight")) continue;
      if (p_.embedded && name.rfind(p_.prefix, 0) != 0) continue;  // the host model's tensors
      throw FormatError("unexpected tensor " + name +
                        ": not part of a ModernBERT model with this config.json "
                        "(num_hidden_layers=" +
                        std::to_string(p_.layers) + ", architecture " + arch_name() + ")");
    }
  }
  std::string arch_name() const {
    switch (p_.enc.head) {
      case EncoderHead::MaskedLM:
        return "ModernBertForMaskedLM";
      case EncoderHead::Classifier:
        return "ModernBertForSequenceClassification";
      default:
        return "ModernBertModel";
    }
  }

  Tensor head_in(int64_t rows) {
    grow(s_head_in_, "head_in", rows, p_.hidden);
    grow(s_head_tmp_, "head_tmp", rows, p_.hidden);
    return s_head_in_.rows(0, rows);
  }
  Tensor head_out(int64_t rows, int64_t cols) {
    if (s_head_out_.empty() || s_head_out_.numel() < rows * cols)
      s_head_out_ = backend_.alloc("head_out", DType::F32, {rows * cols});
    return s_head_out_.rows(0, rows * cols).reshaped({rows, cols});
  }
  void grow(Tensor& t, const char* name, int64_t rows, int64_t cols) {
    if (t.empty() || t.dim(0) < rows) t = backend_.alloc(name, DType::F32, {rows, cols});
  }

  void ensure_scratch(int64_t n) {
    if (n <= s_.rows) return;
    auto a = [&](const char* name, int64_t cols) {
      return backend_.alloc(name, DType::F32, {n, cols});
    };
    const int64_t d = p_.hidden, f = p_.intermediate;
    s_ = {n,         a("x", d),    a("xn", d),   a("q", d),     a("k", d),
          a("v", d), a("attn", d), a("proj", d), a("inner", f), a("gate", f)};
  }

  void emit(const Tensor& t, std::string_view name, int layer) const {
    if (hook_) hook_(t, name, layer);
  }

  ModelInfo info_;
  ModernBertParams p_;
  std::shared_ptr<const io::WeightStore> store_;  // keeps the mmapped weights alive
  Backend& backend_;
  WeightPrepare prepare_;  // empty: backend_.prepare_weight
  Tensor embed_, embed_norm_, embed_norm_b_, final_norm_, final_norm_b_;
  Tensor head_dense_, head_dense_b_, head_norm_, head_norm_b_, decoder_, decoder_b_;
  Tensor classifier_, classifier_b_;
  std::vector<LayerWeights> layers_;
  std::vector<EncoderLayerRefs> refs_;  // into layers_, made on the first forward
  Scratch s_;
  Tensor s_head_in_, s_head_tmp_, s_head_out_;  // head buffers, grown on demand
  BatchDesc with_rows_;                         // classify()'s batch with its pooled rows
};

ModelInfo modernbert_info(const ModernBertParams& p) {
  ModelInfo info;
  info.architecture = "ModernBERT";
  info.layers = p.layers;
  info.hidden = p.hidden;
  info.q_heads = info.kv_heads = p.heads;
  info.head_dim = p.head_dim;
  info.vocab = p.vocab;
  info.max_positions = p.max_positions;
  info.weight_dtype = p.dtype;
  info.tied_embeddings = p.tied;
  for (const WeightSpec& s : modernbert_weight_specs(p)) info.parameters += s.shape.numel();
  info.name = "ModernBERT-" + format_parameter_count(info.parameters);
  return info;
}

std::unique_ptr<Encoder> load_modernbert(const std::filesystem::path& dir,
                                         const io::HfConfig& config, Backend& backend,
                                         const LoadOptions& options) {
  ModernBertParams p = ModernBertParams::from(config);
  io::WeightStore store = options.dummy_weights ? make_dummy_weights(modernbert_weight_specs(p),
                                                                     p.dtype, options.dummy_seed)
                                                : io::WeightStore::open_folder(dir);
  // A ModernBertModel folder saved from a head model keeps the "model." prefix; a bare one has
  // none. The tensors decide which, whatever the config's architecture says.
  if (!options.dummy_weights && p.enc.head == EncoderHead::None &&
      store.contains("model.embeddings.tok_embeddings.weight"))
    p.prefix = "model.";
  ModelInfo info = modernbert_info(p);
  return std::make_unique<ModernBert>(std::move(info), std::move(p),
                                      std::make_shared<const io::WeightStore>(std::move(store)),
                                      backend);
}

// A backbone inside a larger checkpoint: bare ModernBertModel tensors under `prefix`.
ModernBertParams embedded_params(const io::HfConfig& config, const std::string& prefix) {
  ModernBertParams p = ModernBertParams::from(config);
  if (p.enc.head != EncoderHead::None)
    throw FormatError(config.origin() +
                      ": an embedded encoder must be a bare ModernBertModel (no task head)");
  p.prefix = prefix;
  p.embedded = true;
  return p;
}

}  // namespace

std::vector<WeightSpec> modernbert_backbone_specs(const io::HfConfig& config,
                                                  const std::string& prefix) {
  return modernbert_weight_specs(embedded_params(config, prefix));
}

std::unique_ptr<Encoder> load_embedded_modernbert(const io::HfConfig& config,
                                                  EmbeddedEncoder source, Backend& backend) {
  if (!source.store) throw InvalidArgument("load_embedded_modernbert: no weight store");
  ModernBertParams p = embedded_params(config, source.prefix);
  ModelInfo info = modernbert_info(p);
  return std::make_unique<ModernBert>(std::move(info), std::move(p), std::move(source.store),
                                      backend, std::move(source.prepare));
}

const EncoderFactory kModernBertFactory{"modernbert", &load_modernbert};

}  // namespace infera
