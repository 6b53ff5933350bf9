// One CUDA device as the backend drives it: its stream and cuBLAS handle, device memory with clear
// out-of-memory errors, and the op recorder that turns a step's launches into a CUDA graph.
//
// Recording: ops do not launch at once. Each appends a launch record (function + argument bytes,
// see kernels.h) to the pending step; flush() (called by to_host, upload_batch, synchronize,
// prepare_weight) launches them. The pending bytes identify the step exactly: every pointer, shape
// and scalar of every launch. When the same bytes were flushed before, the step is captured once
// into a CUDA graph and every later occurrence replays it with one cudaGraphLaunch, so a decode
// step of a fixed batch size (whose indices live in device buffers at fixed addresses, rewritten
// by upload_batch) costs one launch instead of hundreds. A step seen for the first time runs
// eagerly, which also keeps lazy initialisation (cuBLAS, kernel attributes) out of captures.
// A replayed step is issued in chunks while it is recorded (ContextOptions::replay_chunks): the
// host's pass over the step's ops (~0.2 us a launch record) would otherwise leave the GPU idle
// for its whole length (~50 us of a ~1 ms ModernBERT 1x93 forward).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cuda/gemm_plans.h"
#include "backend/cuda/kernels.h"
#include "infera/tensor.h"

namespace infera::cuda {

struct ContextOptions {
  bool graphs = true;         // replay repeated steps as CUDA graphs
  bool sync_each_op = false;  // synchronize after every launch (locates asynchronous faults)
  bool profile = false;       // time every launch with events (implies eager launches)
  // Issue a never-seen step's launches as they are recorded (see DeviceContext::append).
  bool stream_new_steps = true;
  // Issue a step that does not stream in chunks as it is recorded (see DeviceContext::append):
  // each chunk is replayed, captured or run eagerly as a step of its own, so that the GPU runs
  // the step's first launches while the host still records the rest.
  bool replay_chunks = true;
};

struct ContextStats {
  int64_t ops = 0;             // launch records flushed
  int64_t eager_steps = 0;     // flushes run launch by launch
  int64_t graph_captures = 0;  // graphs captured and instantiated
  int64_t graph_launches = 0;  // flushes replayed from a graph (captures included)
  int64_t streamed_steps = 0;  // eager steps launched while recorded (of eager_steps)
  // Chunks of steps issued before their step's flush (ContextOptions::replay_chunks); each is
  // also counted in eager_steps or graph_launches, as a whole step is.
  int64_t early_chunks = 0;
  // Host time from a step's first launch record to its flush (the forward pass's host work:
  // op checks and records), summed over `recorded_steps`: the part of a step the GPU waits for
  // when the step is replayed from a graph.
  double host_record_seconds = 0;
  int64_t recorded_steps = 0;
  // Host time inside flush() for those steps: the step key's hash and compare, then the graph
  // launch (or the eager launches of a step not replayed).
  double host_flush_seconds = 0;
};

// What an op's launch error message names: the op and up to three operand shapes.
struct OpNote {
  const char* op = "";
  const char* kernel = "";
  Shape shapes[3];
  int count = 0;
};

class DeviceContext {
 public:
  DeviceContext(int device, const ContextOptions& options);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  const cudaDeviceProp& properties() const { return props_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  GemmPlans& gemm_plans() { return *gemm_plans_; }
  const ContextStats& stats() const { return stats_; }

  // Device memory; an allocation the GPU cannot satisfy throws Error naming `what`, the bytes
  // asked for and the bytes free. Released memory waits until pending launches have been issued.
  void* allocate(size_t bytes, const std::string& what);
  void release(void* p);
  // Owners of the scratch slots: one slot per use, so that no op's buffer is another's (a slot
  // grown by one user would move under the other, and a shared one would need both to agree on
  // when its contents are dead).
  enum Slot : int {
    kGemmInputBf16 = 0,      // matmul's converted activations
    kAttentionPartials = 1,  // split-key attention: partial outputs
    kAttentionMaxSum = 2,    //   and their running max / sum
    kAttentionSplitCounters = 3,
    kArgmaxKeys = 4,
    kBf16Shadow = 5,       // bf16 copy of the next GEMM's input, written by its producer
    kEncoderKeysBf16 = 7,  // packed encoder attention's bf16 k and v
    kEncoderValuesBf16 = 8,
    kSampleParams = 9,  // sample_rows
    kSampleOut = 10,
    kSkinnyGluBf16 = 11,    // matmul_swiglu's result as bf16 (the down projection's input)
    kResidualMlpSync = 12,  // residual_mlp's grid barrier and done counters (left zero)
    kDecodeStackScratch = 13,  // decoder_stack's q/k/v, attention, h and split partials
    kDecodeStackSync = 14,     // decoder_stack's grid barrier, exit and split counters (left zero)
    kGemmStackQkv16 = 15,      // the GEMM decoder stack's bf16 q, k and v
    kEncoderStackQkv16 = 16,   // the encoder stack's bf16 q, k and v
  };
  // A device buffer of at least `bytes` kept by the context under `slot` (GEMM activations,
  // attention partials); growing it moves it, which only changes later launches' keys.
  void* scratch(int slot, size_t bytes);
  // scratch() whose memory is zero when (re)allocated; kernels that use it must leave it zero
  // (the attention's split counters).
  void* zeroed_scratch(int slot, size_t bytes);
  // Copies host memory to the device through pinned staging buffers (no second host copy of a
  // weight), after flushing pending launches; returns once the copy is complete.
  void upload(void* dst, const void* src, size_t bytes);
  // A pinned host buffer of at least `bytes`, free for reuse once the last copy from it finished.
  void* batch_staging(size_t bytes);
  void batch_staging_used();  // records the copy out of the staging buffer

  // Appends one launch to the pending step.
  template <typename Args>
  void record(LaunchFn fn, const Args& args, const OpNote& note) {
    static_assert(std::is_trivially_copyable_v<Args> && sizeof(Args) % 8 == 0,
                  "launch arguments must be plain 8-byte members (see kernels.h)");
    append(fn, &args, sizeof(Args), note);
  }
  // Launch records appended since the context was made: an op can tell whether another op was
  // recorded after it (CudaBackend's bf16 shadows are valid for the very next op only).
  uint64_t records_appended() const { return appended_; }
  // Called before each record is appended, each flush and each release (never from inside
  // itself): the owner's deferred launch (CudaBackend's qk-norm awaiting a fusion with the next
  // attention) is recorded ahead of anything else. nullptr: none.
  void set_before_record(std::function<void()> fn) { before_record_ = std::move(fn); }
  // Whether the launches recorded from now on may use programmatic dependent launch (the step's
  // PDL kernels; CudaOptions::pdl_max_step_tokens). Part of each record, so of a step's key.
  void set_step_pdl(bool on) { step_pdl_ = on; }
  // Issues the pending launches (a graph replay when this exact step ran before).
  void flush();
  // flush(), then waits for the device; errors name `what`.
  void synchronize(const std::string& what);
  // With options.profile: device time per (op, kernel) since the last reset, slowest first.
  std::string profile_report() const;
  void profile_reset() { profile_.clear(); }

 private:
  struct Graph {
    std::vector<uint8_t> key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_used = 0;
  };
  void append(LaunchFn fn, const void* args, size_t bytes, const OpNote& note);
  void run_before_record();
  std::function<void()> before_record_;
  bool in_before_record_ = false;
  void run_eagerly();
  bool capture(Graph& graph);  // false: this step cannot be captured; run it eagerly
  void issue_pending();        // replays, captures or runs the pending records
  void issue_chunk();          // issue_pending() in the middle of a step (replay_chunks)
  void end_step();             // forgets the pending step, issued or not
  void launch_record(size_t offset, size_t note_index);
  void free_deferred();
  void print_host_timers() const;

  int device_;
  ContextOptions options_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::unique_ptr<GemmPlans> gemm_plans_;  // shares cublas_workspace_ (same stream, in order)
  ContextStats stats_;

  // INFERA_CUDA_HOST_TIMERS=1: host time of each launch call (kernel launch, cuBLAS call) by
  // kernel name, and of the op pass between records, printed to stderr when the context ends.
  // Locates the host work of steps launched as they are recorded; off by default (no clock reads).
  struct HostTimer {
    double seconds = 0;
    int64_t calls = 0;
  };
  bool host_timers_ = false;
  std::unordered_map<std::string, HostTimer> host_timer_;
  // With host timers: device time of each graph launch (events around it), with the step's
  // record count, read when the context ends: the GPU's part of a replayed step's wall time.
  struct GraphEvents {
    size_t records = 0;
    cudaEvent_t begin = nullptr, end = nullptr;
  };
  std::vector<GraphEvents> graph_events_;
  void launch_graph(cudaGraphExec_t exec);
  std::chrono::steady_clock::time_point last_append_end_;

  std::chrono::steady_clock::time_point step_began_;  // first record of the pending step
  std::vector<uint8_t> pending_;                      // records: [fn][bytes][args...]
  std::vector<OpNote> notes_;
  std::vector<size_t> offsets_;
  std::vector<void*> deferred_free_;

  struct ProfileEntry {
    double ms = 0;
    int64_t launches = 0;
  };
  std::unordered_map<std::string, ProfileEntry> profile_;
  std::vector<cudaEvent_t> profile_events_;

  std::unordered_map<uint64_t, std::vector<Graph>> graphs_;
  std::unordered_map<uint64_t, int> seen_;  // step hash -> times flushed
  // Streaming: a step whose first kStreamPrefix launches match no flushed step's cannot be a
  // graph's or a once-seen step's, so it runs eagerly anyway; its launches are then issued as
  // they are appended, and the GPU starts while the host still records the rest of the step
  // (a 2048-token prefill records ~450 launches; issued only at flush, the GPU idled meanwhile).
  std::unordered_set<uint64_t> prefixes_;  // hashes of flushed steps' first kStreamPrefix records
  bool streaming_ = false;
  size_t streamed_ = 0;  // pending records already issued
  // Chunked replay: the step's records so far (pending_ holds only those not yet issued), the
  // step's record count at which the next chunk goes out, and the hash of the step's first
  // kStreamPrefix records (for prefixes_ at its flush).
  size_t step_records_ = 0;
  size_t chunk_end_ = 0;
  uint64_t step_prefix_hash_ = 0;
  size_t graph_count_ = 0;
  uint64_t clock_ = 0;
  uint64_t appended_ = 0;
  bool step_pdl_ = true;

  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Scratch> scratch_;
  void* staging_[2] = {nullptr, nullptr};  // weight upload double buffer
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};
  void* batch_staging_ = nullptr;
  size_t batch_staging_bytes_ = 0;
  cudaEvent_t batch_staging_done_ = nullptr;
};

}  // namespace infera::cuda
