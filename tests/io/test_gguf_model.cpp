// A GGUF of the qwen3-micro fixture (written by convert_qwen3_to_gguf, the code behind
// `infera quantize`) loaded back through load_gguf_model: the config equals config.json, every
// tensor equals its safetensors source (F32: the widened bf16 values; BF16: the same bytes; Q8_0:
// the reference quantization of those values, which tests/quant proves byte-identical to the gguf
// package), the tokenizer rebuilt from GGUF metadata encodes and decodes the 1,500-text corpus
// exactly as Hugging Face tokenizers did, and the stop ids / chat template survive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "infera/error.h"
#include "infera/tokenizer.h"
#include "io/gguf_convert.h"
#include "io/gguf_model.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "io/weight_store.h"
#include "quant/quantize.h"
#include "test_paths.h"

namespace infera::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path micro() { return test::fixture("qwen3-micro"); }
fs::path tokenizer_dir() { return test::shared_dir() / "models" / "qwen3-0.6b"; }

// A temporary path private to this process: ctest runs the tests of this file as parallel
// processes, which must not write the same file.
fs::path temp_file(const std::string& stem) {
  return fs::temp_directory_path() /
         ("infera_" + stem + "_" + std::to_string(::getpid()) + ".gguf");
}

// One converted file per type, written once per process and removed at exit.
fs::path converted(GgufFileType type) {
  struct Files {
    std::map<GgufFileType, fs::path> paths;
    ~Files() {
      for (const auto& [t, p] : paths) fs::remove(p);
    }
  };
  static Files files;
  auto it = files.paths.find(type);
  if (it != files.paths.end()) return it->second;
  const fs::path out = temp_file("micro_" + std::string(gguf_file_type_name(type)));
  ConvertOptions options;
  options.tokenizer_dir = tokenizer_dir();
  convert_qwen3_to_gguf(micro(), type, out, options);
  return files.paths[type] = out;
}

TEST(GgufModel, ConfigMatchesConfigJson) {
  const GgufModel g = load_gguf_model(converted(GgufFileType::BF16));
  const HfConfig want = HfConfig::load(micro() / "config.json");
  EXPECT_EQ(g.architecture, "qwen3");
  EXPECT_EQ(g.config.model_type(), "qwen3");
  for (const char* key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"})
    EXPECT_EQ(g.config.get_int(key), want.get_int(key)) << key;
  EXPECT_FLOAT_EQ(float(g.config.get_float("rms_norm_eps")), float(want.get_float("rms_norm_eps")));
  EXPECT_EQ(g.config.rope_theta(0), want.rope_theta(0));
  EXPECT_EQ(g.config.get_bool_or("tie_word_embeddings", false), true);
}

TEST(GgufModel, TensorsEqualTheirSafetensorsSource) {
  const WeightStore source = WeightStore::open_folder(micro());
  for (const GgufFileType type : {GgufFileType::F32, GgufFileType::BF16, GgufFileType::Q8_0}) {
    SCOPED_TRACE(gguf_file_type_name(type));
    const GgufModel g = load_gguf_model(converted(type));
    EXPECT_EQ(g.weights.names(), source.names());
    for (const std::string& name : source.names()) {
      SCOPED_TRACE(name);
      const Tensor& src = source.get(name);
      const Tensor& got = g.weights.get(name);
      ASSERT_EQ(got.shape(), src.shape());
      const int64_t k = src.dim(src.rank() - 1), rows = src.numel() / k;
      std::vector<float> row(static_cast<size_t>(k));
      std::vector<uint8_t> want_bytes(dtype_bytes(got.dtype(), size_t(k)));
      const DType want_type = src.rank() == 1 || type == GgufFileType::F32 ? DType::F32
                              : type == GgufFileType::BF16                 ? DType::BF16
                                                                           : DType::Q8_0;
      ASSERT_EQ(got.dtype(), want_type);
      ASSERT_EQ(got.nbytes(), dtype_bytes(want_type, size_t(src.numel())));
      for (int64_t r = 0; r < rows; ++r) {
        quant::dequantize_row(
            src.dtype(),
            static_cast<const uint8_t*>(src.data()) + r * dtype_bytes(src.dtype(), size_t(k)), k,
            row.data());
        quant::quantize_row(want_type, row.data(), k, want_bytes.data());
        ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(got.data()) + r * want_bytes.size(),
                                 want_bytes.data(), want_bytes.size()))
            << "row " << r;
      }
    }
    // require() accepts the quantized matrices (the loader's shape check) but no quantized vector.
    EXPECT_NO_THROW(g.weights.require("model.embed_tokens.weight", {151936, 32}));
  }
}

