#include "backend/cuda/device_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "backend/cuda/cuda_check.h"

namespace infera::cuda {
namespace {

constexpr size_t kStagingBytes = size_t{8} << 20;           // per weight-upload buffer
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // fixed, so cuBLAS can be captured
constexpr size_t kMaxGraphs = 256;  // a step replayed in chunks (replay_chunks) holds ~5

std::string mib(size_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

std::string note_text(const OpNote& n) {
  std::string s = "[";
  s += n.op;
  s += ']';
  for (int i = 0; i < n.count; ++i) {
    s += ' ';
    s += n.shapes[i].str();
  }
  return s;
}

uint64_t hash_bytes(const std::vector<uint8_t>& v, size_t bytes) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(v.data()), bytes));
}
uint64_t hash_bytes(const std::vector<uint8_t>& v) { return hash_bytes(v, v.size()); }
uint64_t hash_range(const std::vector<uint8_t>& v, size_t begin, size_t end) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(v.data()) + begin, end - begin));
}

constexpr size_t kStreamPrefix = 16;  // records that decide whether a step streams
// High bit of a record's size word: launch it without PDL (DeviceContext::set_step_pdl).
constexpr uint64_t kNoPdl = uint64_t{1} << 63;

}  // namespace

DeviceContext::DeviceContext(int device, const ContextOptions& options)
    : device_(device), options_(options) {
  check_cuda(cudaSetDevice(device), "select device " + std::to_string(device));
  check_cuda(cudaGetDeviceProperties(&props_, device), "read the device's properties");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create a stream");
  check_cublas(cublasCreate(&cublas_), "create the cuBLAS handle");
  check_cublas(cublasSetStream(cublas_, stream_), "bind cuBLAS to the stream");
  // CUBLAS_COMPUTE_32F stays f32 (no TF32) under the default math mode.
  check_cublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "set the cuBLAS math mode");
  cublas_workspace_ = allocate(kCublasWorkspaceBytes, "the cuBLAS workspace");
  check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes),
               "give cuBLAS its workspace");
  gemm_plans_ = std::make_unique<GemmPlans>(cublas_workspace_, kCublasWorkspaceBytes);
  const char* timers = std::getenv("INFERA_CUDA_HOST_TIMERS");
  host_timers_ = timers && std::string_view(timers) == "1";
  for (int i = 0; i < 2; ++i) {
    check_cuda(cudaMallocHost(&staging_[i], kStagingBytes), "allocate pinned staging memory");
    check_cuda(cudaEventCreateWithFlags(&staging_done_[i], cudaEventDisableTiming),
               "create an event");
  }
  check_cuda(cudaEventCreateWithFlags(&batch_staging_done_, cudaEventDisableTiming),
             "create an event");
}

