// `infera embed`, `infera classify`, `infera fill-mask`: encoder models (ModernBERT) on token ids
// (a JSON file) or on text through the folder's tokenizer.json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "commands.h"
#include "encoder_input.h"
#include "infera/error.h"
#include "infera/tokenizer.h"
#include "model/encoder.h"
#include "model_options.h"

namespace infera::cli {
namespace {

using Json = nlohmann::json;

struct EncoderOptions {
  ModelOptions model;
  std::string input_ids_json;
  std::vector<std::string> texts, pairs;
  std::string out;
  int top_k = 5;
  int mask_id = -1;
};

struct LoadedEncoder {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Encoder> model;
  std::optional<Tokenizer> tokenizer;
};

LoadedEncoder load(const ModelOptions& o) {
  namespace fs = std::filesystem;
  fs::path dir = o.model;
  if (o.dummy_weights && fs::is_regular_file(dir) && dir.filename() == "config.json")
    dir = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  if (!fs::is_directory(dir)) throw IoError("model folder '" + o.model + "' does not exist");
  LoadedEncoder m;
  m.backend = make_backend(o.backend_options());
  m.model =
      load_encoder(dir, *m.backend, {.dummy_weights = o.dummy_weights, .dummy_seed = o.dummy_seed});
  const fs::path tok = o.tokenizer.empty() ? dir : fs::path(o.tokenizer);
  if (!o.tokenizer.empty() || fs::exists(dir / "tokenizer.json"))
    m.tokenizer = Tokenizer::load(tok);
  return m;
}

// --input-ids-json, parsed by encoder_input.h; a right-padded file is unpadded here.
std::vector<std::vector<int32_t>> read_id_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open --input-ids-json file " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EncoderIdsFile f = parse_encoder_ids(text, path);
  if (f.attention_mask.empty()) return std::move(f.input_ids);
  PaddedIds padded{.batch = static_cast<int64_t>(f.input_ids.size()),
                   .length = static_cast<int64_t>(f.input_ids[0].size())};
  for (size_t b = 0; b < f.input_ids.size(); ++b) {
    padded.ids.insert(padded.ids.end(), f.input_ids[b].begin(), f.input_ids[b].end());
    padded.attention_mask.insert(padded.attention_mask.end(), f.attention_mask[b].begin(),
                                 f.attention_mask[b].end());
  }
  return unpad(padded);
}

// The sequences to run: from --input-ids-json, or --text (and --text-pair) through the tokenizer
// with its post-processor, as transformers' tokenizer(text, text_pair) does ([CLS] a [SEP] b [SEP]
// for ModernBERT; a file without a post-processor adds nothing). ModernBERT has no token type
// embeddings, so the pair's type ids are not needed.
std::vector<std::vector<int32_t>> sequences(const EncoderOptions& o, const LoadedEncoder& m) {
  if (o.input_ids_json.empty() == o.texts.empty())
    throw InvalidArgument("give exactly one of --input-ids-json or --text");
  if (!o.input_ids_json.empty()) {
    if (!o.pairs.empty()) throw InvalidArgument("--text-pair goes with --text");
    return read_id_file(o.input_ids_json);
  }
  if (!m.tokenizer)
    throw InvalidArgument("--text needs a tokenizer.json in the model folder (or --tokenizer)");
  if (!o.pairs.empty() && o.pairs.size() != o.texts.size())
    throw InvalidArgument("give one --text-pair per --text (" + std::to_string(o.texts.size()) +
                          " texts, " + std::to_string(o.pairs.size()) + " pairs)");
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = 0; i < o.texts.size(); ++i) {
    std::optional<std::string_view> pair;
    if (!o.pairs.empty()) pair = o.pairs[i];
    seqs.push_back(m.tokenizer->encode(o.texts[i], pair, /*add_special_tokens=*/true).ids);
  }
  return seqs;
}

void write_f32(const std::string& path, std::span<const float> values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) throw IoError("cannot write " + path);
}

std::vector<double> softmax(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(double(logits[i]) - mx));
  for (double& v : p) v /= sum;
  return p;
}

void embed(const EncoderOptions& o) {
  LoadedEncoder m = load(o.model);
  const auto seqs = sequences(o, m);
  PaddedIds padded{.batch = static_cast<int64_t>(seqs.size())};
  for (const auto& s : seqs)
    padded.length = std::max<int64_t>(padded.length, static_cast<int64_t>(s.size()));
  for (const auto& s : seqs)
    for (int64_t i = 0; i < padded.length; ++i) {
      const bool real = i < static_cast<int64_t>(s.size());
      padded.ids.push_back(real ? s[static_cast<size_t>(i)] : 0);
      padded.attention_mask.push_back(real ? 1 : 0);
    }
  const std::vector<float> hidden = padded_hidden_states(*m.model, padded);
  write_f32(o.out, hidden);
  std::fprintf(stderr,
               "Wrote %lld x %lld x %lld float32 hidden states (batch x length x hidden; rows past "
               "a sequence's length are zero) to %s\n",
               static_cast<long long>(padded.batch), static_cast<long long>(padded.length),
               static_cast<long long>(m.model->info().hidden), o.out.c_str());
}