struct CorpusCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

TEST(GgufModel, TokenizerFromMetadataMatchesHuggingFace) {
  const GgufModel g = load_gguf_model(converted(GgufFileType::Q8_0));
  const Tokenizer tok = Tokenizer::from_json_text(g.tokenizer_json, "micro.gguf");
  const Tokenizer hf = Tokenizer::load(tokenizer_dir());
  EXPECT_EQ(tok.vocab_size(), hf.vocab_size());
  std::ifstream in(test::fixture("tokenizer") / "qwen3_corpus.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    const auto text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(tok.encode(text), want) << "case " << cases;
    ASSERT_EQ(tok.decode(want), c["decoded"].get<std::string>()) << "case " << cases;
    ++cases;
  }
  EXPECT_EQ(cases, 1500);
  // Special tokens: <|im_end|> is control (special), <think> user-defined (not special).
  EXPECT_TRUE(tok.is_special(*tok.token_to_id("<|im_end|>")));
  EXPECT_FALSE(tok.is_special(*tok.token_to_id("<think>")));
  EXPECT_EQ(tok.encode("<|im_start|>user\nhi<|im_end|>"),
            hf.encode("<|im_start|>user\nhi<|im_end|>"));
}

TEST(GgufModel, StopIdsBosAndChatTemplate) {
  const GgufModel g = load_gguf_model(converted(GgufFileType::Q8_0));
  // eos from tokenizer_config (<|im_end|>) plus <|endoftext|>, as generation_config lists them.
  EXPECT_THAT(g.generation.eos_token_ids, ::testing::UnorderedElementsAre(151645, 151643));
  EXPECT_EQ(g.generation.bos_token_id, 151643);
  std::ifstream in(tokenizer_dir() / "tokenizer_config.json");
  const json cfg = json::parse(in);
  ASSERT_TRUE(g.chat_template.has_value());
  EXPECT_EQ(*g.chat_template, cfg["chat_template"].get<std::string>());
  EXPECT_TRUE(is_gguf_file(converted(GgufFileType::Q8_0)));
  EXPECT_FALSE(is_gguf_file(micro() / "config.json"));
  EXPECT_FALSE(is_gguf_file(micro()));
}

TEST(GgufModel, RejectsOtherArchitecturesAndForeignTensors) {
  const fs::path path = temp_file("foreign");
  auto write = [&](const std::string& arch, const std::string& tensor) {
    GgufWriter w;
    w.set("general.architecture", GgufValue::string(arch));
    w.add_tensor(tensor, DType::F32, {4}, [](std::vector<uint8_t>&) {});
    w.write(path);
  };
  write("llama", "token_embd.weight");
  EXPECT_THAT([&] { load_gguf_model(path); },
              ::testing::ThrowsMessage<FormatError>(
                  ::testing::HasSubstr("general.architecture: 'llama' is not supported")));
  write("qwen3", "rope_freqs.weight");
  EXPECT_THAT([&] { load_gguf_model(path); },
              ::testing::ThrowsMessage<FormatError>(
                  ::testing::HasSubstr("tensor rope_freqs.weight is not part of a Qwen3 model")));
  write("qwen3", "token_embd.weight");  // no hyper-parameters
  EXPECT_THAT([&] { load_gguf_model(path); },
              ::testing::ThrowsMessage<FormatError>(
                  ::testing::HasSubstr("metadata qwen3.embedding_length: missing")));
  fs::remove(path);
}