DeviceContext::~DeviceContext() {
  try {
    flush();
    cudaStreamSynchronize(stream_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "infera: pending GPU work failed at shutdown: %s\n", e.what());
  }
  for (cudaEvent_t e : profile_events_) cudaEventDestroy(e);
  for (auto& [hash, list] : graphs_)
    for (Graph& g : list) cudaGraphExecDestroy(g.exec);
  if (host_timers_) print_host_timers();
  for (GraphEvents& e : graph_events_) {
    cudaEventDestroy(e.begin);
    cudaEventDestroy(e.end);
  }
  for (Scratch& s : scratch_) cudaFree(s.ptr);
  free_deferred();
  gemm_plans_.reset();
  cudaFree(cublas_workspace_);
  if (cublas_) cublasDestroy(cublas_);
  for (int i = 0; i < 2; ++i) {
    cudaFreeHost(staging_[i]);
    cudaEventDestroy(staging_done_[i]);
  }
  cudaFreeHost(batch_staging_);
  cudaEventDestroy(batch_staging_done_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* DeviceContext::allocate(size_t bytes, const std::string& what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the context stays usable
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw Error("out of GPU memory allocating " + what + ": " + mib(bytes) + " asked, " +
                mib(free) + " free of " + mib(total) + " on " + props_.name);
  }
  check_cuda(err, "allocate " + mib(bytes) + " for " + what);
  return p;
}

void DeviceContext::release(void* p) {
  if (!p) return;
  run_before_record();  // a deferred launch may name p: record it, so that the free waits
  if (!offsets_.empty()) {
    deferred_free_.push_back(p);  // a pending launch may still name it
    return;
  }
  cudaFree(p);
}

void DeviceContext::free_deferred() {
  for (void* p : deferred_free_) cudaFree(p);
  deferred_free_.clear();
}

void* DeviceContext::scratch(int slot, size_t bytes) {
  if (scratch_.size() <= static_cast<size_t>(slot)) scratch_.resize(static_cast<size_t>(slot) + 1);
  Scratch& s = scratch_[static_cast<size_t>(slot)];
  if (s.bytes < bytes) {
    const size_t grown = std::max(bytes, s.bytes * 2);
    void* p = allocate(grown, "scratch space");
    release(s.ptr);
    s.ptr = p;
    s.bytes = grown;
  }
  return s.ptr;
}

void* DeviceContext::zeroed_scratch(int slot, size_t bytes) {
  const size_t before =
      static_cast<size_t>(slot) < scratch_.size() ? scratch_[static_cast<size_t>(slot)].bytes : 0;
  void* p = scratch(slot, bytes);
  const size_t now = scratch_[static_cast<size_t>(slot)].bytes;
  // A new buffer: zeroed on the stream, ahead of the pending launches that will use it.
  if (now != before) check_cuda(cudaMemsetAsync(p, 0, now, stream_), "zero scratch space");
  return p;
}

void DeviceContext::upload(void* dst, const void* src, size_t bytes) {
  flush();
  const auto* from = static_cast<const uint8_t*>(src);
  auto* to = static_cast<uint8_t*>(dst);
  for (size_t done = 0, i = 0; done < bytes; done += kStagingBytes, i ^= 1) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    check_cuda(cudaEventSynchronize(staging_done_[i]), "wait for a staging buffer");
    std::memcpy(staging_[i], from + done, n);
    check_cuda(cudaMemcpyAsync(to + done, staging_[i], n, cudaMemcpyHostToDevice, stream_),
               "copy " + mib(bytes) + " to the device");
    check_cuda(cudaEventRecord(staging_done_[i], stream_), "record an event");
  }
  check_cuda(cudaStreamSynchronize(stream_), "copy " + mib(bytes) + " to the device");
}

void* DeviceContext::batch_staging(size_t bytes) {
  check_cuda(cudaEventSynchronize(batch_staging_done_), "wait for the batch staging buffer");
  if (batch_staging_bytes_ < bytes) {
    cudaFreeHost(batch_staging_);
    batch_staging_ = nullptr;
    const size_t grown = std::max(bytes, batch_staging_bytes_ * 2);
    check_cuda(cudaMallocHost(&batch_staging_, grown), "allocate pinned batch staging memory");
    batch_staging_bytes_ = grown;
  }
  return batch_staging_;
}

void DeviceContext::batch_staging_used() {
  check_cuda(cudaEventRecord(batch_staging_done_, stream_), "record an event");
}

void DeviceContext::run_before_record() {
  if (!before_record_ || in_before_record_) return;
  in_before_record_ = true;
  try {
    before_record_();
  } catch (...) {
    in_before_record_ = false;
    throw;
  }
  in_before_record_ = false;
}

