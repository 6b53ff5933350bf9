// Next-token logits of a token sequence, window by window: what `infera perplexity` and
// `infera eval` score. The text is cut into consecutive non-overlapping windows of `context`
// tokens, each run from an empty KV cache and fed in chunks of `chunk` tokens, so that only
// chunk x vocab logits are held at once (Qwen3's vocabulary is 151,936). Every token of a window
// but its first is predicted from the tokens before it in that window.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "model/causal_lm.h"

namespace infera::cli {

class WindowedLogits {
 public:
  // `ids` must outlive this object. Scoring stops after `max_predictions` rows (0: all).
  WindowedLogits(CausalLM& model, std::span<const int32_t> ids, int64_t context, int64_t chunk,
                 int64_t max_predictions = 0);

  // Runs the next chunk; false when every prediction has been made. Two objects over the same
  // ids, context and chunk step through identical rows (models compared in lock-step).
  bool next();
  int64_t rows() const { return rows_; }
  // Row r predicts ids[target_index(r)] from the tokens of its window before it.
  int64_t target_index(int64_t r) const { return first_target_ + r; }
  std::span<const float> row(int64_t r) const;
  int64_t windows() const { return windows_; }

 private:
  CausalLM& model_;
  std::span<const int32_t> ids_;
  int64_t context_, chunk_, max_predictions_;
  int64_t window_begin_ = 0, window_len_ = 0, offset_ = 0;  // offset_: next token in the window
  int64_t predicted_ = 0, windows_ = 0, rows_ = 0, first_target_ = 0;
  std::unique_ptr<KvCache> cache_;
  SeqId seq_{};
  std::vector<float> logits_;
};

}  // namespace infera::cli
