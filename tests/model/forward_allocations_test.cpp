// A forward pass in steady state allocates nothing (issue 8: "no allocation inside a forward
// pass"): once a decode step or a prefill chunk of a given size has run, running it again must not
// touch the heap on any thread. The test binary replaces malloc and its relatives (glibc allows
// it: "Replacing malloc" in its manual) with counting wrappers around glibc's own allocator, so
// operator new, std::vector, std::function and aligned buffers are all counted, whichever thread
// asks. INFERA_ALLOC_TRACE=1 prints the call stack of every counted allocation (to find one that a
// change brought back). Under a sanitizer, which owns malloc, the test skips. Encoders too: a
// batch of the shape seen before allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_bf16_dot.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "io/gguf_convert.h"
#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "model/encoder.h"
#include "model/model_registry.h"
#include "test_paths.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define INFERA_COUNTS_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define INFERA_COUNTS_ALLOCATIONS 0
#endif
#endif
#ifndef INFERA_COUNTS_ALLOCATIONS
#define INFERA_COUNTS_ALLOCATIONS 1
#endif

#if INFERA_COUNTS_ALLOCATIONS
#include <execinfo.h>
#include <unistd.h>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
std::atomic<bool> g_trace{false};
thread_local bool t_in_trace = false;

void counted() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_trace && !t_in_trace) {
    t_in_trace = true;  // backtrace_symbols_fd writes without allocating
    void* frames[32];
    const int n = backtrace(frames, 32);
    static const char kHeader[] = "--- allocation in a forward pass:\n";
    (void)!write(2, kHeader, sizeof(kHeader) - 1);
    backtrace_symbols_fd(frames, n, 2);
    t_in_trace = false;
  }
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  counted();
  return __libc_malloc(n);
}
void* calloc(size_t count, size_t n) {
  counted();
  return __libc_calloc(count, n);
}
void* realloc(void* p, size_t n) {
  counted();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  counted();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  counted();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  counted();
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}
#endif

namespace infera {
namespace {

// Heap allocations on every thread while fn runs (traced when `trace` and INFERA_ALLOC_TRACE).
template <typename Fn>
int64_t allocations_during(Fn&& fn, bool trace) {
#if INFERA_COUNTS_ALLOCATIONS
  static const bool wanted = std::getenv("INFERA_ALLOC_TRACE") != nullptr;
  g_trace = wanted && trace;
  g_allocations.store(0);
  g_counting.store(true);
  fn();
  g_counting.store(false);
  return g_allocations.load();
#else
  (void)trace;
  fn();
  return 0;
#endif
}

struct Workload {
  std::string name;
  std::filesystem::path model;  // folder or .gguf
  DType kv_dtype = DType::F32;
  MatmulPrecision precision = MatmulPrecision::F32;
};

// One sequence: a prompt in chunks of 24 tokens, then decode steps, all with the logits of the
// last row. The same run goes first through a sequence that is then freed, so that every buffer
// has grown to its size (scratch, thread-local panels, the RoPE table up to the last position, the
// pool's threads), then through a second sequence, counted: a server that has seen these lengths
// before. Only the forward passes are counted, not building their batch descriptions (the
// scheduler's work, outside the model).
struct Counts {
  int64_t prefill = 0, decode = 0;  // the most any one counted forward pass allocated
};

Counts count_forward_allocations(const Workload& w) {
  auto backend = make_cpu_backend(2, PackedAttentionSchedule::Windowed, w.precision);
  auto model = load_causal_lm(w.model, *backend, {});
  const int64_t vocab = model->info().vocab, chunk = 24, chunks = 4, decode_steps = 6;
  const int64_t capacity = chunks * chunk + decode_steps;
  KvCache cache(*backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = (capacity + 15) / 16, .dtype = w.kv_dtype});
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(static_cast<size_t>(capacity));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  std::vector<float> logits(static_cast<size_t>(vocab));

  Counts counts;
  for (const bool counted : {false, true}) {
    const SeqId seq = cache.add_sequence();
    EXPECT_TRUE(cache.reserve(seq, capacity));
    for (int64_t at = 0; at < capacity;) {
      const int64_t n = at < chunks * chunk ? chunk : 1;
      const SeqChunk c{
          seq,
          std::span<const int32_t>(tokens).subspan(static_cast<size_t>(at), static_cast<size_t>(n)),
          OutputRows::Last};
      const BatchDesc batch = build_batch(cache, std::span<const SeqChunk>(&c, 1));
      const int64_t allocations =
          allocations_during([&] { model->forward(batch, cache.pool(), logits); }, counted);
      int64_t& most = n > 1 ? counts.prefill : counts.decode;
      if (counted) most = std::max(most, allocations);
      cache.commit(seq, n);
      at += n;
    }
    cache.free_sequence(seq);
  }
  for (float x : logits) EXPECT_TRUE(std::isfinite(x)) << w.name;
  return counts;
}

// A small Qwen3 (Qwen3-0.6B's vocabulary, which the GGUF tokenizer needs) whose matrices fit the
// CPU's 4-row groups (k a multiple of 256), as a GGUF of `type` in a temporary folder: the
// quantized decode kernels and their activation buffers.
std::filesystem::path quantized_dummy_model(io::GgufFileType type) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("infera-alloc-" + std::to_string(getpid()) + "-" + io::gguf_file_type_name(type));
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir / "config.json");
    config << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
      "vocab_size": 151936, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
      "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  }
  const io::WeightStore weights =
      make_dummy_causal_lm_weights(io::HfConfig::load(dir / "config.json"), 3);
  io::ConvertOptions options;
  options.weights = &weights;
  options.tokenizer_dir = test::shared_dir() / "models" / "qwen3-0.6b";  // its vocab: 151936 rows
  options.threads = 1;
  const auto out = dir / "model.gguf";
  io::convert_qwen3_to_gguf(dir, type, out, options);
  return out;
}

