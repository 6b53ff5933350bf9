#include "window_logits.h"

#include <algorithm>

#include "engine/step.h"
#include "infera/error.h"

namespace infera::cli {

namespace {
constexpr int64_t kBlock = 32;
}

WindowedLogits::WindowedLogits(CausalLM& model, std::span<const int32_t> ids, int64_t context,
                               int64_t chunk, int64_t max_predictions)
    : model_(model),
      ids_(ids),
      context_(context),
      chunk_(chunk),
      max_predictions_(max_predictions) {
  if (context_ < 2) throw InvalidArgument("the window (--context) must be at least 2 tokens");
  if (chunk_ < 1) throw InvalidArgument("--chunk must be at least 1");
}

std::span<const float> WindowedLogits::row(int64_t r) const {
  const auto vocab = static_cast<size_t>(model_.info().vocab);
  return {logits_.data() + static_cast<size_t>(r) * vocab, vocab};
}

bool WindowedLogits::next() {
  const auto n = static_cast<int64_t>(ids_.size());
  rows_ = 0;
  if (max_predictions_ > 0 && predicted_ >= max_predictions_) return false;
  // The current window is done when its last token has no successor inside it to predict.
  if (!cache_ || offset_ >= window_len_ - 1) {
    const int64_t begin = cache_ ? window_begin_ + window_len_ : 0;
    if (begin + 1 >= n) return false;
    window_begin_ = begin;
    window_len_ = std::min(context_, n - begin);
    offset_ = 0;
    // Each window is one sequence over its own cache, fed through the batch contract.
    cache_ = std::make_unique<KvCache>(
        model_.backend(), model_.kv_shape(),
        KvCacheConfig{.block_size = kBlock, .num_blocks = (window_len_ + kBlock - 1) / kBlock});
    seq_ = cache_->add_sequence();
    if (!cache_->reserve(seq_, window_len_))
      throw Error("the KV cache could not hold a window of " + std::to_string(window_len_) +
                  " tokens");
    ++windows_;
  }
  const int64_t fed = std::min(chunk_, window_len_ - offset_);
  // The window's last token predicts nothing inside the window: no logits needed for it.
  int64_t wanted = std::min(fed, window_len_ - 1 - offset_);
  if (max_predictions_ > 0) wanted = std::min(wanted, max_predictions_ - predicted_);
  const std::span<const int32_t> tokens =
      ids_.subspan(static_cast<size_t>(window_begin_ + offset_), static_cast<size_t>(fed));
  const SeqChunk chunk{seq_, tokens, OutputRows::None};
  BatchDesc batch = build_batch(*cache_, std::span<const SeqChunk>(&chunk, 1));
  for (int64_t r = 0; r < wanted; ++r) batch.output_rows.push_back(static_cast<int32_t>(r));
  logits_.resize(static_cast<size_t>(wanted) * static_cast<size_t>(model_.info().vocab));
  model_.forward(batch, cache_->pool(), logits_);
  cache_->commit(seq_, fed);
  first_target_ = window_begin_ + offset_ + 1;
  offset_ += fed;
  rows_ = wanted;
  predicted_ += wanted;
  return wanted > 0 || next();
}

}  // namespace infera::cli
