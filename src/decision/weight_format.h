// Weight formats of the decision model's encoder and head layers: the stored float weights, or
// 8-bit / 4-bit group-wise (group 64) through the project's Q8_0 / Q4_0 matmul
// (quant/quantize_group64.cpp). Only matmul weights whose input width divides by 64 are
// quantized; every tensor left in full precision is listed with the reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "infera/tensor.h"
#include "ops/backend.h"

namespace infera::decision {

enum class WeightFormat : uint8_t { Stored, Int8Group64, Int4Group64 };
std::string_view weight_format_name(WeightFormat format);  // "stored", "int8-g64", "int4-g64"
// Parses those names; InvalidArgument listing them otherwise.
WeightFormat parse_weight_format(std::string_view name);

struct QuantReport {
  struct Kept {
    std::string tensor, reason;
  };
  std::vector<std::string> quantized;  // tensor names
  std::vector<Kept> kept;              // tensors left in full precision, with why
  int64_t quantized_params = 0, kept_params = 0;
};

// Prepares the weights one model reads: the backend's prepare_weight for the stored format; for a
// quantized format, rank-2 matmul weights with in_features % 64 == 0 are quantized (group 64) and
// the rest kept and recorded. Embedding tables and norms are never passed here as matmul weights:
// the caller says which tensors are matmul weights.
class WeightPreparer {
 public:
  WeightPreparer(Backend& backend, WeightFormat format) : backend_(backend), format_(format) {}
  Tensor matmul_weight(const Tensor& host_weight);
  // A tensor that is not a matmul weight (embedding table, norm vector); recorded as kept.
  Tensor other(const Tensor& host_weight, const std::string& reason);
  const QuantReport& report() const { return report_; }
  WeightFormat format() const { return format_; }

 private:
  void keep(const Tensor& t, std::string reason);
  Backend& backend_;
  WeightFormat format_;
  QuantReport report_;
};

// The f32 values of a host float weight (F32, F16 or BF16), for weights the runtime computes with
// on the host (the action head). FormatError naming the tensor for another dtype.
std::vector<float> widen_to_f32(const Tensor& host_weight);

}  // namespace infera::decision