TEST(ForwardAllocations, NoneInSteadyStatePrefillOrDecode) {
  if (!INFERA_COUNTS_ALLOCATIONS) GTEST_SKIP() << "a sanitizer owns malloc in this build";
#if INFERA_COUNTS_ALLOCATIONS
  {  // backtrace() loads libgcc on its first call, which allocates: not inside a count
    void* frame[1];
    (void)backtrace(frame, 1);
  }
#endif
  const auto fixture = test::fixture("qwen3-small-untied");
  std::vector<Workload> workloads = {
      {"fixture, f32 KV", fixture, DType::F32, MatmulPrecision::F32},
      {"fixture, bf16 KV", fixture, DType::BF16, MatmulPrecision::F32},
      {"q4_k_m GGUF (row groups)", quantized_dummy_model(io::GgufFileType::Q4_K_M)},
      {"q8_0 GGUF (row groups)", quantized_dummy_model(io::GgufFileType::Q8_0)},
  };
  if (cpu::has_bf16_dot())
    workloads.push_back({"fixture, bf16 dot products", fixture, DType::F32, MatmulPrecision::BF16});
  for (const Workload& w : workloads) {
    const Counts c = count_forward_allocations(w);
    std::printf("  %-28s allocations in a counted prefill chunk %lld, decode step %lld\n",
                w.name.c_str(), static_cast<long long>(c.prefill),
                static_cast<long long>(c.decode));
    EXPECT_EQ(c.prefill, 0) << w.name << ": a steady-state prefill chunk allocated";
    EXPECT_EQ(c.decode, 0) << w.name << ": a steady-state decode step allocated";
  }
  for (const Workload& w : workloads)
    if (w.model.extension() == ".gguf") std::filesystem::remove_all(w.model.parent_path());
}

// An encoder batch of the same shape as one seen before (the decision runtime's steady state):
// hidden states, and the head the fixture carries, allocate nothing.
TEST(ForwardAllocations, NoneInASteadyStateEncoderBatch) {
  if (!INFERA_COUNTS_ALLOCATIONS) GTEST_SKIP() << "a sanitizer owns malloc in this build";
  for (const char* name : {"modernbert-micro", "modernbert-mlm-micro", "modernbert-cls-micro"}) {
    auto backend = make_cpu_backend(2);
    auto model = load_encoder(test::fixture(name), *backend, {});
    const int64_t vocab = model->info().vocab, hidden_size = model->info().hidden;
    std::mt19937 rng(5);
    // Lengths around the local window (128 on the fixtures) and the attention tiles.
    std::vector<std::vector<int32_t>> sequences;
    for (const int64_t length : {1, 37, 130, 200}) {
      std::vector<int32_t> ids(static_cast<size_t>(length));
      for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
      sequences.push_back(std::move(ids));
    }
    BatchDesc batch = encoder_batch(sequences);
    batch.output_rows = {0, 40, 200};
    std::vector<float> hidden(static_cast<size_t>(batch.num_tokens() * hidden_size));
    std::vector<float> head;
    const EncoderHead kind = model->encoder_info().head;
    if (kind == EncoderHead::MaskedLM) head.resize(batch.output_rows.size() * size_t(vocab));
    if (kind == EncoderHead::Classifier)
      head.resize(sequences.size() * model->encoder_info().labels.size());
    const auto run = [&] {
      model->hidden_states(batch, hidden);
      if (kind == EncoderHead::MaskedLM) model->masked_lm_logits(batch, head);
      if (kind == EncoderHead::Classifier) model->classify(batch, head);
    };
    run();
    const int64_t allocations = allocations_during(run, true);
    std::printf("  %-22s allocations in a counted batch of 4 sequences (368 tokens): %lld\n", name,
                static_cast<long long>(allocations));
    EXPECT_EQ(allocations, 0) << name << ": a steady-state encoder batch allocated";
    for (float x : hidden) ASSERT_TRUE(std::isfinite(x)) << name;
  }
}

}  // namespace
}  // namespace infera