void DeviceContext::append(LaunchFn fn, const void* args, size_t bytes, const OpNote& note) {
  run_before_record();
  if (step_records_ == 0) {
    step_began_ = std::chrono::steady_clock::now();
    chunk_end_ = kStreamPrefix;
  }
  if (host_timers_ && step_records_ > 0) {  // the op pass since the previous record
    HostTimer& t = host_timer_[std::string("op pass before ") + note.op];
    t.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_append_end_).count();
    ++t.calls;
  }
  struct StampEnd {
    DeviceContext& c;
    ~StampEnd() {
      if (c.host_timers_) c.last_append_end_ = std::chrono::steady_clock::now();
    }
  } stamp{*this};
  ++appended_;
  const size_t at = pending_.size();
  offsets_.push_back(at);
  notes_.push_back(note);
  pending_.resize(at + 16 + bytes);
  const uint64_t size = bytes | (step_pdl_ ? 0 : kNoPdl);
  std::memcpy(pending_.data() + at, &fn, sizeof(fn));
  std::memcpy(pending_.data() + at + 8, &size, 8);
  std::memcpy(pending_.data() + at + 16, args, bytes);
  ++step_records_;
  // The first chunk ends at kStreamPrefix records, so pending_ still holds the whole step here.
  if (step_records_ == kStreamPrefix) {
    step_prefix_hash_ = hash_bytes(pending_);
    if (!streaming_ && options_.stream_new_steps && !options_.profile && !options_.sync_each_op &&
        !prefixes_.count(step_prefix_hash_))
      streaming_ = true;
  }
  try {
    if (streaming_) {
      for (; streamed_ < offsets_.size(); ++streamed_)
        launch_record(offsets_[streamed_], streamed_);
    } else if (step_records_ == chunk_end_ && options_.replay_chunks && options_.graphs &&
               !options_.profile && !options_.sync_each_op) {
      issue_chunk();
    }
  } catch (...) {  // the step is abandoned, as flush() abandons a failed one
    end_step();
    throw;
  }
}

// A chunk is keyed, seen, captured and replayed by its own bytes, as a whole step is: launches
// are issued in order on one stream, so a step's chunks replayed one after another do what the
// step's launches do. Chunks double in size (16, 32, 64, ... records): the GPU's time for a
// chunk is many times the host's for the next, so the GPU never waits after the first, and a
// step of n records makes about log2(n / 16) graph launches.
void DeviceContext::issue_chunk() {
  stats_.ops += static_cast<int64_t>(offsets_.size());
  issue_pending();
  ++stats_.early_chunks;
  pending_.clear();
  offsets_.clear();
  notes_.clear();
  chunk_end_ = 2 * chunk_end_ + kStreamPrefix;
}

void DeviceContext::end_step() {
  pending_.clear();
  offsets_.clear();
  notes_.clear();
  streaming_ = false;
  streamed_ = 0;
  step_records_ = 0;
  free_deferred();
}

void DeviceContext::launch_record(size_t offset, size_t note_index) {
  LaunchFn fn;
  std::memcpy(&fn, pending_.data() + offset, sizeof(fn));
  uint64_t size = 0;
  std::memcpy(&size, pending_.data() + offset + 8, 8);
  struct Suppress {  // the record's PDL choice, for this launch only
    explicit Suppress(bool on) : on_(on) {
      if (on_) set_thread_pdl_suppressed(true);
    }
    ~Suppress() {
      if (on_) set_thread_pdl_suppressed(false);
    }
    bool on_;
  } suppress{(size & kNoPdl) != 0};
  const auto began =
      host_timers_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    fn(pending_.data() + offset + 16, stream_);
  } catch (const std::exception& e) {
    throw Error(note_text(notes_[note_index]) + ": " + e.what());
  }
  if (host_timers_) {
    HostTimer& t = host_timer_[std::string("launch ") + notes_[note_index].kernel +
                               (streaming_ ? " (streamed)" : " (at flush)")];
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    ++t.calls;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(note_text(notes_[note_index]) + ": kernel launch failed: " + cuda_error_text(err));
}

