// Forward of specs/decision-model.md on the op interface: the encoder's final hidden states stay
// on the device, the head layers run there, and only the rows read afterwards (position 0 and the
// markers) come back to the host for the scorer, the option softmax, the features and the action
// head (a few thousand multiply-adds per question, in the configured dtype).
#include "decision/decision_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/dtype_convert.h"
#include "infera/error.h"
#include "model/dummy_weights.h"

namespace infera::decision {
namespace {

constexpr int64_t kKvBlock = 16;  // slots per block of the last head layer's key/value pool
constexpr const char* kNormReason = "norm vector (LayerNorm weights stay float)";

// The decision tensors (everything outside "encoder.") with their shapes.
std::vector<WeightSpec> head_weight_specs(const DecisionConfig& c, int64_t d) {
  std::vector<WeightSpec> s;
  const int64_t f = c.head_mlp_ratio * d, a = c.action_hidden;
  const auto n_actions = static_cast<int64_t>(c.actions.size());
  for (int64_t i = 0; i < c.num_head_layers; ++i) {
    const std::string l = "heads." + std::to_string(i) + ".";
    s.push_back({l + "attn_norm.weight", {d}, -1.0f});
    s.push_back({l + "Wqkv.weight", {3 * d, d}, 0.02f});
    s.push_back({l + "Wo.weight", {d, d}, 0.02f});
    s.push_back({l + "mlp_norm.weight", {d}, -1.0f});
    s.push_back({l + "W1.weight", {f, d}, 0.02f});
    s.push_back({l + "W2.weight", {d, f}, 0.02f});
  }
  s.push_back({"head_norm.weight", {d}, -1.0f});
  s.push_back({"scorer.weight", {1, d}, 0.05f});
  s.push_back({"scorer.bias", {1}, 0.1f});
  s.push_back({"action.0.weight", {a, d + 4}, 0.05f});
  s.push_back({"action.0.bias", {a}, 0.1f});
  s.push_back({"action.2.weight", {n_actions, a}, 0.2f});
  s.push_back({"action.2.bias", {n_actions}, 0.1f});
  return s;
}

float round_to(DType dtype, float x) {
  return dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(x)) : x;
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

// Softmax in f32 with the max subtracted; probabilities of an all-equal row are exactly uniform.
std::vector<float> softmax(const std::vector<float>& logits) {
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> p(logits.size());
  float sum = 0.0f;
  for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(logits[i] - m));
  for (float& v : p) v /= sum;
  return p;
}

}  // namespace

DecisionModel::~DecisionModel() = default;

