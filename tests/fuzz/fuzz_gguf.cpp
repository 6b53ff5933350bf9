// GGUF from memory: header, metadata of every type, tensor infos, data. A parsed file must hand out
// tensors inside the buffer (or an aligned copy), of the byte size their type and shape give, not
// overlapping, every byte readable (ASan watches the exact-size copy); the tokenizer metadata, when
// it converts, must give valid JSON text; nothing may escape but infera::Error.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "infera/error.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"

using namespace infera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> buf(data, data + size);  // exact size: one byte past it is caught
  try {
    const io::GgufFile file = io::parse_gguf(buf.data(), buf.size(), "fuzz.gguf");
    const auto tensors = io::read_gguf_tensors(file, buf.data(), buf.size(), nullptr);
    std::vector<std::pair<size_t, size_t>> ranges;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      const size_t bytes = t.nbytes();
      fuzz::check(bytes == file.tensors[i].nbytes, "tensor " + t.name() + ": byte size differs");
      fuzz::check(t.dim(t.rank() - 1) % dtype_block_size(t.dtype()) == 0,
                  "tensor " + t.name() + ": rows are not whole blocks");
      const auto* p = static_cast<const uint8_t*>(t.data());
      const bool inside = p >= buf.data() && p <= buf.data() + buf.size() &&
                          bytes <= static_cast<size_t>(buf.data() + buf.size() - p);
      if (inside) ranges.emplace_back(p - buf.data(), p - buf.data() + bytes);
      unsigned sum = 0;
      for (size_t k = 0; k < bytes; ++k) sum += p[k];
      volatile unsigned sink = sum;
      (void)sink;
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      fuzz::check(ranges[i].first >= ranges[i - 1].second || ranges[i].first == ranges[i].second ||
                      ranges[i - 1].first == ranges[i - 1].second,
                  "two tensors overlap");
    try {
      const std::string json = io::tokenizer_json_from_gguf(file, "fuzz.gguf");
      fuzz::check(nlohmann::json::accept(json), "tokenizer JSON does not parse");
    } catch (const Error&) {
    }
    try {
      io::gguf_stop_token_ids(file, "fuzz.gguf");
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
