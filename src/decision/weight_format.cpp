#include "decision/weight_format.h"

#include <cstdlib>
#include <cstring>

#include "core/dtype_convert.h"
#include "infera/error.h"
#include "quant/quantize.h"

namespace infera::decision {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::Int8Group64:
      return "int8-g64";
    case WeightFormat::Int4Group64:
      return "int4-g64";
    default:
      return "stored";
  }
}

WeightFormat parse_weight_format(std::string_view name) {
  for (WeightFormat f :
       {WeightFormat::Stored, WeightFormat::Int8Group64, WeightFormat::Int4Group64})
    if (weight_format_name(f) == name) return f;
  throw InvalidArgument("weight format '" + std::string(name) +
                        "' is not known (stored, int8-g64, int4-g64)");
}

std::vector<float> widen_to_f32(const Tensor& t) {
  if (t.device() != Device::CPU) throw InvalidArgument(t.name() + ": not a host tensor");
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  switch (t.dtype()) {
    case DType::F32:
      std::memcpy(out.data(), t.data(), n * sizeof(float));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(t.data_as<const uint16_t>()[i]);
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(t.data_as<const uint16_t>()[i]);
      break;
    default:
      throw FormatError("tensor " + t.name() + ": dtype " + std::string(dtype_name(t.dtype())) +
                        " where a float weight (F32, F16, BF16) is required");
  }
  return out;
}

void WeightPreparer::keep(const Tensor& t, std::string reason) {
  report_.kept.push_back({t.name(), std::move(reason)});
  report_.kept_params += t.numel();
}

Tensor WeightPreparer::other(const Tensor& t, const std::string& reason) {
  if (format_ != WeightFormat::Stored) keep(t, reason);
  return backend_.prepare_weight(t);
}

Tensor WeightPreparer::matmul_weight(const Tensor& t) {
  if (format_ == WeightFormat::Stored) return backend_.prepare_weight(t);
  const DType q = format_ == WeightFormat::Int8Group64 ? DType::Q8_0 : DType::Q4_0;
  if (t.rank() != 2) {
    keep(t, "not a matrix");
    return backend_.prepare_weight(t);
  }
  const int64_t rows = t.dim(0), cols = t.dim(1);
  if (cols % quant::kGroup64 != 0) {
    keep(t, "in_features " + std::to_string(cols) + " is not a multiple of the group size 64");
    return backend_.prepare_weight(t);
  }
  if (dtype_is_quantized(t.dtype())) {
    keep(t, "already stored quantized as " + std::string(dtype_name(t.dtype())));
    return backend_.prepare_weight(t);
  }
  if (!backend_.supports(Op::Matmul, {q})) {
    keep(t, "the " + backend_.name() + " backend has no " + std::string(dtype_name(q)) + " matmul");
    return backend_.prepare_weight(t);
  }
  const std::vector<float> values = widen_to_f32(t);
  const size_t row_bytes = dtype_bytes(q, static_cast<size_t>(cols));
  const size_t bytes = row_bytes * static_cast<size_t>(rows);
  void* data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!data) throw Error("out of memory quantizing " + t.name());
  std::shared_ptr<void> owner(data, [](void* p) { std::free(p); });
  for (int64_t r = 0; r < rows; ++r) {
    void* out = static_cast<char*>(data) + static_cast<size_t>(r) * row_bytes;
    const float* x = values.data() + r * cols;
    if (q == DType::Q8_0) {
      quant::quantize_row_q8_0_g64(x, cols, out);
    } else {
      quant::quantize_row_q4_0_g64(x, cols, out);
    }
  }
  report_.quantized.push_back(t.name());
  report_.quantized_params += t.numel();
  return backend_.prepare_weight(Tensor(t.name(), q, t.shape(), Device::CPU, data, owner));
}

}  // namespace infera::decision
