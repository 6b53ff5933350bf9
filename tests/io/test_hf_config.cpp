// config.json in the transformers 4 and 5 styles, and generation_config.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "infera/error.h"
#include "io/hf_config.h"
#include "safetensors_writer.h"
#include "test_paths.h"

namespace infera::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

HfConfig parse(const std::string& text) { return HfConfig::parse(text, "cfg.json"); }

TEST(HfConfig, V4AndV5QwenAgreeOnRopeAndDtype) {
  const auto v4_path = test::shared_dir() / "models" / "qwen3-0.6b" / "config.json";
  const auto v5_path = test::fixture("qwen3-micro") / "config.json";
  ASSERT_TRUE(fs::exists(v4_path)) << v4_path;
  ASSERT_TRUE(fs::exists(v5_path)) << v5_path;
  const auto v4 = HfConfig::load(v4_path);
  const auto v5 = HfConfig::load(v5_path);
  // The v4 file writes `"rope_theta": 1000000` (an integer), v5 `rope_parameters.rope_theta`.
  EXPECT_FALSE(v4.has("rope_parameters"));
  EXPECT_FALSE(v5.has("rope_theta"));
  EXPECT_EQ(v4.rope_theta(1.0), 1000000.0);
  EXPECT_EQ(v5.rope_theta(1.0), v4.rope_theta(1.0));
  EXPECT_EQ(v4.weight_dtype(), DType::BF16);
  EXPECT_EQ(v5.weight_dtype(), v4.weight_dtype());
  EXPECT_EQ(v4.rope_type(), "default");
  EXPECT_EQ(v5.rope_type(), "default");
  EXPECT_EQ(v4.model_type(), "qwen3");
  EXPECT_EQ(v5.model_type(), "qwen3");
  EXPECT_EQ(v4.get_int("hidden_size"), 1024);
  EXPECT_EQ(v5.get_int("hidden_size"), 32);
  EXPECT_EQ(v5.get_int("head_dim"), 16);
  EXPECT_DOUBLE_EQ(v5.get_float("rms_norm_eps"), 1e-6);
  EXPECT_TRUE(v5.get_bool_or("tie_word_embeddings", false));
  EXPECT_FALSE(v5.has("pad_token_id"));  // null counts as absent
  EXPECT_EQ(v5.get_int_or("pad_token_id", 7), 7);
}

TEST(HfConfig, ModernBertPerLayerTypeRope) {
  const auto path = test::fixture("modernbert-micro") / "config.json";
  ASSERT_TRUE(fs::exists(path)) << path;
  const auto v5 = HfConfig::load(path);
  EXPECT_EQ(v5.rope_theta_for("full_attention", 1.0), 160000.0);
  EXPECT_EQ(v5.rope_theta_for("sliding_attention", 1.0), 10000.0);
  EXPECT_EQ(v5.rope_theta(1.0), 160000.0);
  // The same model in transformers 4 spelling.
  const auto v4 = parse(R"({"global_rope_theta": 160000.0, "local_rope_theta": 10000.0})");
  EXPECT_EQ(v4.rope_theta_for("full_attention", 1.0), 160000.0);
  EXPECT_EQ(v4.rope_theta_for("sliding_attention", 1.0), 10000.0);
  EXPECT_EQ(parse("{}").rope_theta_for("sliding_attention", 5.0), 5.0);
}

