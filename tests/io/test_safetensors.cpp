// One safetensors file: every malformed header the loader must reject with a FormatError that
// names the file and the tensor, and the well-formed dtypes and layouts it must accept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "infera/error.h"
#include "io/mapped_file.h"
#include "io/weight_store.h"
#include "safetensors_writer.h"

namespace infera::io {
namespace {

using test::Bytes;
using test::raw_safetensors;
using test::SafetensorsWriter;
using ::testing::HasSubstr;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::filesystem::path write(const Bytes& bytes, const std::string& name = "bad.safetensors") {
    const auto path = dir_ / name;
    test::write_bytes(path, bytes);
    return path;
  }

  // Opens the bytes as a file and returns the FormatError message (failing the test when the
  // file loads, or fails some other way). Every message must name the file.
  std::string format_error(const Bytes& bytes) {
    const auto path = write(bytes);
    try {
      WeightStore::open_file(path);
    } catch (const FormatError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path.string()));
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected FormatError, got: " << e.what();
      return {};
    }
    ADD_FAILURE() << "expected FormatError, but the file loaded";
    return {};
  }

  // A header with one entry `w` (whose fields the test overrides) over `data_bytes` of zeros.
  std::string entry_error(const nlohmann::json& entry, size_t data_bytes = 24) {
    nlohmann::json header = {{"w", entry}};
    return format_error(raw_safetensors(header.dump(), Bytes(data_bytes, 0)));
  }

  test::TempDir dir_;
};

nlohmann::json good_entry() {
  return {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}};
}

TEST_F(SafetensorsTest, WellFormedEntryLoads) {
  // Guards the helpers below: the un-mutated entry must load, so each failure is the mutation's.
  const auto path =
      write(raw_safetensors(nlohmann::json{{"w", good_entry()}}.dump(), Bytes(24, 0)));
  EXPECT_EQ(WeightStore::open_file(path).get("w").shape(), (Shape{2, 3}));
}

TEST_F(SafetensorsTest, FileShorterThanLengthPrefix) {
  EXPECT_THAT(format_error(Bytes{1, 2, 3}), HasSubstr("shorter than the 8-byte"));
  EXPECT_THAT(format_error(Bytes{}), HasSubstr("0 bytes"));
}

TEST_F(SafetensorsTest, HeaderLengthBeyondFile) {
  EXPECT_THAT(format_error(raw_safetensors("{}", {}, 1000)),
              HasSubstr("header length 1000 runs past the end of the file"));
}

TEST_F(SafetensorsTest, HeaderLengthAbsurd) {
  EXPECT_THAT(format_error(raw_safetensors("{}", {}, uint64_t{1} << 62)), HasSubstr("exceeds"));
  EXPECT_THAT(format_error(raw_safetensors("{}", {}, ~uint64_t{0})), HasSubstr("exceeds"));
}

TEST_F(SafetensorsTest, BadJsonHeader) {
  EXPECT_THAT(format_error(raw_safetensors("{\"w\": {\"dtype\": ", {})),
              HasSubstr("not valid JSON"));
  EXPECT_THAT(format_error(raw_safetensors("{} trailing", {})), HasSubstr("not valid JSON"));
  EXPECT_THAT(format_error(raw_safetensors("[1, 2]", {})), HasSubstr("not a JSON object"));
  EXPECT_THAT(format_error(raw_safetensors(std::string(10000, '['), {})),
              HasSubstr("nests deeper"));
  EXPECT_THAT(format_error(raw_safetensors("{\"__metadata__\": 3}", {})),
              HasSubstr("__metadata__"));
}

TEST_F(SafetensorsTest, EntryMissingFields) {
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    auto e = good_entry();
    e.erase(field);
    const std::string msg = entry_error(e);
    EXPECT_THAT(msg, HasSubstr("tensor w: missing '" + std::string(field) + "'"));
  }
  EXPECT_THAT(entry_error(nlohmann::json::array()), HasSubstr("tensor w: header entry is not"));
}

TEST_F(SafetensorsTest, EntryWrongJsonTypes) {
  auto e = good_entry();
  e["dtype"] = 5;
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: 'dtype' is not a string"));
  e = good_entry();
  e["shape"] = "2x3";
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: 'shape' is not an array"));
  e = good_entry();
  e["data_offsets"] = {0, 12, 24};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: 'data_offsets' is not an array of two"));
  e = good_entry();
  e["data_offsets"] = {"0", 24};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: data_offsets"));
}

TEST_F(SafetensorsTest, NegativeOrNonIntegerDims) {
  auto e = good_entry();
  e["shape"] = {-2, -3};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: shape [-2,-3] has a negative"));
  e["shape"] = {2.0, 3};
  EXPECT_THAT(entry_error(e), HasSubstr("non-integer or too large dimension"));
  e["shape"] = {true, 3};
  EXPECT_THAT(entry_error(e), HasSubstr("non-integer or too large dimension"));
  e["shape"] = {1, 1, 1, 2, 3};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: rank 5 exceeds"));
}