std::unique_ptr<DecisionModel> DecisionModel::load(const std::filesystem::path& dir,
                                                   Backend& backend, const ModelOptions& options) {
  const io::HfConfig enc_config = io::HfConfig::load(dir / "encoder_config.json");
  if (enc_config.model_type() != "modernbert")
    throw FormatError((dir / "encoder_config.json").string() + ": model_type '" +
                      enc_config.model_type() + "' is not supported (modernbert)");
  const std::vector<WeightSpec> enc_specs = modernbert_backbone_specs(enc_config, "encoder.");
  const int64_t d = enc_config.get_int("hidden_size");
  const int64_t vocab = enc_config.get_int("vocab_size");
  const io::HfConfig dec_json = io::HfConfig::load(dir / "decision_config.json");
  // Every op the forward uses must run on this backend (a device backend may not have the encoder
  // ops yet): say so at load, not at the first request.
  for (const auto& [op, dtype] : {std::pair{Op::LayerNorm, DType::F32},
                                  {Op::Gelu, DType::F32},
                                  {Op::Geglu, DType::F32},
                                  {Op::AttentionPacked, DType::F32},
                                  {Op::Attention, DType::F32},
                                  {Op::KvWrite, DType::F32},
                                  {Op::GatherRows, DType::F32},
                                  {Op::Rope, DType::F32},
                                  {Op::Add, DType::F32}})
    if (!backend.supports(op, {dtype}))
      throw InvalidArgument("the " + backend.name() + " backend does not implement " +
                            std::string(op_name(op)) +
                            ", which the decision model needs; use the CPU backend");
  std::unique_ptr<DecisionModel> m(new DecisionModel(backend));
  m->config_ =
      DecisionConfig::from(dec_json, vocab, enc_config.get_int_or("max_position_embeddings", 8192));
  const DecisionConfig& c = m->config_;
  const std::vector<WeightSpec> head_specs = head_weight_specs(c, d);

  io::WeightStore store;
  if (options.dummy_weights) {
    std::vector<WeightSpec> all = enc_specs;
    all.insert(all.end(), head_specs.begin(), head_specs.end());
    store = make_dummy_weights(all, enc_config.weight_dtype().value_or(DType::BF16),
                               options.dummy_seed);
  } else {
    store = io::WeightStore::open_file(dir / "model.safetensors");
  }
  // Every tensor must be one of the encoder's or the heads' (the encoder loader checks its own
  // names under "encoder."; a missing one fails there or below with its name).
  std::set<std::string> known;
  for (const WeightSpec& s : enc_specs) known.insert(s.name);
  for (const WeightSpec& s : head_specs) known.insert(s.name);
  for (const std::string& name : store.names())
    if (!known.count(name))
      throw FormatError("unexpected tensor " + name + " in " +
                        (dir / "model.safetensors").string() +
                        ": not part of a decision-model/1 checkpoint with num_head_layers=" +
                        std::to_string(c.num_head_layers) + " and the encoder_config.json given");
  m->store_ = std::make_shared<const io::WeightStore>(std::move(store));

  auto preparer = std::make_shared<WeightPreparer>(backend, options.weights);
  m->encoder_ = load_embedded_modernbert(
      enc_config,
      {m->store_, "encoder.",
       [preparer](const Tensor& t) {
         if (t.rank() == 2 && t.name().find("tok_embeddings") == std::string::npos)
           return preparer->matmul_weight(t);
         return preparer->other(
             t, t.rank() == 2 ? "embedding table (gathered, not a matmul)" : kNormReason);
       }},
      backend);
  m->hidden_ = d;
  m->heads_ = m->encoder_->info().q_heads;
  m->head_dim_ = m->encoder_->info().head_dim;
  m->eps_ = static_cast<float>(enc_config.get_float_or("norm_eps", 1e-5));

  const io::WeightStore& st = *m->store_;
  auto spec_shape = [&](const std::string& name) {
    for (const WeightSpec& s : head_specs)
      if (s.name == name) return s.shape;
    throw InvalidArgument("no spec for " + name);
  };
  auto get = [&](const std::string& name) -> const Tensor& {
    return st.require(name, spec_shape(name));
  };
  for (int64_t i = 0; i < c.num_head_layers; ++i) {
    const std::string l = "heads." + std::to_string(i) + ".";
    HeadLayer L;
    L.attn_norm = preparer->other(get(l + "attn_norm.weight"), kNormReason);
    const Tensor qkv = preparer->matmul_weight(get(l + "Wqkv.weight"));
    L.wq = qkv.rows(0, d), L.wk = qkv.rows(d, d), L.wv = qkv.rows(2 * d, d);
    L.wo = preparer->matmul_weight(get(l + "Wo.weight"));
    L.mlp_norm = preparer->other(get(l + "mlp_norm.weight"), kNormReason);
    L.w1 = preparer->matmul_weight(get(l + "W1.weight"));
    L.w2 = preparer->matmul_weight(get(l + "W2.weight"));
    m->heads_layers_.push_back(std::move(L));
  }
  m->head_norm_ = preparer->other(get("head_norm.weight"), kNormReason);
  // Scorer and action head: always full precision (widened to f32 on the host).
  m->scorer_w_ = widen_to_f32(get("scorer.weight"));
  m->scorer_b_ = widen_to_f32(get("scorer.bias"))[0];
  m->action0_w_ = widen_to_f32(get("action.0.weight"));
  m->action0_b_ = widen_to_f32(get("action.0.bias"));
  m->action2_w_ = widen_to_f32(get("action.2.weight"));
  m->action2_b_ = widen_to_f32(get("action.2.bias"));
  m->quant_report_ = preparer->report();
  if (options.weights != WeightFormat::Stored)
    for (const char* name : {"scorer.weight", "scorer.bias", "action.0.weight", "action.0.bias",
                             "action.2.weight", "action.2.bias"})
      m->quant_report_.kept.push_back({name, "scorer and action head always stay full precision"});
  m->prune_ = options.prune_last_layer;
  return m;
}

void DecisionModel::check_input(std::span<const int32_t> ids, const std::string& what) const {
  if (ids.empty()) throw InvalidArgument(what + ": no token ids");
  if (static_cast<int64_t>(ids.size()) > config_.max_length)
    throw InvalidArgument(what + ": " + std::to_string(ids.size()) +
                          " tokens, more than max_length " + std::to_string(config_.max_length));
  bool marker = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab())
      throw InvalidArgument(what + ": token id " + std::to_string(ids[i]) + " at " +
                            std::to_string(i) + " is outside the vocabulary [0, " +
                            std::to_string(vocab()) + ")");
    marker |= ids[i] == config_.marker_token_id;
  }
  if (!marker)
    throw InvalidArgument(what + ": no option marker (token " +
                          std::to_string(config_.marker_token_id) + ")");
}