TEST(HfConfig, TypedAccessorsNameFileAndKey) {
  const auto c = parse(R"({"a": "x", "neg": -3, "zero": 0, "big": 99999999999, "f": 2.5,
                           "s": 4, "b": 1, "str": 5, "theta": -1, "dtype": "int8"})");
  EXPECT_THAT(
      [&] { c.get_int("a"); },
      ThrowsMessage<FormatError>(HasSubstr("cfg.json: key a: expected a positive integer")));
  EXPECT_THAT([&] { c.get_int("neg"); },
              ThrowsMessage<FormatError>(HasSubstr("key neg: expected a positive integer")));
  EXPECT_THAT([&] { c.get_int("zero"); }, ThrowsMessage<FormatError>(HasSubstr("key zero")));
  EXPECT_THAT([&] { c.get_int("big"); }, ThrowsMessage<FormatError>(HasSubstr("key big")));
  EXPECT_THAT([&] { c.get_int("f"); },
              ThrowsMessage<FormatError>(
                  HasSubstr("key f: expected a positive integer (at most 2147483647), got 2.5")));
  EXPECT_THAT([&] { c.get_int("missing"); },
              ThrowsMessage<FormatError>(HasSubstr("cfg.json: key missing: missing")));
  EXPECT_THAT([&] { c.get_int_or("neg", 1); }, ThrowsMessage<FormatError>(HasSubstr("key neg")));
  EXPECT_EQ(c.get_int_or("missing", 9), 9);
  EXPECT_EQ(c.get_int_in("neg", -100, 10), -3);
  EXPECT_EQ(c.get_int_in("zero", 0, 10), 0);
  EXPECT_EQ(c.get_int_in("missing", 0, 10, 4), 4);
  EXPECT_THAT([&] { c.get_int_in("big", 0, 10); },
              ThrowsMessage<FormatError>(HasSubstr("an integer in [0, 10]")));
  EXPECT_EQ(c.get_float("s"), 4.0);  // integers are numbers too
  EXPECT_EQ(c.get_float_or("missing", 1.5), 1.5);
  EXPECT_THAT([&] { c.get_float("a"); },
              ThrowsMessage<FormatError>(HasSubstr("key a: expected a finite number")));
  EXPECT_THAT([&] { c.get_bool_or("b", false); },
              ThrowsMessage<FormatError>(HasSubstr("key b: expected true or false")));
  EXPECT_THAT([&] { c.get_string_or("str", ""); },
              ThrowsMessage<FormatError>(HasSubstr("key str: expected a string")));
  EXPECT_EQ(c.get_string_or("a", "y"), "x");
  EXPECT_THAT([&] { c.model_type(); },
              ThrowsMessage<FormatError>(HasSubstr("key model_type: missing")));
  EXPECT_THAT([&] { c.weight_dtype(); },
              ThrowsMessage<FormatError>(HasSubstr("key dtype: expected bfloat16")));
  EXPECT_THAT([&] { parse(R"({"rope_theta": -1})").rope_theta(1.0); },
              ThrowsMessage<FormatError>(HasSubstr("key rope_theta: expected a positive number")));
  EXPECT_THAT([&] { parse(R"({"rope_parameters": {"rope_theta": "x"}})").rope_theta(1.0); },
              ThrowsMessage<FormatError>(HasSubstr("key rope_parameters.rope_theta")));
  EXPECT_EQ(parse("{}").rope_theta(10000.0), 10000.0);
  EXPECT_EQ(parse("{}").weight_dtype(), std::nullopt);
  EXPECT_EQ(parse(R"({"torch_dtype": "float16"})").weight_dtype(), DType::F16);
  EXPECT_EQ(parse(R"({"dtype": "float32", "torch_dtype": "bfloat16"})").weight_dtype(), DType::F32);
  EXPECT_EQ(parse(R"({"rope_scaling": {"type": "linear"}})").rope_type(), "linear");
}

TEST(HfConfig, MalformedFiles) {
  EXPECT_THAT([] { parse("{\"a\": "); },
              ThrowsMessage<FormatError>(HasSubstr("cfg.json: not valid JSON")));
  EXPECT_THAT([] { parse("[1]"); },
              ThrowsMessage<FormatError>(HasSubstr("cfg.json: not a JSON object")));
  test::TempDir dir;
  EXPECT_THROW(HfConfig::load(dir / "config.json"), IoError);
}

std::string nested_array(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

// A value 100,000 levels deep (200 KB, far under the size cap) used to parse, and then overflow
// the stack when the accessor dumped it into its error message. The parser now stops at 129.
TEST(HfConfig, DeepNestingIsRejectedWhileParsing) {
  for (int depth : {129, 100000}) {
    const std::string text = R"({"hidden_size": )" + nested_array(depth) + "}";
    EXPECT_THAT([&] { parse(text).get_int("hidden_size"); },
                ThrowsMessage<FormatError>("cfg.json: JSON nests deeper than 128 levels"));
  }
  // 128 levels (the object is the first) parse, and the accessor's error shows the value.
  const auto ok = parse(R"({"hidden_size": )" + nested_array(127) + "}");
  EXPECT_THAT(
      [&] { ok.get_int("hidden_size"); },
      ThrowsMessage<FormatError>(HasSubstr("key hidden_size: expected a positive integer")));
}

// transformers 5 moved RoPE scaling into rope_parameters: a scaled type there is rejected like
// rope_scaling is in transformers 4 configs, and per layer type (ModernBERT) as well.
TEST(HfConfig, ScaledRopeIsRejectedInBothStyles) {
  const char* v5 =
      R"({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}})";
  EXPECT_THAT([&] { parse(v5).rope_theta(1.0); },
              ThrowsMessage<FormatError>(
                  "cfg.json: rope_parameters.rope_type 'yarn' is not supported yet (only default "
                  "RoPE is implemented)"));
  const char* v4 = R"({"rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 2.0}})";
  EXPECT_THAT([&] { parse(v4).rope_theta(1.0); },
              ThrowsMessage<FormatError>(HasSubstr("rope_scaling.rope_type 'linear' is not")));
  const char* per_type = R"({"rope_parameters": {
      "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
      "sliding_attention": {"rope_type": "dynamic", "rope_theta": 10000.0}}})";
  EXPECT_EQ(parse(per_type).rope_theta_for("full_attention", 1.0), 160000.0);
  EXPECT_THAT([&] { parse(per_type).rope_theta_for("sliding_attention", 1.0); },
              ThrowsMessage<FormatError>(HasSubstr(
                  "rope_parameters.sliding_attention.rope_type 'dynamic' is not supported yet")));
  EXPECT_EQ(
      parse(R"({"rope_parameters": {"rope_type": "default", "rope_theta": 5.0}})").rope_theta(1.0),
      5.0);
  EXPECT_EQ(parse(R"({"rope_theta": 5.0, "rope_scaling": null})").rope_theta(1.0), 5.0);
}

