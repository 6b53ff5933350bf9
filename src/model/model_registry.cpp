#include "model/model_registry.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "infera/error.h"
#include "io/gguf_model.h"

namespace infera {
namespace {
const ModelFactory* const kFactories[] = {&kQwen3Factory};
const EncoderFactory* const kEncoderFactories[] = {&kModernBertFactory};

io::HfConfig load_config(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw IoError("model " + dir.string() +
                  " does not exist (expected a Hugging Face model folder or a .gguf file)");
  const auto config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path, ec))
    throw FormatError("no config.json in " + dir.string() +
                      " (expected a Hugging Face model folder)");
  return io::HfConfig::load(config_path);
}
}  // namespace

std::string format_parameter_count(int64_t parameters) {
  char buf[32];
  const double p = static_cast<double>(parameters);
  if (p >= 1e8) {
    std::snprintf(buf, sizeof buf, "%.1fB", p / 1e9);
  } else if (p >= 1e5) {
    std::snprintf(buf, sizeof buf, "%.1fM", p / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fK", p / 1e3);
  }
  std::string s = buf;
  const auto dot0 = s.find(".0");
  if (dot0 != std::string::npos && dot0 + 3 == s.size()) s.erase(dot0, 2);
  return s;
}

void CausalLM::forward_sample(const BatchDesc& batch, KvPool& cache,
                              std::span<const RowSampling> rows, std::span<SampledId> out) {
  if (rows.size() != batch.output_rows.size() || out.size() != rows.size())
    throw InvalidArgument("forward_sample: rows or out size does not match output rows");
  if (!backend().supports(Op::SampleRows, {DType::F32}))
    throw InvalidArgument("forward_sample: the " + backend().name() +
                          " backend does not sample; use the host Sampler");
  throw InvalidArgument("forward_sample: " + info().architecture +
                        " does not keep its logits on the backend");
}

void CausalLM::forward_argmax(const BatchDesc& batch, KvPool& cache, std::span<int32_t> ids) {
  if (ids.size() != batch.output_rows.size())
    throw InvalidArgument("forward_argmax: ids buffer size does not match output rows");
  const auto vocab = static_cast<size_t>(info().vocab);
  std::vector<float> logits(ids.size() * vocab);
  forward(batch, cache, logits);
  for (size_t r = 0; r < ids.size(); ++r) {
    // Strict > keeps the first of equal maxima; NaN never compares greater, so it is skipped.
    int32_t best = -1;
    float best_value = -INFINITY;
    for (size_t j = 0; j < vocab; ++j)
      if (logits[r * vocab + j] > best_value) {
        best_value = logits[r * vocab + j];
        best = static_cast<int32_t>(j);
      }
    ids[r] = best;
  }
}

std::string ModelInfo::summary() const {
  return name + " (" + std::to_string(layers) + " layers, " + std::to_string(hidden) + " dim, " +
         std::to_string(q_heads) + " Q heads, " + std::to_string(kv_heads) + " KV heads)";
}

const ModelFactory& causal_lm_factory(const io::HfConfig& config) {
  const std::string type = config.model_type();
  std::string known;
  for (const ModelFactory* f : kFactories) {
    if (type == f->model_type) return *f;
    known += std::string(known.empty() ? "" : ", ") + f->model_type;
  }
  for (const EncoderFactory* f : kEncoderFactories)
    if (type == f->model_type)
      throw InvalidArgument(config.origin() + ": model_type '" + type +
                            "' is an encoder; use infera embed, classify or fill-mask");
  throw FormatError(config.origin() + ": model_type '" + type + "' is not supported (" + known +
                    ")");
}

io::WeightStore make_dummy_causal_lm_weights(const io::HfConfig& config, uint64_t seed) {
  const ModelFactory& f = causal_lm_factory(config);
  return make_dummy_weights(f.weight_specs(config), config.weight_dtype().value_or(DType::BF16),
                            seed);
}

std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& path, Backend& backend,
                                         const LoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    if (options.dummy_weights)
      throw InvalidArgument(path.string() +
                            ": dummy weights take a model folder (its config.json), not a file");
    return load_causal_lm(io::load_gguf_model(path), path, backend, options);
  }
  ModelSource source;
  source.path = path;
  source.config = load_config(path);
  const ModelFactory& f = causal_lm_factory(source.config);
  return f.load(std::move(source), backend, options);
}

std::unique_ptr<CausalLM> load_causal_lm(io::GgufModel&& gguf, const std::filesystem::path& file,
                                         Backend& backend, const LoadOptions& options) {
  if (options.dummy_weights)
    throw InvalidArgument(file.string() + ": dummy weights cannot replace a GGUF file's weights");
  ModelSource source{.path = file,
                     .config = std::move(gguf.config),
                     .weights = std::move(gguf.weights),
                     .weight_format = gguf.file_type};
  const ModelFactory& f = causal_lm_factory(source.config);
  return f.load(std::move(source), backend, options);
}

std::unique_ptr<Encoder> load_encoder(const std::filesystem::path& dir, Backend& backend,
                                      const LoadOptions& options) {
  const io::HfConfig config = load_config(dir);
  const std::string type = config.model_type();
  std::string known;
  for (const EncoderFactory* f : kEncoderFactories) {
    if (type == f->model_type) return f->load(dir, config, backend, options);
    known += std::string(known.empty() ? "" : ", ") + f->model_type;
  }
  throw FormatError(config.origin() + ": model_type '" + type + "' is not a supported encoder (" +
                    known + ")");
}

}  // namespace infera