Tensor& DecisionModel::grow(Tensor& t, const char* name, int64_t rows, int64_t cols) {
  if (t.empty() || t.dim(0) < rows) t = backend_.alloc(name, DType::F32, {rows, cols});
  return t;
}

void DecisionModel::ensure_scratch(int64_t n) {
  if (n <= s_.rows) return;
  auto a = [&](const char* name, int64_t cols) {
    return backend_.alloc(name, DType::F32, {n, cols});
  };
  const int64_t d = hidden_, f = config_.head_mlp_ratio * hidden_;
  s_ = {n,
        a("head_xn", d),
        a("head_q", d),
        a("head_k", d),
        a("head_v", d),
        a("head_attn", d),
        a("head_proj", d),
        a("head_inner", f)};
}

// One head layer over all n rows of x, in place: global bidirectional attention.
void DecisionModel::head_layer(const HeadLayer& L, Tensor& x, const Batch& batch, int64_t n) {
  Tensor xn = s_.xn.rows(0, n), q = s_.q.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
  Tensor attn = s_.attn.rows(0, n), proj = s_.proj.rows(0, n), inner = s_.inner.rows(0, n);
  const Tensor none;
  backend_.layernorm(x, L.attn_norm, none, eps_, xn);
  backend_.matmul(xn, L.wq, q);
  backend_.matmul(xn, L.wk, k);
  backend_.matmul(xn, L.wv, v);
  Tensor qh = q.reshaped({n, heads_, head_dim_}), kh = k.reshaped({n, heads_, head_dim_});
  backend_.rope(qh, batch.positions, config_.head_rope_theta);
  backend_.rope(kh, batch.positions, config_.head_rope_theta);
  Tensor ah = attn.reshaped({n, heads_, head_dim_});
  backend_.attention_packed(
      qh, kh, v.reshaped({n, heads_, head_dim_}), batch,
      {.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_)), .causal = false, .window = -1},
      ah);
  output_and_mlp(L, attn, x, xn, proj, inner);
}