// Hostile metadata in an otherwise valid Qwen3 file: each bad key is named in the error.
TEST(GgufModel, BadMetadataIsNamed) {
  const fs::path path = temp_file("bad_metadata");
  auto attempt = [&](const std::function<void(GgufWriter&)>& spoil) {
    GgufWriter w;
    w.set("general.architecture", GgufValue::string("qwen3"));
    for (const char* key : {"qwen3.block_count", "qwen3.embedding_length",
                            "qwen3.feed_forward_length", "qwen3.attention.head_count"})
      w.set(key, GgufValue::u32(32));
    w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    w.set("tokenizer.ggml.pre", GgufValue::string("qwen2"));
    w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b", "<|im_end|>"}));
    w.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1, 3}));
    w.set("tokenizer.ggml.merges", GgufValue::string_array({"a b"}));
    spoil(w);
    w.add_tensor("token_embd.weight", DType::F32, {3, 32}, [](std::vector<uint8_t>&) {});
    w.write(path);
    try {
      load_gguf_model(path);
      return std::string("loaded");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
  };
  using ::testing::HasSubstr;
  EXPECT_EQ(attempt([](GgufWriter&) {}), "loaded");  // the unspoiled file is fine
  EXPECT_THAT(attempt([](GgufWriter& w) { w.set("qwen3.block_count", GgufValue::u32(0)); }),
              HasSubstr("metadata qwen3.block_count: expected a positive integer"));
  EXPECT_THAT(
      attempt([](GgufWriter& w) { w.set("qwen3.attention.head_count", GgufValue::string("8")); }),
      HasSubstr("metadata qwen3.attention.head_count: expected a positive integer, got a "
                "STRING"));
  EXPECT_THAT(attempt([](GgufWriter& w) { w.set("qwen3.rope.freq_base", GgufValue::f32(-1)); }),
              HasSubstr("metadata qwen3.rope.freq_base"));
  EXPECT_THAT(attempt([](GgufWriter& w) { w.set("qwen3.vocab_size", GgufValue::u32(4)); }),
              HasSubstr("token_embd.weight has 3 rows but the vocabulary has 4 tokens"));
  EXPECT_THAT(attempt([](GgufWriter& w) {
                w.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1}));
              }),
              HasSubstr("metadata tokenizer.ggml.token_type"));
  EXPECT_THAT(attempt([](GgufWriter& w) {
                w.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1, 9}));
              }),
              HasSubstr("token type 9"));
  EXPECT_THAT(
      attempt([](GgufWriter& w) { w.set("tokenizer.ggml.pre", GgufValue::string("llama-bpe")); }),
      HasSubstr("metadata tokenizer.ggml.pre: 'llama-bpe' is not supported"));
  EXPECT_THAT(attempt([](GgufWriter& w) {
                w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "\xff", "c"}));
              }),
              HasSubstr("not valid UTF-8"));
  EXPECT_THAT(
      attempt([](GgufWriter& w) { w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(3)); }),
      HasSubstr("metadata tokenizer.ggml.eos_token_id: not a token id in [0, 3)"));
  EXPECT_THAT(attempt([](GgufWriter& w) { w.set("tokenizer.ggml.merges", GgufValue::u32(1)); }),
              HasSubstr("metadata tokenizer.ggml.merges: expected an array of strings"));
  fs::remove(path);
}

TEST(GgufModel, QuantizeTypeNames) {
  EXPECT_EQ(parse_gguf_file_type("q4_k_m"), GgufFileType::Q4_K_M);
  EXPECT_THROW(parse_gguf_file_type("q5_k"), InvalidArgument);
  // The per-tensor rule (llama.cpp's, see gguf_convert.h), on Qwen3-0.6B shapes (28 layers).
  const Shape w{1024, 3072}, embed{151936, 1024};
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, "token_embd.weight", embed, 0, 28, true),
            DType::Q6_K);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, "token_embd.weight", embed, 0, 28, false),
            DType::Q4_K);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_0, "output.weight", embed, 0, 28, false),
            DType::Q6_K);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q8_0, "output.weight", embed, 0, 28, false),
            DType::Q8_0);
  int six_bit = 0;
  for (int i = 0; i < 28; ++i)
    six_bit +=
        gguf_tensor_type(GgufFileType::Q4_K_M, "blk." + std::to_string(i) + ".ffn_down.weight", w,
                         i, 28, true) == DType::Q6_K;
  EXPECT_EQ(six_bit, 14);  // layers 0-2, 5, 8, 11, 14, 17, 20, 23, 24-27
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, "blk.1.ffn_up.weight", w, 1, 28, true),
            DType::Q4_K);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, "blk.1.ffn_up.weight", {64, 32}, 1, 28, true),
            DType::Q8_0);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_0, "blk.1.ffn_up.weight", {64, 48}, 1, 28, true),
            DType::F16);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, "blk.1.attn_norm.weight", {1024}, 1, 28, true),
            DType::F32);
}

}  // namespace
}  // namespace infera::io