TEST(GenerationDefaults, EosIntOrList) {
  const auto micro = load_generation_defaults(test::fixture("qwen3-micro"));
  EXPECT_EQ(micro.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(micro.bos_token_id, 151643);
  EXPECT_FALSE(micro.temperature.has_value());
  const auto released = load_generation_defaults(test::shared_dir() / "models" / "qwen3-0.6b");
  EXPECT_EQ(released.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(released.pad_token_id, 151643);
  EXPECT_EQ(released.do_sample, true);
  EXPECT_FLOAT_EQ(released.temperature.value_or(0), 0.6f);
  EXPECT_EQ(released.top_k, 20);
  EXPECT_FLOAT_EQ(released.top_p.value_or(0), 0.95f);
  EXPECT_FALSE(released.min_p.has_value());
}

TEST(GenerationDefaults, MissingFileGivesDefaults) {
  test::TempDir dir;
  const auto d = load_generation_defaults(dir.path());
  EXPECT_TRUE(d.eos_token_ids.empty());
  EXPECT_FALSE(d.bos_token_id || d.pad_token_id || d.do_sample || d.temperature || d.top_k ||
               d.top_p || d.min_p || d.repetition_penalty || d.max_new_tokens);
}

TEST(GenerationDefaults, MalformedFileIsFormatError) {
  test::TempDir dir;
  const auto file = dir / "generation_config.json";
  auto error_of = [&](const std::string& text) {
    test::write_text(file, text);
    return [&] { load_generation_defaults(dir.path()); };
  };
  EXPECT_THAT(error_of("{not json"),
              ThrowsMessage<FormatError>(HasSubstr("generation_config.json: not valid JSON")));
  EXPECT_THAT(
      error_of(R"({"eos_token_id": "x"})"),
      ThrowsMessage<FormatError>(HasSubstr("key eos_token_id: expected a token id or a list")));
  EXPECT_THAT(error_of(R"({"eos_token_id": [1, -2]})"),
              ThrowsMessage<FormatError>(HasSubstr("key eos_token_id")));
  EXPECT_THAT(error_of(R"({"top_p": 1.5})"),
              ThrowsMessage<FormatError>(HasSubstr("key top_p: expected a number in [0, 1]")));
  EXPECT_THAT(error_of(R"({"temperature": -1})"),
              ThrowsMessage<FormatError>(HasSubstr("key temperature")));
  EXPECT_THAT(error_of(R"({"do_sample": "yes"})"),
              ThrowsMessage<FormatError>(HasSubstr("key do_sample")));
  EXPECT_THAT(error_of(R"({"max_new_tokens": 0})"),
              ThrowsMessage<FormatError>(HasSubstr("key max_new_tokens")));
  EXPECT_THAT(error_of(R"({"temperature": )" + nested_array(100000) + "}"),
              ThrowsMessage<FormatError>(HasSubstr("JSON nests deeper than 128 levels")));
  test::write_text(file, R"({"eos_token_id": null, "pad_token_id": null, "top_k": 0})");
  const auto d = load_generation_defaults(dir.path());
  EXPECT_TRUE(d.eos_token_ids.empty());
  EXPECT_EQ(d.top_k, 0);
}

}  // namespace
}  // namespace infera::io