// The last head layer for the rows desc.output_rows only (x_sel [R, D] out): keys and values of
// every row go into a paged pool, the selected rows' queries attend to all of their sequence's
// keys through the paged attention op (causal off, global), then Wo, residual, MLP on R rows.
void DecisionModel::pruned_head_layer(const HeadLayer& L, const Tensor& x, const BatchDesc& desc,
                                      const Batch& batch, Tensor& x_sel) {
  const int64_t n = desc.num_tokens(), b = desc.num_seqs();
  const auto r = static_cast<int64_t>(desc.output_rows.size());
  const int64_t f = config_.head_mlp_ratio * hidden_;
  // Block layout: sequence s owns blocks [first[s], first[s] + ceil(len / kKvBlock)).
  BatchDesc kv = desc, sel;
  int32_t max_blocks = 0, blocks = 0;
  std::vector<int32_t> first(static_cast<size_t>(b));
  for (int64_t s = 0; s < b; ++s) {
    const int32_t used = (desc.seq_lens[static_cast<size_t>(s)] + kKvBlock - 1) / kKvBlock;
    first[static_cast<size_t>(s)] = blocks;
    blocks += used;
    max_blocks = std::max(max_blocks, used);
  }
  kv.max_blocks = max_blocks;
  kv.block_table.assign(static_cast<size_t>(b * max_blocks), -1);
  kv.slots.resize(static_cast<size_t>(n));
  for (int64_t s = 0; s < b; ++s) {
    const int32_t used = (desc.seq_lens[static_cast<size_t>(s)] + kKvBlock - 1) / kKvBlock;
    for (int32_t k = 0; k < used; ++k)
      kv.block_table[static_cast<size_t>(s * max_blocks + k)] = first[static_cast<size_t>(s)] + k;
    for (int32_t i = desc.query_start[static_cast<size_t>(s)];
         i < desc.query_start[static_cast<size_t>(s + 1)]; ++i)
      kv.slots[static_cast<size_t>(i)] =
          first[static_cast<size_t>(s)] * kKvBlock + desc.positions[static_cast<size_t>(i)];
  }
  kv.output_rows.clear();
  // The selected rows as their own batch over the same sequences' keys.
  sel.max_blocks = kv.max_blocks;
  sel.block_table = kv.block_table;
  sel.seq_lens = desc.seq_lens;
  sel.query_start.push_back(0);
  size_t next = 0;
  for (int64_t s = 0; s < b; ++s) {
    const int32_t end = desc.query_start[static_cast<size_t>(s + 1)];
    while (next < desc.output_rows.size() && desc.output_rows[next] < end) {
      const int32_t row = desc.output_rows[next++];
      sel.tokens.push_back(desc.tokens[static_cast<size_t>(row)]);
      sel.positions.push_back(desc.positions[static_cast<size_t>(row)]);
      sel.slots.push_back(kv.slots[static_cast<size_t>(row)]);
    }
    sel.query_start.push_back(static_cast<int32_t>(sel.tokens.size()));
  }
  if (static_cast<int64_t>(sel.tokens.size()) != r)
    throw InvalidArgument("pruned head layer: output rows must be sorted by sequence");
  kv.validate(0, config_.max_length, blocks, kKvBlock);
  sel.validate(0, config_.max_length, blocks, kKvBlock);
  // Pools [heads, blocks, kKvBlock, head_dim] grow with the largest batch and are passed whole:
  // the batch's block ids stay below `blocks`, inside them.
  if (kv_keys_.empty() || kv_keys_.dim(1) < blocks) {
    kv_keys_ = backend_.alloc("head_kv_keys", DType::F32, {heads_, blocks, kKvBlock, head_dim_});
    kv_values_ =
        backend_.alloc("head_kv_values", DType::F32, {heads_, blocks, kKvBlock, head_dim_});
  }
  KvLayer pool{kv_keys_, kv_values_};
  const Batch kv_batch = backend_.upload_batch(kv);
  const Batch sel_batch = backend_.upload_batch(sel);

  const Tensor none;
  Tensor xn = s_.xn.rows(0, n), k = s_.k.rows(0, n), v = s_.v.rows(0, n);
  backend_.layernorm(x, L.attn_norm, none, eps_, xn);
  backend_.matmul(xn, L.wk, k);
  backend_.matmul(xn, L.wv, v);
  Tensor kh = k.reshaped({n, heads_, head_dim_});
  backend_.rope(kh, kv_batch.positions, config_.head_rope_theta);
  backend_.kv_write(kh, v.reshaped({n, heads_, head_dim_}), pool, kv_batch);

  Tensor xn_sel = grow(sel_xn_, "sel_xn", r, hidden_).rows(0, r);
  Tensor q = grow(sel_q_, "sel_q", r, hidden_).rows(0, r);
  Tensor attn = grow(sel_attn_, "sel_attn", r, hidden_).rows(0, r);
  Tensor proj = grow(sel_proj_, "sel_proj", r, hidden_).rows(0, r);
  Tensor inner = grow(sel_inner_, "sel_inner", r, f).rows(0, r);
  backend_.gather_rows(xn, batch.output_rows, xn_sel);
  backend_.gather_rows(x, batch.output_rows, x_sel);
  backend_.matmul(xn_sel, L.wq, q);
  Tensor qh = q.reshaped({r, heads_, head_dim_});
  backend_.rope(qh, sel_batch.positions, config_.head_rope_theta);
  Tensor ah = attn.reshaped({r, heads_, head_dim_});
  backend_.attention(
      qh, pool, sel_batch,
      {.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_)), .causal = false, .window = -1},
      ah);
  output_and_mlp(L, attn, x_sel, xn_sel, proj, inner);
}

// What follows attention in a head layer, on whichever rows x holds (all of them, or the pruned
// layer's selected rows): Wo, residual, mlp_norm, W1, exact GELU, W2, residual.
void DecisionModel::output_and_mlp(const HeadLayer& L, const Tensor& attn, Tensor& x, Tensor& xn,
                                   Tensor& proj, Tensor& inner) {
  const Tensor none;
  backend_.matmul(attn, L.wo, proj);
  backend_.add(x, proj, x);
  backend_.layernorm(x, L.mlp_norm, none, eps_, xn);
  backend_.matmul(xn, L.w1, inner);
  backend_.gelu(inner, inner);
  backend_.matmul(inner, L.w2, proj);
  backend_.add(x, proj, x);
}