void DeviceContext::run_eagerly() {
  if (options_.profile) {
    const size_t n = offsets_.size();
    while (profile_events_.size() < 2 * n) {
      cudaEvent_t e;
      check_cuda(cudaEventCreate(&e), "create a profiling event");
      profile_events_.push_back(e);
    }
    for (size_t i = 0; i < n; ++i) {
      check_cuda(cudaEventRecord(profile_events_[2 * i], stream_), "record an event");
      launch_record(offsets_[i], i);
      check_cuda(cudaEventRecord(profile_events_[2 * i + 1], stream_), "record an event");
    }
    check_cuda(cudaStreamSynchronize(stream_), "run a profiled step");
    for (size_t i = 0; i < n; ++i) {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, profile_events_[2 * i], profile_events_[2 * i + 1]),
                 "read an event");
      ProfileEntry& e = profile_[std::string(notes_[i].op) + " / " + notes_[i].kernel];
      e.ms += ms;
      ++e.launches;
    }
    ++stats_.eager_steps;
    return;
  }
  for (size_t i = 0; i < offsets_.size(); ++i) {
    launch_record(offsets_[i], i);
    if (options_.sync_each_op) {
      const cudaError_t err = cudaStreamSynchronize(stream_);
      if (err != cudaSuccess)
        throw Error(note_text(notes_[i]) + ": kernel failed: " + cuda_error_text(err));
    }
  }
  ++stats_.eager_steps;
}

bool DeviceContext::capture(Graph& graph) {
  cudaGraph_t g = nullptr;
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool ok = true;
  try {
    for (size_t i = 0; i < offsets_.size(); ++i) launch_record(offsets_[i], i);
  } catch (const std::exception&) {
    ok = false;
  }
  const cudaError_t end = cudaStreamEndCapture(stream_, &g);
  ok = ok && end == cudaSuccess && g != nullptr;
  if (ok) ok = cudaGraphInstantiate(&graph.exec, g, 0) == cudaSuccess;
  if (g) cudaGraphDestroy(g);
  if (!ok) {
    cudaGetLastError();  // capture errors are not sticky; the eager run reports real ones
    graph.exec = nullptr;
  }
  return ok;
}

void DeviceContext::flush() {
  run_before_record();
  if (step_records_ == 0) {
    free_deferred();
    return;
  }
  struct Clear {  // the pending step is gone whatever happens
    DeviceContext& c;
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
    ~Clear() {
      c.stats_.host_flush_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      c.end_step();
    }
  } clear{*this};
  stats_.ops += static_cast<int64_t>(offsets_.size());
  stats_.host_record_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_began_).count();
  ++stats_.recorded_steps;
  if (step_records_ >= kStreamPrefix) {
    if (prefixes_.size() > 4096) prefixes_.clear();
    prefixes_.insert(step_prefix_hash_);
  }
  if (streaming_) {  // the rest of a step that began launching as it was recorded
    for (; streamed_ < offsets_.size(); ++streamed_) launch_record(offsets_[streamed_], streamed_);
    if (options_.graphs) {  // a second sight captures it: the whole step, or each of its chunks
      ++seen_[hash_bytes(pending_)];
      if (options_.replay_chunks) {
        size_t begin = 0;
        for (size_t end = kStreamPrefix; begin < offsets_.size(); end = 2 * end + kStreamPrefix) {
          const size_t e = std::min(end, offsets_.size());
          ++seen_[hash_range(pending_, offsets_[begin],
                             e < offsets_.size() ? offsets_[e] : pending_.size())];
          begin = e;
        }
      }
    }
    ++stats_.eager_steps;
    ++stats_.streamed_steps;
    return;
  }
  if (!offsets_.empty()) issue_pending();  // empty: the step's last chunk already went out
}