TEST_F(SafetensorsTest, UnsupportedDtypeIsNamed) {
  auto e = good_entry();
  e["dtype"] = "I4";
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: unsupported dtype 'I4'"));
  e["dtype"] = "F64";
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: unsupported dtype 'F64'"));
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  auto e = good_entry();
  e["data_offsets"] = {24, 0};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: data_offsets [24, 0] begin after end"));
  e["data_offsets"] = {0, 48};
  EXPECT_THAT(entry_error(e),
              HasSubstr("tensor w: data_offsets [0, 48] run past the data region of 24"));
  e["data_offsets"] = {-8, 16};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: data_offsets"));
  e["data_offsets"] = {0, 18446744073709551615ull};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: data_offsets"));
}

TEST_F(SafetensorsTest, ByteSizeMismatch) {
  auto e = good_entry();
  e["shape"] = {2, 2};
  EXPECT_THAT(entry_error(e),
              HasSubstr("tensor w: data_offsets [0, 24] span 24 bytes, but F32 [2, 2] needs 16"));
}

TEST_F(SafetensorsTest, NumelOverflowDoesNotWrap) {
  // 2^32 * 2^32 wraps to 0 in 64 bits: must not then "match" an empty byte range.
  auto e = good_entry();
  e["shape"] = {uint64_t{1} << 32, uint64_t{1} << 32};
  e["data_offsets"] = {0, 0};
  EXPECT_THAT(entry_error(e), HasSubstr("tensor w: shape [4294967296,4294967296] is too large"));
  // 2^62 elements of 4 bytes overflows only in the byte count.
  e["shape"] = {uint64_t{1} << 62};
  EXPECT_THAT(entry_error(e), HasSubstr("is too large"));
}

// A zero dimension makes the product 0 at every step of a left-to-right multiply, so the old check
// passed [0, 2^40, 2^40] with an empty byte range; numel() of [2^40, 2^40, 0] and any row width
// or stride then overflowed int64 (undefined behaviour, reported by UBSan while fuzzing).
TEST_F(SafetensorsTest, ZeroDimensionDoesNotHideHugeOthers) {
  auto e = good_entry();
  e["data_offsets"] = {0, 0};
  for (const auto& shape : {nlohmann::json{0, uint64_t{1} << 40, uint64_t{1} << 40},
                            nlohmann::json{uint64_t{1} << 40, uint64_t{1} << 40, 0},
                            nlohmann::json{0, uint64_t{1} << 62}}) {
    e["shape"] = shape;
    EXPECT_THAT(entry_error(e), HasSubstr("tensor w: shape " + shape.dump() + " is too large"));
  }
  // A zero dimension with others whose product fits is an ordinary empty tensor.
  e["shape"] = {0, uint64_t{1} << 40};
  const auto path = write(raw_safetensors(nlohmann::json{{"w", e}}.dump(), Bytes(24, 0)));
  const auto store = WeightStore::open_file(path);
  EXPECT_EQ(store.get("w").numel(), 0);
  EXPECT_EQ(store.get("w").nbytes(), 0u);
  EXPECT_EQ(store.total_bytes(), 0u);
}

TEST_F(SafetensorsTest, TruncatedFileNamesLastTensor) {
  SafetensorsWriter w;
  w.add_f32("a", {4}, {1, 2, 3, 4}).add_f32("b", {4}, {5, 6, 7, 8});
  Bytes bytes = w.build();
  bytes.resize(bytes.size() - 3);
  EXPECT_THAT(format_error(bytes), HasSubstr("tensor b: data_offsets [16, 32] run past the data "
                                             "region of 29 bytes (file truncated?)"));
}

TEST_F(SafetensorsTest, OverlappingTensorsNamed) {
  nlohmann::json header = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                           {"b", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}}};
  const std::string msg = format_error(raw_safetensors(header.dump(), Bytes(24, 0)));
  EXPECT_THAT(msg, HasSubstr("tensor b: data_offsets [8, 24] overlap tensor a [0, 16]"));
  // A tensor nested entirely inside an earlier, longer one.
  header = {{"big", {{"dtype", "F32"}, {"shape", {8}}, {"data_offsets", {0, 32}}}},
            {"c", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {16, 20}}}},
            {"d", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {20, 24}}}}};
  EXPECT_THAT(format_error(raw_safetensors(header.dump(), Bytes(32, 0))),
              HasSubstr("overlap tensor big"));
}

