// GGUF reader and writer.
//  - Reading: tests/data/gguf/reference.gguf was written by the `gguf` package's GGUFWriter
//    (tests/data/make_gguf_reference.py); every metadata value, type, tensor dims, type and data
//    byte must come out as reference.json / reference.tensors say.
//  - Writing: what GgufWriter writes reads back identically (and
//  tests/io/check_gguf_with_gguf_py.py
//    checks the same files with the gguf package's reader).
//  - Hostile input: each malformed field fails with a FormatError naming it; every truncation and
//    seeded byte mutations of the reference file either parse or throw FormatError, never crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "infera/error.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "io/gguf_writer.h"

namespace infera::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::filesystem::path data_dir() {
  return std::filesystem::path(INFERA_SOURCE_DIR) / "tests/data/gguf";
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << p;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

GgufFile parse(const std::vector<uint8_t>& bytes) {
  // An exact-size heap copy, so AddressSanitizer sees any read past the end.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  return parse_gguf(copy.get(), bytes.size(), "test.gguf");
}

void expect_value(const std::string& key, const json& want, const GgufValue& got) {
  SCOPED_TRACE(key);
  const std::string type = want["type"];
  ASSERT_STREQ(gguf_type_name(got.type), type.c_str());
  if (type == "ARRAY") {
    const std::string elem = want["elem_type"];
    ASSERT_STREQ(gguf_type_name(got.elem_type), elem.c_str());
    const json& values = want["value"];
    ASSERT_EQ(got.array_size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (elem == "STRING") {
        EXPECT_EQ(got.strings[i], values[i].get<std::string>());
      } else if (elem == "FLOAT32") {
        EXPECT_EQ(got.reals[i], values[i].get<double>());
      } else if (elem == "BOOL") {
        EXPECT_EQ(got.uints[i], values[i].get<bool>() ? 1u : 0u);
      } else if (elem == "ARRAY") {
        ASSERT_EQ(got.arrays[i].array_size(), values[i].size());
        for (size_t j = 0; j < values[i].size(); ++j)
          EXPECT_EQ(got.arrays[i].sints[j], values[i][j].get<int64_t>());
      } else if (elem.rfind("INT", 0) == 0) {
        EXPECT_EQ(got.sints[i], values[i].get<int64_t>());
      } else {
        EXPECT_EQ(got.uints[i], values[i].get<uint64_t>());
      }
    }
    return;
  }
  const json& v = want["value"];
  if (type == "STRING") {
    EXPECT_EQ(got.str, v.get<std::string>());
  } else if (type == "BOOL") {
    EXPECT_EQ(got.uint, v.get<bool>() ? 1u : 0u);
  } else if (type == "FLOAT32" || type == "FLOAT64") {
    EXPECT_EQ(got.real, v.get<double>());
  } else if (type.rfind("INT", 0) == 0) {
    EXPECT_EQ(got.sint, v.get<int64_t>());
  } else {
    EXPECT_EQ(got.uint, v.get<uint64_t>());
  }
}

TEST(Gguf, ReadsWhatTheGgufPackageWrote) {
  const auto bytes = read_file(data_dir() / "reference.gguf");
  const auto tensor_bytes = read_file(data_dir() / "reference.tensors");
  std::ifstream jin(data_dir() / "reference.json");
  const json want = json::parse(jin);
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  ASSERT_EQ(f.metadata.size(), want["metadata"].size());
  for (const auto& [key, w] : want["metadata"].items()) {
    const GgufValue* got = f.find(key);
    ASSERT_NE(got, nullptr) << key;
    expect_value(key, w, *got);
  }
  ASSERT_EQ(f.tensors.size(), want["tensors"].size());
  const auto tensors = read_gguf_tensors(f, bytes.data(), bytes.size(), nullptr);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const json& w = want["tensors"][i];
    const GgufTensorInfo& t = f.tensors[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(t.ggml_type, w["ggml_type"].get<uint32_t>());
    EXPECT_STREQ(ggml_type_name(t.ggml_type), w["type"].get<std::string>().c_str());
    EXPECT_EQ(t.dims, w["dims"].get<std::vector<uint64_t>>());
    // Our shape is the row-major reverse; the tensor's bytes are the writer's bytes.
    for (int d = 0; d < t.shape.rank; ++d)
      EXPECT_EQ(t.shape[d], int64_t(t.dims[t.dims.size() - 1 - d]));
    const auto range = w["bytes"].get<std::vector<size_t>>();
    ASSERT_EQ(t.nbytes, range[1] - range[0]);
    ASSERT_EQ(tensors[i].nbytes(), t.nbytes);
    EXPECT_EQ(0, std::memcmp(tensors[i].data(), tensor_bytes.data() + range[0], t.nbytes));
  }
}

// Builds small GGUF byte strings field by field, for malformed-input tests.
struct Builder {
  std::vector<uint8_t> b;
  template <typename T>
  Builder& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Builder& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Builder& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  }
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Builder& pad(size_t alignment = 32) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  Builder& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

void expect_format_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    parse(bytes);
    FAIL() << "parsed, expected an error mentioning '" << fragment << "'";
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
    EXPECT_THAT(e.what(), HasSubstr("test.gguf"));
  }
}

