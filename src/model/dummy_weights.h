// Seeded random weights of the right names, shapes and dtype, with no weight file: lets speed be
// measured on a real model shape (like vLLM's dummy load format). Never used for correctness.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infera/tensor.h"
#include "io/weight_store.h"

namespace infera {

struct WeightSpec {
  std::string name;
  Shape shape;
  // Uniform values with this standard deviation around 0; negative: a norm weight, around 1.
  float init_std;
};

io::WeightStore make_dummy_weights(const std::vector<WeightSpec>& specs, DType dtype,
                                   uint64_t seed);

}  // namespace infera
