// The token-id file of `infera embed / classify / fill-mask` (--input-ids-json). Kept apart from
// the commands so that the fuzz target (tests/fuzz/fuzz_encoder_ids.cpp) runs the same parsing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infera::cli {

struct EncoderIdsFile {
  std::vector<std::vector<int32_t>> input_ids;       // one row per sequence, none empty
  std::vector<std::vector<int32_t>> attention_mask;  // empty, or the same shape as input_ids
};

// `[[ids], ...]` (sequences of any lengths), `[ids]` (one sequence), or `{"input_ids": [[...]],
// "attention_mask": [[...]]}` (right-padded rows of one length, as tokenizers pads). Ids are
// integers in [0, 2^31); mask values are not interpreted here (unpad() checks them). Throws
// FormatError naming `origin` for bad JSON (nesting capped) or a wrong shape.
EncoderIdsFile parse_encoder_ids(std::string_view text, const std::string& origin);

}  // namespace infera::cli
