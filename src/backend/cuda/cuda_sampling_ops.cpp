// The CUDA backend's sample_rows (ops/backend.h): the filters and uniform numbers of the rows go
// to the device through the pinned batch staging buffer, one block per row samples (sampling.cu)
// where the logits are, and only the chosen ids come back.
#include <cmath>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {
namespace {
constexpr int kParamsSlot = DeviceContext::kSampleParams, kOutSlot = DeviceContext::kSampleOut;

// The Sampler validates its parameters; sample_rows may be called without one, so it repeats the
// checks the kernel relies on (each written so that NaN fails it).
void check_row(const RowSampling& r, size_t i) {
  const auto fail = [i](const std::string& what) {
    throw InvalidArgument("[sample_rows] row " + std::to_string(i) + ": " + what);
  };
  if (!std::isfinite(r.temperature)) fail("temperature must be finite");
  if (r.top_k < 0) fail("top_k must be >= 0");
  if (!(r.top_p > 0.0f && r.top_p <= 1.0f)) fail("top_p must be in (0, 1]");
  if (!(r.min_p >= 0.0f && r.min_p <= 1.0f)) fail("min_p must be in [0, 1]");
  if (!(r.uniform >= 0.0 && r.uniform < 1.0)) fail("the uniform number must be in [0, 1)");
}
}  // namespace

void CudaBackend::sample_rows(const Tensor& x, std::span<const RowSampling> rows,
                              std::span<SampledId> out) {
  const char* op = "sample_rows";
  expect_f32(x, op);
  INFERA_CUDA_EXPECT(x.rank() == 2 && static_cast<int64_t>(rows.size()) == x.dim(0) &&
                         out.size() == rows.size() && x.dim(1) > 0,
                     op,
                     "x " + x.shape().str() + " for " + std::to_string(rows.size()) + " rows and " +
                         std::to_string(out.size()) + " outputs");
  INFERA_CUDA_EXPECT(x.dim(1) < (int64_t{1} << 31) && x.dim(0) < (int64_t{1} << 31), op,
                     "rows and width must be below 2^31");
  for (size_t i = 0; i < rows.size(); ++i) check_row(rows[i], i);

  static_assert(sizeof(SampleParams) == 24 && sizeof(SampleOut) == sizeof(SampledId));
  const size_t param_bytes = rows.size() * sizeof(SampleParams);
  const size_t out_bytes = rows.size() * sizeof(SampleOut);
  auto* params = static_cast<SampleParams*>(ctx_->scratch(kParamsSlot, param_bytes));
  auto* dev_out = static_cast<SampleOut*>(ctx_->scratch(kOutSlot, out_bytes));
  // The copy is queued ahead of the step's flush, so a replayed graph reads this step's rows.
  auto* staging = static_cast<SampleParams*>(ctx_->batch_staging(param_bytes));
  for (size_t i = 0; i < rows.size(); ++i)
    staging[i] = SampleParams{rows[i].temperature, rows[i].top_k, rows[i].top_p, rows[i].min_p,
                              rows[i].uniform};
  check_cuda(cudaMemcpyAsync(params, staging, param_bytes, cudaMemcpyHostToDevice, ctx_->stream()),
             "upload the sampling parameters of " + std::to_string(rows.size()) + " rows");
  ctx_->batch_staging_used();
  ctx_->record(launch_sample_rows,
               SampleRowsArgs{x.data_as<const float>(), params, dev_out, x.dim(0), x.dim(1)},
               note(op, "sample_rows", {&x}));
  ctx_->flush();
  sampled_.resize(rows.size());
  check_cuda(
      cudaMemcpyAsync(sampled_.data(), dev_out, out_bytes, cudaMemcpyDeviceToHost, ctx_->stream()),
      "copy " + std::to_string(rows.size()) + " sampled ids to the host");
  check_cuda(cudaStreamSynchronize(ctx_->stream()),
             "run the step that produced " + x.name() + " " + x.shape().str());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = SampledId{sampled_[i].id, sampled_[i].drew};
}

}  // namespace infera::cuda
