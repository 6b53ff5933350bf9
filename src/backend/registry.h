// Chooses a backend by device name, so that frontends and tests name no concrete backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace infera {

struct BackendOptions {
  std::string device = "auto";  // "cpu", "cuda" or "auto" (CUDA when a GPU is present)
  int threads = 0;              // CPU threads (0: one per core)
  // CPU matmuls with bf16 weights: "f32" activations (default) or "bf16" dot products where the
  // CPU has AVX512-BF16 (see cpu_backend.h). The CUDA backend ignores it.
  std::string matmul_precision = "f32";
  // Encoder attention_packed's schedule: "windowed" (only the key tiles a local layer's window
  // reaches) or "dense" (every key tile, the window masked per row: the measured baseline).
  std::string packed_attention = "windowed";
};

// The backend for `options.device`; InvalidArgument for an unknown device, Error when the device
// is known but not usable here (no GPU, or a build without CUDA), saying which.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// Device names this build knows ("cpu", and "cuda" when compiled in), for --help and errors.
std::vector<std::string> known_devices();

}  // namespace infera
