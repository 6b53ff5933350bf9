// The named weight tensors of a model, read from safetensors (one file or shards listed in
// model.safetensors.index.json) through mmap, or added in memory (dummy weights, tests).
// Every header is treated as hostile: sizes, offsets, dtypes and shapes are checked before any
// tensor is handed out, and every failure is a FormatError naming the file and the tensor.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "infera/tensor.h"

namespace infera::io {

class WeightStore {
 public:
  // Opens `dir/model.safetensors`, or every shard named by `dir/model.safetensors.index.json`.
  static WeightStore open_folder(const std::filesystem::path& dir);
  // Opens one safetensors file.
  static WeightStore open_file(const std::filesystem::path& file);
  // Tensors already loaded (a GGUF file's, renamed); `origin` names their file in errors.
  // FormatError when two share a name.
  static WeightStore from_tensors(std::vector<Tensor> tensors, std::string origin);

  bool contains(const std::string& name) const;
  // Throws FormatError "missing tensor NAME in DIR" when absent.
  const Tensor& get(const std::string& name) const;
  // get() plus a check of the shape; dtype must be a float weight type (F32, F16, BF16), or, for a
  // matrix (rank 2: projections, embeddings, LM head), a block-quantized type whose rows are
  // whole blocks. Vectors (norm weights) stay float: the ops that read them widen, not dequantize.
  // Error: "tensor NAME: shape [a, b], expected [c, d]".
  const Tensor& require(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  // Total bytes of all tensors.
  size_t total_bytes() const;

  // In-memory tensors (dummy weights, tests). Replaces an existing tensor of that name.
  void add(Tensor tensor);

 private:
  std::map<std::string, Tensor> tensors_;
  std::string origin_;  // folder or file, for error messages
};

}  // namespace infera::io
