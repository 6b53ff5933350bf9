// tokenizer.json `post_processor`: what encode adds around the tokenized text(s) when asked for
// special tokens — TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (ids
// unchanged) and Sequence — and the type id of every token, for single texts and pairs. Mirrors
// tokenizers' PostProcessor::process: type ids are first set to the sequence index (0, 1), then
// the processor rewrites the list of encodings, which is finally concatenated.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/json_util.h"

namespace infera::tok {

struct EncodingPart {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // tokenizers' process_encodings. `parts` holds one (single) or two (pair) encodings on entry.
  virtual void process(std::vector<EncodingPart>& parts, bool add_special_tokens) const = 0;
};

// Null JSON yields nullptr (the parts are only concatenated). Unknown types and templates that
// name a missing special token throw FormatError.
std::unique_ptr<PostProcessor> make_post_processor(const json& j);

}  // namespace infera::tok