std::vector<QuestionOutput> DecisionModel::forward(
    std::span<const std::vector<int32_t>> sequences) {
  if (sequences.empty()) return {};
  for (size_t i = 0; i < sequences.size(); ++i)
    check_input(sequences[i], "input " + std::to_string(i));
  BatchDesc desc = encoder_batch(sequences);
  // Rows read after the heads: each sequence's first row, then its markers in order.
  std::vector<int32_t> first_sel;  // index into output_rows of each sequence's row 0
  for (size_t s = 0; s < sequences.size(); ++s) {
    const int32_t base = desc.query_start[s];
    first_sel.push_back(static_cast<int32_t>(desc.output_rows.size()));
    desc.output_rows.push_back(base);
    for (size_t i = 0; i < sequences[s].size(); ++i)
      if (sequences[s][i] == config_.marker_token_id)
        desc.output_rows.push_back(base + static_cast<int32_t>(i));
  }
  first_sel.push_back(static_cast<int32_t>(desc.output_rows.size()));
  const int64_t n = desc.num_tokens();
  const auto r = static_cast<int64_t>(desc.output_rows.size());

  Tensor x = encoder_->hidden_states_on_device(desc);  // the encoder's buffer, updated in place
  ensure_scratch(n);
  const Batch batch = backend_.upload_batch(desc);
  const auto layers = static_cast<int64_t>(heads_layers_.size());
  Tensor x_sel = grow(sel_x_, "sel_x", r, hidden_).rows(0, r);
  for (int64_t i = 0; i + 1 < layers; ++i)
    head_layer(heads_layers_[static_cast<size_t>(i)], x, batch, n);
  if (prune_) {
    pruned_head_layer(heads_layers_.back(), x, desc, batch, x_sel);
  } else {
    head_layer(heads_layers_.back(), x, batch, n);
    backend_.gather_rows(x, batch.output_rows, x_sel);
  }
  backend_.layernorm(x_sel, head_norm_, Tensor(), eps_, x_sel);
  std::vector<float> h(static_cast<size_t>(r * hidden_));
  backend_.to_host(x_sel, h);
  std::vector<QuestionOutput> out(sequences.size());
  postprocess(h, first_sel, out);
  return out;
}

void DecisionModel::postprocess(std::span<const float> h, std::span<const int32_t> first_sel,
                                std::vector<QuestionOutput>& out) const {
  const auto d = static_cast<size_t>(hidden_);
  const auto a = static_cast<size_t>(config_.action_hidden);
  const size_t n_actions = config_.actions.size();
  const DType dt = config_.action_dtype;
  for (size_t s = 0; s < out.size(); ++s) {
    QuestionOutput& q = out[s];
    const auto row0 = static_cast<size_t>(first_sel[s]);
    const auto end = static_cast<size_t>(first_sel[s + 1]);
    for (size_t m = row0 + 1; m < end; ++m) {
      float acc = 0.0f;
      for (size_t j = 0; j < d; ++j) acc += h[m * d + j] * scorer_w_[j];
      q.option_logits.push_back(acc + scorer_b_);
    }
    q.option_probs = softmax(q.option_logits);
    std::vector<float> sorted = q.option_probs;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float p1 = sorted[0], p2 = sorted.size() > 1 ? sorted[1] : 0.0f;
    float entropy = 0.0f;
    if (sorted.size() > 1) {
      for (float p : q.option_probs)
        if (p > 0.0f) entropy -= p * std::log(p);
      entropy /= std::log(static_cast<float>(sorted.size()));
    }
    q.features = {p1, p2, p1 - p2, entropy};
    // Action head: concat(h[0], features) -> Linear -> GELU -> Linear, in the configured dtype.
    std::vector<float> in(d + 4);
    for (size_t j = 0; j < d; ++j) in[j] = round_to(dt, h[row0 * d + j]);
    for (size_t j = 0; j < 4; ++j) in[d + j] = round_to(dt, q.features[j]);
    std::vector<float> hidden(a);
    for (size_t i = 0; i < a; ++i) {
      float acc = 0.0f;
      for (size_t j = 0; j < d + 4; ++j) acc += action0_w_[i * (d + 4) + j] * in[j];
      hidden[i] = round_to(dt, gelu_erf(round_to(dt, acc + action0_b_[i])));
    }
    for (size_t i = 0; i < n_actions; ++i) {
      float acc = 0.0f;
      for (size_t j = 0; j < a; ++j) acc += action2_w_[i * a + j] * hidden[j];
      q.action_logits.push_back(round_to(dt, acc + action2_b_[i]));
    }
    q.action_probs = softmax(q.action_logits);
    q.action = static_cast<int32_t>(std::max_element(q.action_probs.begin(), q.action_probs.end()) -
                                    q.action_probs.begin());
  }
}

}  // namespace infera::decision