void DeviceContext::issue_pending() {
  if (!options_.graphs || options_.sync_each_op || options_.profile) return run_eagerly();

  const uint64_t hash = hash_bytes(pending_);
  std::vector<Graph>& list = graphs_[hash];
  for (Graph& g : list)
    if (g.key == pending_) {
      if (!g.exec) return run_eagerly();  // known not to capture
      g.last_used = ++clock_;
      launch_graph(g.exec);
      ++stats_.graph_launches;
      return;
    }
  if (++seen_[hash] < 2) return run_eagerly();  // first sight: eager (and lazy init outside)
  if (seen_.size() > 4096) seen_.clear();

  if (graph_count_ >= kMaxGraphs) {  // evict the least recently used graph
    std::vector<Graph>* oldest_list = nullptr;
    size_t oldest = 0;
    for (auto& [h, l] : graphs_)
      for (size_t i = 0; i < l.size(); ++i)
        if (!oldest_list || l[i].last_used < (*oldest_list)[oldest].last_used) {
          oldest_list = &l;
          oldest = i;
        }
    if (oldest_list && oldest_list != &list) {
      if ((*oldest_list)[oldest].exec) cudaGraphExecDestroy((*oldest_list)[oldest].exec);
      oldest_list->erase(oldest_list->begin() + static_cast<std::ptrdiff_t>(oldest));
      --graph_count_;
    }
  }
  Graph graph;
  graph.key = pending_;
  graph.last_used = ++clock_;
  const auto capture_began = std::chrono::steady_clock::now();
  const bool captured = capture(graph);
  if (host_timers_) {
    HostTimer& t = host_timer_["graph capture + instantiate"];
    t.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - capture_began).count();
    ++t.calls;
  }
  list.push_back(std::move(graph));
  ++graph_count_;
  if (!captured) return run_eagerly();
  ++stats_.graph_captures;
  launch_graph(list.back().exec);
  ++stats_.graph_launches;
}

void DeviceContext::launch_graph(cudaGraphExec_t exec) {
  if (!host_timers_ || graph_events_.size() >= 4096)
    return check_cuda(cudaGraphLaunch(exec, stream_), "launch a CUDA graph");
  GraphEvents e{offsets_.size()};
  check_cuda(cudaEventCreate(&e.begin), "create a timing event");
  check_cuda(cudaEventCreate(&e.end), "create a timing event");
  graph_events_.push_back(e);
  check_cuda(cudaEventRecord(e.begin, stream_), "record an event");
  const auto began = std::chrono::steady_clock::now();
  check_cuda(cudaGraphLaunch(exec, stream_), "launch a CUDA graph");
  HostTimer& t = host_timer_["cudaGraphLaunch call"];
  t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ++t.calls;
  check_cuda(cudaEventRecord(e.end, stream_), "record an event");
}

void DeviceContext::print_host_timers() const {
  std::vector<std::pair<std::string, HostTimer>> rows(host_timer_.begin(), host_timer_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::fprintf(stderr,
               "infera host timers (INFERA_CUDA_HOST_TIMERS=1): total ms, calls, us each\n");
  for (const auto& [name, t] : rows)
    std::fprintf(stderr, "  %-52s %10.3f %8lld %9.2f\n", name.c_str(), 1e3 * t.seconds,
                 static_cast<long long>(t.calls),
                 1e6 * t.seconds / double(std::max<int64_t>(t.calls, 1)));
  // Device time of the graph launches (begin event to end event), per step size.
  std::map<size_t, std::vector<float>> by_records;
  for (const GraphEvents& e : graph_events_) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, e.begin, e.end) == cudaSuccess)
      by_records[e.records].push_back(ms);
  }
  for (auto& [records, ms] : by_records) {
    std::sort(ms.begin(), ms.end());
    std::fprintf(stderr,
                 "  graph of %5zu launches: device time (events) median %.3f ms, min %.3f, max "
                 "%.3f over %zu launches\n",
                 records, ms[ms.size() / 2], ms.front(), ms.back(), ms.size());
  }
}

std::string DeviceContext::profile_report() const {
  std::vector<std::pair<std::string, ProfileEntry>> rows(profile_.begin(), profile_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0;
  for (const auto& r : rows) total += r.second.ms;
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-40s %10s %9s %10s %6s\n", "op / kernel", "total ms",
                "launches", "us each", "share");
  out += line;
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof line, "%-40s %10.3f %9lld %10.2f %5.1f%%\n", name.c_str(), e.ms,
                  static_cast<long long>(e.launches), 1e3 * e.ms / double(e.launches),
                  100.0 * e.ms / std::max(total, 1e-9));
    out += line;
  }
  return out;
}

void DeviceContext::synchronize(const std::string& what) {
  flush();
  check_cuda(cudaStreamSynchronize(stream_), what);
}

}  // namespace infera::cuda
