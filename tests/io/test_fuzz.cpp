// Randomized robustness: thousands of seeded mutations of a valid safetensors file must each either
// load or throw infera::Error — never crash, hang, or read outside the buffer. The in-memory runs
// parse from an exact-size heap buffer so that AddressSanitizer (INFERA_ASAN=ON) flags any byte
// read past the end; a smaller batch goes through open_file and the mmap path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

#include "infera/error.h"
#include "io/safetensors.h"
#include "io/weight_store.h"
#include "safetensors_writer.h"

namespace infera::io {
namespace {

using test::Bytes;

Bytes seed_file() {
  test::SafetensorsWriter w;
  w.add_f32("model.norm.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.add("model.embed.weight", "BF16", {4, 2}, Bytes(16, 0x40));
  w.add("h", "F16", {3}, Bytes(6, 0x3c));
  w.metadata({{"format", "pt"}});
  return w.build();
}

// Characters that steer mutations toward structurally interesting JSON (new numbers, brackets,
// signs, exponents) rather than only invalid UTF-8.
// Kept small enough for ~1 s under ASan; INFERA_FUZZ_ITERATIONS runs a longer campaign by hand.
int iterations() {
  const char* env = std::getenv("INFERA_FUZZ_ITERATIONS");
  return env && *env ? std::atoi(env) : 4000;
}

constexpr char kTokens[] = "{}[]\",:-+.0123456789eE FBI";

Bytes mutate(const Bytes& in, std::mt19937_64& rng) {
  Bytes b = in;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    switch (rng() % 7) {
      case 0:
        b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        b[pick(b.size())] = static_cast<uint8_t>(kTokens[pick(sizeof(kTokens) - 1)]);
        break;
      case 2:
        if (b.size() > 8) b[8 + pick(b.size() - 8)] = static_cast<uint8_t>('0' + rng() % 10);
        break;
      case 3:
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size())));
        break;
      case 4:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size())),
                 static_cast<uint8_t>(kTokens[pick(sizeof(kTokens) - 1)]));
        break;
      case 5:
        b.resize(pick(b.size() + 1));
        break;
      case 6:
        b[pick(std::min<size_t>(8, b.size()))] = static_cast<uint8_t>(rng());
        break;  // length
    }
  }
  return b;
}

// Loaded tensors must lie inside the buffer (or in an owned aligned copy of the right size).
void check_tensors(const std::vector<Tensor>& tensors, const Bytes& buf) {
  for (const auto& t : tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data());
    const bool inside = p >= buf.data() && p + t.nbytes() <= buf.data() + buf.size();
    const bool aligned = reinterpret_cast<uintptr_t>(p) % dtype_bytes(t.dtype(), 1) == 0;
    EXPECT_TRUE(inside || (t.nbytes() > 0 && aligned)) << t.name();
    EXPECT_TRUE(aligned || t.nbytes() == 0) << t.name();
  }
}

TEST(SafetensorsFuzz, MutatedBuffersLoadOrThrow) {
  const Bytes seed = seed_file();
  std::mt19937_64 rng(20240601);
  int loaded = 0, rejected = 0;
  const int n = iterations();
  for (int i = 0; i < n; ++i) {
    const Bytes input = mutate(seed, rng);
    // Exact-size heap copy: ASan catches any read past input.size().
    Bytes buf(input);
    buf.shrink_to_fit();
    try {
      check_tensors(read_safetensors(buf.data(), buf.size(), "fuzz", nullptr), buf);
      ++loaded;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": non-infera exception: " << e.what();
    }
  }
  // Both outcomes must occur, or the mutations are not exercising the validator.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(rejected, 0);
  RecordProperty("loaded", loaded);
  RecordProperty("rejected", rejected);
}

TEST(SafetensorsFuzz, MutatedFilesOpenOrThrow) {
  const Bytes seed = seed_file();
  std::mt19937_64 rng(7);
  test::TempDir dir;
  const auto path = dir / "fuzz.safetensors";
  for (int i = 0; i < 200; ++i) {
    test::write_bytes(path, mutate(seed, rng));
    try {
      const auto store = WeightStore::open_file(path);
      // Touch every byte handed out: a bad pointer faults here rather than in a later test.
      unsigned sum = 0;
      for (const auto& name : store.names()) {
        const Tensor& t = store.get(name);
        for (size_t k = 0; k < t.nbytes(); ++k) sum += static_cast<const uint8_t*>(t.data())[k];
      }
      (void)sum;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": non-infera exception: " << e.what();
    }
  }
}

}  // namespace
}  // namespace infera::io
