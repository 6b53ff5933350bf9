// ModernBERT folders that do not match their config, configs the model cannot run, bad padded
// batches: each is an error naming what is wrong, never a crash or a different model.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../io/safetensors_writer.h"
#include "backend/cpu/cpu_backend.h"
#include "infera/error.h"
#include "model/causal_lm.h"
#include "model/encoder.h"
#include "test_paths.h"

namespace infera {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

Json micro_config() {
  std::ifstream in(test::fixture("modernbert-micro") / "config.json");
  return Json::parse(in);
}

// Loads the micro fixture's weights under `config`; returns the error message ("" if it loaded).
std::string load_error(const Json& config) {
  test::TempDir dir;
  std::ofstream(dir / "config.json") << config.dump(2);
  fs::create_symlink(fs::absolute(test::fixture("modernbert-micro") / "model.safetensors"),
                     dir / "model.safetensors");
  auto backend = make_cpu_backend(1);
  try {
    load_encoder(dir.path(), *backend, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModernBertLoad, WeightsThatDoNotMatchTheConfigAreRejected) {
  Json c = micro_config();
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  EXPECT_NE(load_error(c).find("unexpected tensor layers.3."), std::string::npos) << load_error(c);
  c = micro_config();
  c["num_hidden_layers"] = 5;
  c.erase("layer_types");
  EXPECT_NE(load_error(c).find("layers.4."), std::string::npos) << load_error(c);
  c = micro_config();
  c["intermediate_size"] = 95;
  EXPECT_NE(load_error(c).find("layers.0.mlp.Wi.weight: shape [192, 64], expected [190, 64]"),
            std::string::npos)
      << load_error(c);
  c = micro_config();
  c["norm_bias"] = true;  // the file has no norm biases
  EXPECT_NE(load_error(c).find("embeddings.norm.bias"), std::string::npos) << load_error(c);
  c = micro_config();
  c["architectures"] = {"ModernBertForMaskedLM"};  // the bare backbone has no "model." prefix
  EXPECT_NE(load_error(c).find("unexpected tensor embeddings."), std::string::npos)
      << load_error(c);
}

TEST(ModernBertLoad, ConfigsItCannotRunAreRejectedByName) {
  const std::pair<const char*, Json> bad[] = {
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"classifier_pooling", "max"},
      {"architectures", Json::array({"ModernBertForTokenClassification"})},
      {"layer_types", Json::array({"full_attention"})},
      {"num_attention_heads", 5},
  };
  for (const auto& [key, value] : bad) {
    Json c = micro_config();
    c[key] = value;
    const std::string err = load_error(c);
    EXPECT_NE(err, "") << key;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  }
  EXPECT_EQ(load_error(micro_config()), "");
}

TEST(ModernBertLoad, TheDecoderLoaderPointsToTheEncoderCommands) {
  auto backend = make_cpu_backend(1);
  try {
    load_causal_lm(test::fixture("modernbert-micro"), *backend, {});
    FAIL() << "loaded an encoder as a causal LM";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("encoder"), std::string::npos) << e.what();
  }
}

TEST(ModernBertLoad, DummyWeightsRunEveryHead) {
  auto backend = make_cpu_backend(2);
  for (const char* arch :
       {"ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification"}) {
    test::TempDir dir;
    Json c = micro_config();
    c["architectures"] = {arch};
    c["norm_bias"] = c["attention_bias"] = c["mlp_bias"] = c["classifier_bias"] = true;
    c["tie_word_embeddings"] = false;
    std::ofstream(dir / "config.json") << c.dump(2);
    auto model = load_encoder(dir.path(), *backend, {.dummy_weights = true, .dummy_seed = 3});
    const std::vector<std::vector<int32_t>> seqs = {{4090, 7, 8, 4091}, {4090, 4091}};
    BatchDesc batch = encoder_batch(seqs);
    std::vector<float> hidden(6 * 64);
    model->hidden_states(batch, hidden);
    for (float v : hidden) ASSERT_TRUE(std::isfinite(v)) << arch;
    if (model->encoder_info().head == EncoderHead::MaskedLM) {
      batch.output_rows = {1, 5};
      std::vector<float> logits(2 * 4096);
      model->masked_lm_logits(batch, logits);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    }
    if (model->encoder_info().head == EncoderHead::Classifier) {
      std::vector<float> logits(2 * 2);  // no id2label in this config: num_labels default 2
      model->classify(batch, logits);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(EncoderBatch, PaddedInputMustBeRightPaddedAndNonEmpty) {
  PaddedIds p{
      .batch = 2, .length = 3, .ids = {1, 2, 3, 4, 5, 6}, .attention_mask = {1, 1, 0, 1, 1, 1}};
  const auto seqs = unpad(p);
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(seqs[1], (std::vector<int32_t>{4, 5, 6}));
  p.attention_mask = {0, 1, 1, 1, 1, 1};  // left padding
  EXPECT_THROW(unpad(p), InvalidArgument);
  p.attention_mask = {0, 0, 0, 1, 1, 1};  // an empty row
  EXPECT_THROW(unpad(p), InvalidArgument);
  p.attention_mask = {1, 1};
  EXPECT_THROW(unpad(p), InvalidArgument);
  const BatchDesc d = encoder_batch(seqs);
  EXPECT_EQ(d.query_start, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(d.positions, (std::vector<int32_t>{0, 1, 0, 1, 2}));
  EXPECT_THROW(encoder_batch(std::vector<std::vector<int32_t>>{{1}, {}}), InvalidArgument);
}

TEST(EncoderBatch, TokensOutsideTheVocabularyOrContextAreRejected) {
  auto backend = make_cpu_backend(1);
  auto model = load_encoder(test::fixture("modernbert-micro"), *backend, {});
  std::vector<float> hidden(2 * 64);
  EXPECT_THROW(
      model->hidden_states(encoder_batch(std::vector<std::vector<int32_t>>{{1, 4096}}), hidden),
      InvalidArgument);
  BatchDesc shifted = encoder_batch(std::vector<std::vector<int32_t>>{{1, 2}});
  shifted.positions = {1, 2};
  shifted.seq_lens = {3};
  EXPECT_THROW(model->hidden_states(shifted, hidden), InvalidArgument);
}

}  // namespace
}  // namespace infera
