#include "io/weight_store.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "core/json_limits.h"
#include "infera/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

namespace infera::io {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// The index lists one line per tensor; even the largest public checkpoints stay in the low MB.
constexpr uintmax_t kMaxIndexBytes = 64ull * 1024 * 1024;

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Shard names come from an untrusted index and are joined onto the model folder: a name with a
// separator, "..", or an absolute path could make us map any file on the machine.
bool is_plain_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

json read_index(const fs::path& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) throw IoError(path.string() + ": cannot stat: " + ec.message());
  if (bytes > kMaxIndexBytes)
    throw FormatError(path.string() + ": " + std::to_string(bytes) + " bytes, larger than the " +
                      std::to_string(kMaxIndexBytes) + "-byte limit for a shard index");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(path.string() + ": read failed");
  return parse_json_capped<json>(text.str(), path.string());
}

std::vector<Tensor> load_file(const fs::path& file) {
  const std::shared_ptr<MappedFile> mapped = MappedFile::open(file);
  return read_safetensors(mapped->data(), mapped->size(), file.string(), mapped);
}

}  // namespace

WeightStore WeightStore::open_file(const fs::path& file) {
  WeightStore store;
  store.origin_ = file.string();
  for (Tensor& t : load_file(file)) {
    std::string name = t.name();
    store.tensors_.emplace(std::move(name), std::move(t));
  }
  return store;
}

// A folder holding both files is ambiguous; we prefer model.safetensors because it is
// self-describing (no second file that can disagree with it), and an index left behind next to a
// merged file is the common stale case. Otherwise the index names the shards.
WeightStore WeightStore::open_folder(const fs::path& dir) {
  const fs::path single = dir / kSingleFile;
  if (is_regular(single)) return open_file(single);
  const fs::path index_path = dir / kIndexFile;
  if (!is_regular(index_path))
    throw FormatError("no " + std::string(kSingleFile) + " or " + kIndexFile + " in " +
                      dir.string());

  const std::string index_name = index_path.string();
  const json index = read_index(index_path);
  if (!index.is_object()) throw FormatError(index_name + ": not a JSON object");
  const auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object())
    throw FormatError(index_name + ": missing 'weight_map' object");
  if (wm->empty()) throw FormatError(index_name + ": 'weight_map' is empty");

  // Validate every entry before opening anything, so a bad index costs no mappings.
  std::map<std::string, std::vector<std::string>> shard_tensors;  // shard -> tensors it must hold
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string())
      throw FormatError(index_name + ": tensor " + tensor + ": shard name is not a string");
    const auto& shard_name = shard.get_ref<const std::string&>();
    if (!is_plain_file_name(shard_name))
      throw FormatError(index_name + ": tensor " + tensor + ": shard '" + shard_name +
                        "' is not a plain file name inside " + dir.string());
    shard_tensors[shard_name].push_back(tensor);
  }

  WeightStore store;
  store.origin_ = dir.string();
  std::map<std::string, std::string> shard_of;  // tensor -> shard it was loaded from
  for (const auto& [shard_name, expected] : shard_tensors) {
    const fs::path shard_path = dir / shard_name;
    if (!is_regular(shard_path))
      throw FormatError(index_name + ": shard '" + shard_name + "' (holding tensor " +
                        expected.front() + ") not found in " + dir.string());
    std::map<std::string, Tensor> loaded;
    for (Tensor& t : load_file(shard_path)) {
      std::string name = t.name();
      loaded.emplace(std::move(name), std::move(t));
    }
    for (const auto& tensor : expected)
      if (loaded.find(tensor) == loaded.end())
        throw FormatError(index_name + ": tensor " + tensor + " is listed in shard '" + shard_name +
                          "' but that shard does not contain it");
    // Tensors present in a shard but absent from the index are kept (as transformers does when it
    // loads every key of every shard); a name in two shards is ambiguous and rejected.
    for (auto& [name, t] : loaded) {
      const auto [it, inserted] = shard_of.emplace(name, shard_name);
      if (!inserted)
        throw FormatError(index_name + ": tensor " + name + " appears in both shard '" +
                          it->second + "' and shard '" + shard_name + "'");
      store.tensors_.emplace(name, std::move(t));
    }
  }
  return store;
}

bool WeightStore::contains(const std::string& name) const { return tensors_.count(name) != 0; }

const Tensor& WeightStore::get(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw FormatError("missing tensor " + name + " in " + origin_);
  return it->second;
}

const Tensor& WeightStore::require(const std::string& name, const Shape& expected) const {
  const Tensor& t = get(name);
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    throw FormatError("tensor " + name + " in " + origin_ + ": dtype " +
                      std::string(dtype_name(t.dtype())) +
                      ", expected a float weight type (F32, F16, BF16)");
  if (!(t.shape() == expected))
    throw FormatError("tensor " + name + ": shape " + t.shape().str() + ", expected " +
                      expected.str() + " (in " + origin_ + ")");
  return t;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

size_t WeightStore::total_bytes() const {
  // Each nbytes() is checked by core; mapped tensors lie inside their files, so the sum fits too,
  // but tensors added in memory come with no such bound.
  size_t total = 0;
  for (const auto& [name, t] : tensors_)
    if (__builtin_add_overflow(total, t.nbytes(), &total))
      throw InvalidArgument("total bytes of the weights in " + origin_ + " overflow size_t");
  return total;
}

void WeightStore::add(Tensor tensor) {
  std::string name = tensor.name();
  tensors_.insert_or_assign(std::move(name), std::move(tensor));
}

}  // namespace infera::io