TEST(Gguf, MalformedFieldsAreNamed) {
  expect_format_error({'G', 'G', 'U'}, "magic");
  expect_format_error(Builder().put<uint32_t>(0x12345678).put<uint32_t>(3).b, "not a GGUF file");
  expect_format_error(Builder().header(0, 0, 1).b, "version 1");
  expect_format_error(Builder().header(0, 0, 0x03000000).b, "big-endian");
  expect_format_error(Builder().header(0, 1ull << 40).b, "metadata count");
  expect_format_error(Builder().header(1ull << 40, 0).b, "tensor count");
  // A string longer than the file.
  expect_format_error(Builder().header(0, 1).put<uint64_t>(1000).zeros(8).b,
                      "metadata entry 0 key");
  expect_format_error(Builder().header(0, 1).str("k").put<uint32_t>(99).b, "unknown value type 99");
  expect_format_error(
      Builder().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(1ull << 50).b,
      "metadata k: array of 1125899906842624 INT32");
  expect_format_error(Builder().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).b,
                      "bool value 2");
  expect_format_error(Builder()
                          .header(0, 2)
                          .str("k")
                          .put<uint32_t>(4)
                          .put<uint32_t>(1)
                          .str("k")
                          .put<uint32_t>(4)
                          .put<uint32_t>(1)
                          .b,
                      "metadata key k appears twice");
  expect_format_error(
      Builder().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(24).b,
      "general.alignment: 24 is not a power of two");
  expect_format_error(
      Builder().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32).b,
      "general.alignment: expected UINT32");
  // Nested arrays deeper than the limit.
  Builder deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 6; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  expect_format_error(deep.b, "nested deeper");

  auto one_tensor = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                       size_t data_bytes, const std::string& name = "w") {
    return Builder().header(1, 0).tensor(name, dims, type, offset).pad().zeros(data_bytes).b;
  };
  expect_format_error(one_tensor({4, 2}, 13, 0, 1024),
                      "tensor w: tensor type Q5_K (13) is not supported");
  expect_format_error(one_tensor({4, 2}, 77, 0, 1024), "unknown (77)");
  expect_format_error(one_tensor({48, 2}, 8, 0, 1024),
                      "rows of 48 elements are not whole Q8_0 blocks");
  expect_format_error(one_tensor({4, 0}, 0, 0, 1024), "dimension 1 = 0");
  expect_format_error(one_tensor({1ull << 40, 1ull << 40}, 0, 0, 1024), "overflow");
  expect_format_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 1024), "5 dimensions");
  expect_format_error(one_tensor({4, 2}, 0, 16, 1024), "data offset 16 is not a multiple");
  expect_format_error(one_tensor({4, 2}, 0, 0, 31), "runs past the 31-byte data section");
  expect_format_error(one_tensor({4}, 0, 0, 64, std::string(64, 'x')), "name longer than 63");
  expect_format_error(
      Builder().header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad().zeros(64).b,
      "tensor a: name appears twice");
  expect_format_error(
      Builder().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad().zeros(128).b,
      "tensor b at data offset 32 overlaps tensor a [0, 64)");
}

