// Loading decision-model/1 checkpoints: every config field and tensor is checked and a bad one is
// named; the fixture's configuration really matters (a wrong head_rope_theta misses the
// reference by far more than the parity tolerance, so the parity test can fail).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "../io/safetensors_writer.h"
#include "backend/cpu/cpu_backend.h"
#include "core/dtype_convert.h"
#include "decision/decision_model.h"
#include "forwarding_backend.h"
#include "infera/error.h"
#include "io/weight_store.h"
#include "test_compare.h"
#include "test_paths.h"

namespace infera::decision {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

Json read_json(const fs::path& p) {
  std::ifstream in(p);
  return Json::parse(in);
}

// A copy of decision-micro with its configs and tensors edited.
struct EditedCheckpoint {
  test::TempDir dir;
  EditedCheckpoint(const std::function<void(Json&)>& edit_decision,
                   const std::function<void(Json&)>& edit_encoder = nullptr,
                   const std::function<void(test::SafetensorsWriter&, const io::WeightStore&)>&
                       edit_tensors = nullptr) {
    const fs::path src = test::fixture("decision-micro");
    Json dec = read_json(src / "decision_config.json");
    Json enc = read_json(src / "encoder_config.json");
    if (edit_decision) edit_decision(dec);
    if (edit_encoder) edit_encoder(enc);
    test::write_text(dir / "decision_config.json", dec.dump());
    test::write_text(dir / "encoder_config.json", enc.dump());
    if (edit_tensors) {
      const io::WeightStore store = io::WeightStore::open_file(src / "model.safetensors");
      test::SafetensorsWriter w;
      edit_tensors(w, store);
      w.write(dir / "model.safetensors");
    } else {
      fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
    }
  }
};

// Copies every tensor but `skip`, then `extra`.
auto copy_except(const std::string& skip) {
  return [skip](test::SafetensorsWriter& w, const io::WeightStore& s) {
    for (const std::string& n : s.names())
      if (n != skip) w.add(s.get(n));
  };
}

std::string load_error(const EditedCheckpoint& c) {
  auto backend = make_cpu_backend(1);
  try {
    DecisionModel::load(c.dir.path(), *backend, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DecisionLoad, ConfigFieldsAreChecked) {
  struct Bad {
    std::function<void(Json&)> edit;
    std::string expect;
  };
  const std::vector<Bad> bad = {
      {[](Json& j) { j["format"] = "decision-model/2"; }, "format 'decision-model/2'"},
      {[](Json& j) { j.erase("format"); }, "'format' missing"},
      {[](Json& j) { j["num_head_layers"] = 0; }, "num_head_layers"},
      {[](Json& j) { j.erase("head_rope_theta"); }, "head_rope_theta"},
      {[](Json& j) { j["actions"] = Json::array(); }, "'actions'"},
      {[](Json& j) {
         j["actions"] = {"a", "a"};
       },
       "listed twice"},
      {[](Json& j) { j["marker_token_id"] = 4096; }, "marker_token_id"},
      {[](Json& j) { j["sep_token_id"] = 4090; }, "four different ids"},
      {[](Json& j) { j["max_length"] = 100000; }, "max_length"},
      {[](Json& j) { j["action_dtype"] = "int8"; }, "action_dtype"},
      {[](Json& j) { j["surprise"] = 1; }, "unknown field 'surprise'"},
      {[](Json& j) { j["action_hidden"] = 16; }, "action.0.weight"},  // shapes follow the config
      {[](Json& j) { j["num_head_layers"] = 3; }, "heads.2."},
      {[](Json& j) { j["num_head_layers"] = 1; }, "unexpected tensor heads.1."},
  };
  for (const Bad& b : bad) {
    const EditedCheckpoint c(b.edit);
    const std::string err = load_error(c);
    EXPECT_NE(err.find(b.expect), std::string::npos) << "want '" << b.expect << "', got: " << err;
  }
}

TEST(DecisionLoad, TensorsAreChecked) {
  {
    const EditedCheckpoint c(nullptr, nullptr, copy_except("scorer.bias"));
    EXPECT_NE(load_error(c).find("scorer.bias"), std::string::npos) << load_error(c);
  }
  {
    const EditedCheckpoint c(nullptr, nullptr, copy_except("encoder.layers.2.mlp.Wo.weight"));
    EXPECT_NE(load_error(c).find("encoder.layers.2.mlp.Wo.weight"), std::string::npos);
  }
  {
    const EditedCheckpoint c(
        nullptr, nullptr, [](test::SafetensorsWriter& w, const io::WeightStore& s) {
          copy_except("heads.0.W1.weight")(w, s);
          w.add_f32("heads.0.W1.weight", {64, 64}, std::vector<float>(64 * 64, 0.f));
        });
    const std::string err = load_error(c);
    EXPECT_NE(err.find("heads.0.W1.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("[256, 64]"), std::string::npos) << err;
  }
  {
    const EditedCheckpoint c(nullptr, nullptr,
                             [](test::SafetensorsWriter& w, const io::WeightStore& s) {
                               copy_except("")(w, s);
                               w.add_f32("encoder.layers.9.attn.Wo.weight", {1}, {0.f});
                             });
    EXPECT_NE(load_error(c).find("encoder.layers.9.attn.Wo.weight"), std::string::npos);
  }
  {
    const EditedCheckpoint c(nullptr, [](Json& j) { j["model_type"] = "bert"; });
    EXPECT_NE(load_error(c).find("model_type 'bert'"), std::string::npos);
  }
}

TEST(DecisionLoad, WrongHeadThetaMissesTheReference) {
  const EditedCheckpoint c([](Json& j) { j["head_rope_theta"] = 10000.0; });
  auto backend = make_cpu_backend(1);
  auto good = DecisionModel::load(test::fixture("decision-micro"), *backend, {});
  auto bad = DecisionModel::load(c.dir.path(), *backend, {});
  const Json cases = read_json(test::fixture("decision-micro") / "cases.json")["cases"];
  const std::vector<std::vector<int32_t>> ids = {cases[2]["input_ids"]};  // 302 tokens
  const auto g = good->forward(ids), b = bad->forward(ids);
  EXPECT_GT(test::max_abs_diff(b[0].option_logits, g[0].option_logits), 1e-3);
}

// The action head's activation dtype comes from decision_config.json (`action_dtype`), whatever
// the weights are stored as: bfloat16 rounds its activations (results move by bf16 rounding,
// ~1e-2 at most here), float32 (the default) matches the reference to 1e-4 (parity test).
TEST(DecisionLoad, ActionHeadDtypeComesFromTheConfig) {
  const EditedCheckpoint c([](Json& j) { j["action_dtype"] = "bfloat16"; });
  auto backend = make_cpu_backend(1);
  auto f32 = DecisionModel::load(test::fixture("decision-micro"), *backend, {});
  auto bf16 = DecisionModel::load(c.dir.path(), *backend, {});
  EXPECT_EQ(f32->config().action_dtype, DType::F32);
  EXPECT_EQ(bf16->config().action_dtype, DType::BF16);
  const Json cases = read_json(test::fixture("decision-micro") / "cases.json")["cases"];
  std::vector<std::vector<int32_t>> ids;
  for (const Json& k : cases) ids.push_back(k["input_ids"]);
  const auto a = f32->forward(ids), b = bf16->forward(ids);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::fmax(diff, test::max_abs_diff(a[i].action_logits, b[i].action_logits));
    EXPECT_EQ(a[i].option_probs, b[i].option_probs);  // only the action head changes
    for (float v : b[i].action_logits)                // every value is a bf16 number
      EXPECT_EQ(v, bf16_to_f32(f32_to_bf16(v)));
  }
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 2e-2);
  // Quantized encoder and head layers leave the action head's weights in f32 (see the report).
  ModelOptions q;
  q.weights = WeightFormat::Int4Group64;
  EXPECT_EQ(
      DecisionModel::load(test::fixture("decision-micro"), *backend, q)->config().action_dtype,
      DType::F32);
}

// The CPU backend with one op declined, as a device backend without the encoder ops is.
class DecliningBackend final : public test::ForwardingBackend {
 public:
  DecliningBackend(Backend& inner, Op declined) : ForwardingBackend(inner), declined_(declined) {}
  std::string name() const override { return "declining"; }
  bool supports(Op op, std::initializer_list<DType> dtypes) const override {
    return op != declined_ && inner().supports(op, dtypes);
  }

 private:
  Op declined_;
};

TEST(DecisionLoad, BackendsWithoutAnOpAreRefusedAtLoad) {
  auto cpu = make_cpu_backend(1);
  for (Op op : {Op::LayerNorm, Op::AttentionPacked, Op::Attention, Op::Gelu}) {
    DecliningBackend b(*cpu, op);
    try {
      DecisionModel::load(test::fixture("decision-micro"), b, {});
      ADD_FAILURE() << op_name(op) << " declined but the model loaded";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(op_name(op))), std::string::npos)
          << e.what();
    }
  }
}

TEST(DecisionLoad, InputsAreChecked) {
  auto backend = make_cpu_backend(1);
  auto m = DecisionModel::load(test::fixture("decision-micro"), *backend, {});
  auto err = [&](std::vector<int32_t> ids) {
    try {
      m->forward(std::vector<std::vector<int32_t>>{ids});
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err({}).find("no token ids"), std::string::npos);
  EXPECT_NE(err({4090, 5, 4091}).find("no option marker"), std::string::npos);
  EXPECT_NE(err({4090, 4093, 4096}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(err({4090, -1, 4093}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(err(std::vector<int32_t>(513, 4093)).find("max_length"), std::string::npos);
}

TEST(DecisionLoad, DummyWeightsOfTheConfigShapesRun) {
  auto backend = make_cpu_backend(1);
  ModelOptions o;
  o.dummy_weights = true;
  o.dummy_seed = 7;
  auto m = DecisionModel::load(test::fixture("decision-micro"), *backend, o);
  const auto out = m->forward(std::vector<std::vector<int32_t>>{{4090, 4093, 7, 4093, 9, 4091}});
  ASSERT_EQ(out[0].option_probs.size(), 2u);
  EXPECT_NEAR(out[0].option_probs[0] + out[0].option_probs[1], 1.0, 1e-6);
  ASSERT_EQ(out[0].action_probs.size(), 3u);
}

}  // namespace
}  // namespace infera::decision
