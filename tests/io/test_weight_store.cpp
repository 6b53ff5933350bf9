// Model folders: the two real Qwen3 fixtures, and sharded folders written by the tests from a
// fixture's tensors (good ones, and indexes that point at the wrong places).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "infera/error.h"
#include "io/weight_store.h"
#include "safetensors_writer.h"
#include "test_paths.h"

namespace infera::io {
namespace {

namespace fs = std::filesystem;
using test::SafetensorsWriter;
using ::testing::HasSubstr;

// The offset in `file` that address `p` maps, read from /proc/self/maps ("start-end perms offset
// dev inode path"); nullopt when no mapping of that file holds it.
std::optional<uint64_t> file_offset_of(const void* p, const fs::path& file) {
  std::ifstream maps("/proc/self/maps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode >> path;
    if (path != file.string()) continue;
    const size_t dash = range.find('-');
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (addr >= start && addr < end) return std::stoull(offset, nullptr, 16) + (addr - start);
  }
  return std::nullopt;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(WeightStoreFixture, Qwen3MicroTied) {
  const auto dir = test::fixture("qwen3-micro");
  ASSERT_TRUE(fs::exists(dir / "model.safetensors")) << dir;  // missing fixture is a failure
  const auto store = WeightStore::open_folder(dir);
  EXPECT_EQ(store.size(), 24u);  // embed + 2 layers x 11 + final norm; no lm_head (tied)
  EXPECT_FALSE(store.contains("lm_head.weight"));
  const Tensor& embed = store.require("model.embed_tokens.weight", {151936, 32});
  EXPECT_EQ(embed.dtype(), DType::BF16);
  EXPECT_EQ(embed.device(), Device::CPU);
  EXPECT_EQ(store.require("model.layers.1.self_attn.q_proj.weight", {64, 32}).dtype(), DType::BF16);
  EXPECT_EQ(store.require("model.layers.0.self_attn.k_norm.weight", {16}).dtype(), DType::BF16);
  EXPECT_EQ(store.require("model.norm.weight", {32}).dtype(), DType::BF16);
  EXPECT_EQ(store.total_bytes(), 9773504u);  // the file's whole data region
  // Zero-copy: the embedding lies in a mapping of the file itself (as the kernel lists it in
  // /proc/self/maps), at the byte offset the header gives it, not in a copy.
  const auto file = fs::canonical(dir / "model.safetensors");
  const auto bytes = test::read_bytes(file);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[static_cast<size_t>(i)];
  const auto header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_len));
  const uint64_t want_offset =
      8 + header_len + header.at("model.embed_tokens.weight").at("data_offsets")[0].get<uint64_t>();
  const auto where = file_offset_of(embed.data(), file);
  ASSERT_TRUE(where.has_value()) << "the embedding is not inside a mapping of " << file;
  EXPECT_EQ(*where, want_offset);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(embed.data()) % 2, 0u);
}

TEST(WeightStoreFixture, Qwen3SmallUntied) {
  const auto dir = test::fixture("qwen3-small-untied");
  ASSERT_TRUE(fs::exists(dir / "model.safetensors")) << dir;
  const auto store = WeightStore::open_folder(dir);
  EXPECT_EQ(store.size(), 47u);  // embed + lm_head + 4 layers x 11 + final norm
  EXPECT_EQ(store.require("lm_head.weight", {4096, 128}).dtype(), DType::BF16);
  EXPECT_EQ(store.require("model.embed_tokens.weight", {4096, 128}).dtype(), DType::BF16);
  EXPECT_EQ(store.require("model.layers.3.mlp.down_proj.weight", {128, 384}).dtype(), DType::BF16);
  EXPECT_EQ(store.require("model.layers.2.self_attn.k_proj.weight", {64, 128}).dtype(),
            DType::BF16);
  const auto names = store.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "lm_head.weight");
}

TEST(WeightStoreFolder, MissingBothFilesNamesTheFolder) {
  test::TempDir dir;
  try {
    WeightStore::open_folder(dir.path());
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no model.safetensors or model.safetensors.index.json in " +
                                    dir.path().string()));
  }
}

// Splits a real fixture into two shards (alternate tensors) plus an index, in a temp folder.
class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = test::fixture("qwen3-small-untied");
    ASSERT_TRUE(fs::exists(dir / "model.safetensors")) << dir;
    original_ = std::make_unique<WeightStore>(WeightStore::open_folder(dir));
    SafetensorsWriter shards[2];
    size_t i = 0;
    for (const auto& name : original_->names()) {
      const int s = static_cast<int>(i++ % 2);
      shards[s].add(original_->get(name));
      index_["weight_map"][name] = shard_name(s);
    }
    index_["metadata"] = {{"total_size", original_->total_bytes()}};
    shards[0].write(dir_ / shard_name(0));
    shards[1].write(dir_ / shard_name(1));
    write_index();
  }

  static std::string shard_name(int s) {
    return "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  void write_index() { test::write_text(dir_ / "model.safetensors.index.json", index_.dump(2)); }

  std::string format_error() {
    try {
      WeightStore::open_folder(dir_.path());
    } catch (const FormatError& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected FormatError, got: " << e.what();
      return {};
    }
    ADD_FAILURE() << "expected FormatError, but the folder loaded";
    return {};
  }

  test::TempDir dir_;
  nlohmann::json index_;
  std::unique_ptr<WeightStore> original_;
};