void classify(const EncoderOptions& o) {
  LoadedEncoder m = load(o.model);
  const auto seqs = sequences(o, m);
  const std::vector<std::string>& labels = m.model->encoder_info().labels;
  std::vector<float> logits(seqs.size() * labels.size());
  m.model->classify(encoder_batch(seqs), logits);
  if (!o.out.empty()) write_f32(o.out, logits);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto row = std::span<const float>(logits).subspan(s * labels.size(), labels.size());
    const std::vector<double> p = softmax(row);
    const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    Json line = {{"index", s},
                 {"label", labels[best]},
                 {"score", p[best]},
                 {"logits", std::vector<float>(row.begin(), row.end())}};
    std::printf("%s\n", line.dump().c_str());
  }
}

int32_t mask_token(const EncoderOptions& o, const LoadedEncoder& m) {
  if (o.mask_id >= 0) return o.mask_id;
  if (m.model->encoder_info().mask_token_id >= 0) return m.model->encoder_info().mask_token_id;
  if (m.tokenizer)
    for (const char* t : {"[MASK]", "<mask>"})
      if (auto id = m.tokenizer->token_to_id(t)) return *id;
  throw InvalidArgument(
      "no mask token known: config.json has no mask_token_id and the "
      "tokenizer no [MASK] or <mask>; give --mask-id");
}

void fill_mask(const EncoderOptions& o) {
  LoadedEncoder m = load(o.model);
  const auto seqs = sequences(o, m);
  const int32_t mask = mask_token(o, m);
  BatchDesc batch = encoder_batch(seqs);
  for (int64_t s = 0; s < batch.num_seqs(); ++s)
    for (int32_t r = batch.query_start[static_cast<size_t>(s)];
         r < batch.query_start[static_cast<size_t>(s + 1)]; ++r)
      if (batch.tokens[static_cast<size_t>(r)] == mask) batch.output_rows.push_back(r);
  if (batch.output_rows.empty())
    throw InvalidArgument("no mask token (id " + std::to_string(mask) + ") in the input");
  const int64_t vocab = m.model->info().vocab;
  std::vector<float> logits(batch.output_rows.size() * static_cast<size_t>(vocab));
  m.model->masked_lm_logits(batch, logits);
  if (!o.out.empty()) write_f32(o.out, logits);
  size_t s = 0;
  for (size_t i = 0; i < batch.output_rows.size(); ++i) {
    const int32_t r = batch.output_rows[i];
    while (batch.query_start[s + 1] <= r) ++s;
    const auto row = std::span<const float>(logits).subspan(i * static_cast<size_t>(vocab),
                                                            static_cast<size_t>(vocab));
    const std::vector<double> p = softmax(row);
    std::vector<int32_t> order(p.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int32_t>(k);
    const auto k = std::min<size_t>(static_cast<size_t>(std::max(o.top_k, 1)), order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int32_t a, int32_t b) {
                        return p[size_t(a)] > p[size_t(b)] ||
                               (p[size_t(a)] == p[size_t(b)] && a < b);
                      });
    Json top = Json::array();
    for (size_t j = 0; j < k; ++j) {
      Json t = {{"id", order[j]}, {"score", p[size_t(order[j])]}, {"logit", row[size_t(order[j])]}};
      if (m.tokenizer) t["token"] = m.tokenizer->decode(std::span<const int32_t>(&order[j], 1));
      top.push_back(std::move(t));
    }
    Json line = {{"sequence", s}, {"position", r - batch.query_start[s]}, {"top", std::move(top)}};
    std::printf("%s\n", line.dump().c_str());
  }
}

CLI::App* add_common(CLI::App& app, const char* name, const char* help,
                     const std::shared_ptr<EncoderOptions>& opts) {
  CLI::App* cmd = app.add_subcommand(name, help);
  opts->model.add_to(*cmd);
  cmd->add_option("--input-ids-json", opts->input_ids_json,
                  "JSON file of token ids: [[ids], ...], or {\"input_ids\": [[...]], "
                  "\"attention_mask\": [[...]]} right-padded");
  cmd->add_option("--text", opts->texts,
                  "Text to encode with the folder's tokenizer and its post-processor ([CLS] ... "
                  "[SEP]); repeatable");
  cmd->add_option("--text-pair", opts->pairs,
                  "Second text of a pair, one per --text ([CLS] a [SEP] b [SEP])");
  return cmd;
}

}  // namespace

void add_encoder_commands(CLI::App& app) {
  auto e = std::make_shared<EncoderOptions>();
  CLI::App* cmd = add_common(app, "embed", "Last hidden states of an encoder (ModernBERT)", e);
  cmd->add_option("-o,--out", e->out,
                  "Output file (.f32): batch x length x hidden, padded rows zero")
      ->required();
  cmd->callback([e] { embed(*e); });

  auto c = std::make_shared<EncoderOptions>();
  cmd = add_common(app, "classify", "Sequence classification (ModernBertForSequenceClassification)",
                   c);
  cmd->add_option("-o,--out", c->out, "Also write the raw logits (.f32): sequences x labels");
  cmd->callback([c] { classify(*c); });

  auto f = std::make_shared<EncoderOptions>();
  cmd =
      add_common(app, "fill-mask", "Top predictions at each mask token (ModernBertForMaskedLM)", f);
  cmd->add_option("-o,--out", f->out, "Also write the raw logits (.f32): masks x vocab");
  cmd->add_option("-k,--top-k", f->top_k, "Predictions per mask")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--mask-id", f->mask_id,
                  "Mask token id (default: config.json mask_token_id, else the tokenizer's [MASK] "
                  "or <mask>)")
      ->check(CLI::Range(0, INT32_MAX));
  cmd->callback([f] { fill_mask(*f); });
}

}  // namespace infera::cli