TEST(Gguf, TruncationsAndMutationsNeverCrash) {
  const auto bytes = read_file(data_dir() / "reference.gguf");
  size_t errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      parse(std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(n)));
    } catch (const FormatError&) {
      ++errors;
    }
  }
  // Only prefixes that end inside the last tensor's data are complete headers with a short data
  // section; every one of them must still be rejected.
  EXPECT_EQ(errors, bytes.size());
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    auto mutated = bytes;
    const int flips = 1 + int(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the header (where the structure is), sometimes anywhere.
      const size_t at = rng() % 4 ? rng() % 1200 : rng() % mutated.size();
      mutated[at] = static_cast<uint8_t>(rng());
    }
    try {
      const GgufFile f = parse(mutated);
      read_gguf_tensors(f, mutated.data(), mutated.size(), nullptr);
      ++parsed;
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(parsed, 100);  // many flips land in values or tensor data and stay valid
}

TEST(Gguf, WriterOutputReadsBackIdentically) {
  // Per process: ctest runs tests in parallel processes.
  const auto path = std::filesystem::temp_directory_path() /
                    ("infera_gguf_writer_test_" + std::to_string(::getpid()) + ".gguf");
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("a.u32", GgufValue::u32(7));
  w.set("a.i32", GgufValue::i32(-7));
  w.set("a.f32", GgufValue::f32(0.25f));
  w.set("a.bool", GgufValue::boolean(true));
  w.set("a.strings", GgufValue::string_array({"x", "", "\xc3\xa9"}));
  w.set("a.ints", GgufValue::i32_array({1, -2, 3}));
  w.set("a.u32", GgufValue::u32(8));  // replaces in place
  std::vector<uint8_t> q(dtype_bytes(DType::Q8_0, 64));
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint8_t(i * 7);
  w.add_tensor("t.q8", DType::Q8_0, {2, 32}, [&](std::vector<uint8_t>& out) { out = q; });
  w.add_tensor("t.f32", DType::F32, {3}, [](std::vector<uint8_t>& out) {
    const float v[3] = {1.0f, -2.0f, 3.5f};
    std::memcpy(out.data(), v, sizeof(v));
  });
  EXPECT_THROW(w.add_tensor("bad", DType::Q4_K, {2, 32}, {}), InvalidArgument);
  w.write(path);
  const auto bytes = read_file(path);
  std::filesystem::remove(path);
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.keys, (std::vector<std::string>{"general.architecture", "a.u32", "a.i32", "a.f32",
                                              "a.bool", "a.strings", "a.ints"}));
  EXPECT_EQ(f.find("a.u32")->uint, 8u);
  EXPECT_EQ(f.find("a.i32")->sint, -7);
  EXPECT_EQ(f.find("a.f32")->real, 0.25);
  EXPECT_EQ(f.find("a.bool")->uint, 1u);
  EXPECT_EQ(f.find("a.strings")->strings, (std::vector<std::string>{"x", "", "\xc3\xa9"}));
  EXPECT_EQ(f.find("a.ints")->sints, (std::vector<int64_t>{1, -2, 3}));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].dims, (std::vector<uint64_t>{32, 2}));
  EXPECT_EQ(f.tensors[1].offset % 32, 0u);
  const auto t = read_gguf_tensors(f, bytes.data(), bytes.size(), nullptr);
  EXPECT_EQ(t[0].dtype(), DType::Q8_0);
  EXPECT_EQ(0, std::memcmp(t[0].data(), q.data(), q.size()));
  EXPECT_EQ(t[1].data_as<float>()[2], 3.5f);
}

TEST(Gguf, Qwen3TensorNamesMapBothWays) {
  const std::pair<const char*, const char*> cases[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output.weight", "lm_head.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.27.attn_output.weight", "model.layers.27.self_attn.o_proj.weight"},
      {"blk.3.attn_k_norm.weight", "model.layers.3.self_attn.k_norm.weight"},
      {"blk.3.attn_norm.weight", "model.layers.3.input_layernorm.weight"},
      {"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
      {"blk.10.ffn_down.weight", "model.layers.10.mlp.down_proj.weight"},
  };
  for (const auto& [g, h] : cases) {
    EXPECT_EQ(qwen3_hf_tensor_name(g), h);
    EXPECT_EQ(qwen3_gguf_tensor_name(h), g);
  }
  for (const char* bad : {"blk.01.attn_q.weight", "blk.3.attn_qkv.weight", "blk..attn_q.weight",
                          "blk.3", "rope_freqs.weight", "blk.12345678.attn_q.weight"})
    EXPECT_EQ(qwen3_hf_tensor_name(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace infera::io