TEST_F(ShardedTest, LoadsWithIdenticalBytes) {
  const auto store = WeightStore::open_folder(dir_.path());
  ASSERT_EQ(store.names(), original_->names());
  for (const auto& name : original_->names())
    EXPECT_TRUE(same_bytes(store.get(name), original_->get(name))) << name;
  EXPECT_EQ(store.total_bytes(), original_->total_bytes());
  EXPECT_THAT([&] { store.get("nope"); }, ::testing::ThrowsMessage<FormatError>(HasSubstr(
                                              "missing tensor nope in " + dir_.path().string())));
}

TEST_F(ShardedTest, SingleFileWinsOverIndex) {
  // Documented preference: model.safetensors, when present, is used and the index is ignored.
  SafetensorsWriter single;
  single.add_f32("only", {1}, {1.0f});
  single.write(dir_ / "model.safetensors");
  const auto store = WeightStore::open_folder(dir_.path());
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.contains("only"));
}

TEST_F(ShardedTest, MissingShard) {
  index_["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
  write_index();
  const std::string msg = format_error();
  EXPECT_THAT(msg, HasSubstr("shard 'model-00003-of-00002.safetensors'"));
  EXPECT_THAT(msg, HasSubstr("model.norm.weight"));
  EXPECT_THAT(msg, HasSubstr("not found"));
}

TEST_F(ShardedTest, TensorNotInItsShard) {
  const std::string name = "model.norm.weight";
  const int actual = index_["weight_map"][name] == shard_name(0) ? 0 : 1;
  index_["weight_map"][name] = shard_name(1 - actual);
  write_index();
  const std::string msg = format_error();
  EXPECT_THAT(msg, HasSubstr("tensor " + name + " is listed in shard '" + shard_name(1 - actual) +
                             "' but that shard does not contain it"));
}

TEST_F(ShardedTest, TensorListedButAbsentEverywhere) {
  index_["weight_map"]["model.layers.9.mlp.up_proj.weight"] = shard_name(0);
  write_index();
  EXPECT_THAT(format_error(),
              HasSubstr("tensor model.layers.9.mlp.up_proj.weight is listed in shard"));
}

TEST_F(ShardedTest, PathTraversalRejected) {
  for (const std::string bad : {"../model-00001-of-00002.safetensors", "/etc/passwd", "..",
                                "sub/model.safetensors", "", "a\\b"}) {
    index_["weight_map"]["model.norm.weight"] = bad;
    write_index();
    const std::string msg = format_error();
    EXPECT_THAT(msg,
                HasSubstr("tensor model.norm.weight: shard '" + bad + "' is not a plain file name"))
        << bad;
  }
}

TEST_F(ShardedTest, DuplicateTensorAcrossShards) {
  SafetensorsWriter extra;
  extra.add(original_->get("model.norm.weight"));
  index_["weight_map"]["extra.only"] = "extra.safetensors";  // makes the loader open it
  extra.add_f32("extra.only", {1}, {0.0f});
  extra.write(dir_ / "extra.safetensors");
  write_index();
  const std::string msg = format_error();
  EXPECT_THAT(msg, HasSubstr("tensor model.norm.weight appears in both shard"));
}

TEST_F(ShardedTest, MalformedIndex) {
  test::write_text(dir_ / "model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_THAT(format_error(), HasSubstr("model.safetensors.index.json: not valid JSON"));
  test::write_text(dir_ / "model.safetensors.index.json", "{\"metadata\": {}}");
  EXPECT_THAT(format_error(), HasSubstr("missing 'weight_map'"));
  test::write_text(dir_ / "model.safetensors.index.json", "{\"weight_map\": {}}");
  EXPECT_THAT(format_error(), HasSubstr("'weight_map' is empty"));
  test::write_text(dir_ / "model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
  EXPECT_THAT(format_error(), HasSubstr("tensor a: shard name is not a string"));
  // Nesting is capped while parsing (a value this deep used to be parsed whole).
  test::write_text(dir_ / "model.safetensors.index.json",
                   "{\"metadata\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_THAT(format_error(),
              HasSubstr("model.safetensors.index.json: JSON nests deeper than 128 levels"));
}

// Tensors added in memory have no file to bound them; the sum is checked rather than wrapped.
TEST(WeightStoreInMemory, TotalBytesOverflowIsAnError) {
  WeightStore store;
  const int64_t n = int64_t{1} << 61;  // 2^62 bytes of BF16 each, never touched
  for (int i = 0; i < 4; ++i)
    store.add(Tensor("t" + std::to_string(i), DType::BF16, Shape{n}, Device::CPU, nullptr, {}));
  EXPECT_THROW(store.total_bytes(), InvalidArgument);
  WeightStore three;
  for (int i = 0; i < 3; ++i)
    three.add(Tensor("t" + std::to_string(i), DType::BF16, Shape{n}, Device::CPU, nullptr, {}));
  EXPECT_EQ(three.total_bytes(), size_t{3} << 62);
}

TEST_F(ShardedTest, CorruptShardNamesTheShardFile) {
  auto bytes = test::read_bytes(dir_ / shard_name(1));
  bytes.resize(bytes.size() - 1);
  test::write_bytes(dir_ / shard_name(1), bytes);
  const std::string msg = format_error();
  EXPECT_THAT(msg, HasSubstr(shard_name(1)));
  EXPECT_THAT(msg, HasSubstr("file truncated?"));
}

}  // namespace
}  // namespace infera::io