TEST_F(SafetensorsTest, MissingFileIsIoError) {
  EXPECT_THROW(WeightStore::open_file(dir_ / "nope.safetensors"), IoError);
  try {
    MappedFile::open(dir_ / "nope.safetensors");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nope.safetensors"));
  }
  EXPECT_THROW(MappedFile::open(dir_.path()), IoError);  // a folder is not a file
}

TEST_F(SafetensorsTest, EmptyFileMapsAsZeroBytes) {
  const auto path = write({}, "empty");
  const auto m = MappedFile::open(path);
  EXPECT_EQ(m->size(), 0u);
  EXPECT_EQ(m->path(), path);
}

TEST_F(SafetensorsTest, F32AndF16AndI32Load) {
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  const Bytes f16 = {0x00, 0x3c, 0x00, 0xc0};  // 1.0, -2.0 in IEEE half
  const std::vector<int32_t> i32 = {7, -9};
  Bytes i32_bytes(8);
  std::memcpy(i32_bytes.data(), i32.data(), 8);
  SafetensorsWriter w;
  w.add_f32("f32", {2, 3}, f32).add("f16", "F16", {2}, f16).add("ids", "I32", {2}, i32_bytes);
  w.add("empty", "BF16", {0, 4}, {}).add("scalar", "F32", {}, Bytes(4, 0));
  w.metadata({{"format", "pt"}});
  const auto path = write(w.build(), "ok.safetensors");
  const auto store = WeightStore::open_file(path);
  EXPECT_EQ(store.size(), 5u);

  const Tensor& a = store.require("f32", {2, 3});
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_EQ(a.device(), Device::CPU);
  EXPECT_EQ(std::vector<float>(a.data_as<float>(), a.data_as<float>() + 6), f32);
  const Tensor& h = store.require("f16", {2});
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(std::memcmp(h.data(), f16.data(), 4), 0);
  EXPECT_EQ(store.get("ids").data_as<int32_t>()[1], -9);
  EXPECT_EQ(store.get("empty").numel(), 0);
  EXPECT_EQ(store.get("scalar").rank(), 0);
  EXPECT_EQ(store.total_bytes(), 24u + 4u + 8u + 0u + 4u);
}

TEST_F(SafetensorsTest, MisalignedDataIsCopiedAligned) {
  const std::vector<float> values = {1, 2, 3, 4, 5};
  SafetensorsWriter w;
  w.add("pad", "BF16", {1}, Bytes(2, 0x3f)).add_f32("x", {5}, values);
  // Pad the header so the data region starts at an odd file offset: both tensors are then
  // misaligned for their element size inside the (page-aligned) mapping.
  std::string header = w.header().dump();
  while ((8 + header.size()) % 4 != 1) header.push_back(' ');
  const auto store =
      WeightStore::open_file(write(raw_safetensors(header, w.data()), "odd.safetensors"));
  const Tensor& x = store.get("x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data()) % alignof(float), 0u);
  EXPECT_EQ(std::vector<float>(x.data_as<float>(), x.data_as<float>() + 5), values);
  const Tensor& pad = store.get("pad");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pad.data()) % 2, 0u);
  EXPECT_EQ(pad.data_as<uint8_t>()[1], 0x3f);
}

TEST_F(SafetensorsTest, GetAndRequireErrorsNameTheTensor) {
  SafetensorsWriter w;
  w.add_f32("w", {2, 3}, {1, 2, 3, 4, 5, 6}).add("ids", "I32", {1}, Bytes(4, 0));
  const auto path = write(w.build(), "w.safetensors");
  const auto store = WeightStore::open_file(path);
  try {
    store.get("model.norm.weight");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing tensor model.norm.weight in " + path.string()));
  }
  try {
    store.require("w", {3, 2});
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor w: shape [2, 3], expected [3, 2]"));
  }
  try {
    store.require("ids", {1});
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor ids"));
    EXPECT_THAT(e.what(), HasSubstr("dtype I32"));
  }
}

TEST_F(SafetensorsTest, TensorsOutliveTheStore) {
  SafetensorsWriter w;
  w.add_f32("w", {2}, {4.0f, 5.0f});
  Tensor t;
  {
    const auto store = WeightStore::open_file(write(w.build(), "w.safetensors"));
    t = store.get("w");
  }
  std::filesystem::remove(dir_ / "w.safetensors");  // the mapping, not the path, keeps data alive
  EXPECT_EQ(t.data_as<float>()[1], 5.0f);
}

TEST_F(SafetensorsTest, AddReplacesInMemoryTensor) {
  WeightStore store;
  static float a[2] = {1, 2};
  static float b[3] = {3, 4, 5};
  store.add(Tensor("x", DType::F32, {2}, Device::CPU, a, nullptr));
  store.add(Tensor("x", DType::F32, {3}, Device::CPU, b, nullptr));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.require("x", {3}).data_as<float>()[2], 5.0f);
  EXPECT_EQ(store.names(), std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace infera::io
