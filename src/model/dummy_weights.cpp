#include "model/dummy_weights.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/dtype_convert.h"
#include "infera/error.h"

namespace infera {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills [begin, end) of a tensor; each 64Ki-element block has its own stream so the values do
// not depend on how many threads filled them.
void fill_range(void* data, DType dtype, int64_t begin, int64_t end, float center, float half_width,
                uint64_t tensor_seed) {
  constexpr int64_t kBlock = 1 << 16;
  for (int64_t block = begin / kBlock; block * kBlock < end; ++block) {
    uint64_t state = tensor_seed ^ (static_cast<uint64_t>(block) * 0xd1b54a32d192ed03ull);
    const int64_t lo = std::max(begin, block * kBlock), hi = std::min(end, (block + 1) * kBlock);
    for (int64_t i = block * kBlock; i < hi; ++i) {
      const uint64_t r = splitmix64(state);
      if (i < lo) continue;
      const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      const float value = center + (2.0f * u - 1.0f) * half_width;
      if (dtype == DType::F32) {
        static_cast<float*>(data)[i] = value;
      } else {  // BF16 (F16 dummy weights are made as BF16 bit patterns of the same value range)
        static_cast<uint16_t*>(data)[i] = f32_to_bf16(value);
      }
    }
  }
}

}  // namespace

io::WeightStore make_dummy_weights(const std::vector<WeightSpec>& specs, DType dtype,
                                   uint64_t seed) {
  if (dtype != DType::F32 && dtype != DType::BF16) dtype = DType::BF16;
  io::WeightStore store;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  uint64_t tensor_index = 0;
  for (const WeightSpec& spec : specs) {
    const int64_t count = spec.shape.numel();
    const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(count));
    void* data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data) throw Error("out of memory making dummy weight " + spec.name);
    std::shared_ptr<void> owner(data, [](void* p) { std::free(p); });
    // Uniform(-a, a) has standard deviation a / sqrt(3).
    const bool norm = spec.init_std < 0;
    const float center = norm ? 1.0f : 0.0f;
    const float half_width = norm ? 0.1f : spec.init_std * std::sqrt(3.0f);
    uint64_t s = seed ^ (++tensor_index * 0x9e3779b97f4a7c15ull);
    const uint64_t tensor_seed = splitmix64(s);
    std::vector<std::thread> workers;
    const int64_t per = (count + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      const int64_t b = per * t, e = std::min(count, b + per);
      if (b < e)
        workers.emplace_back(fill_range, data, dtype, b, e, center, half_width, tensor_seed);
    }
    for (auto& w : workers) w.join();
    store.add(Tensor(spec.name, dtype, spec.shape, Device::CPU, data, std::move(owner)));
  }
  return store;
}

}  // namespace infera
