// The --input-ids-json file of `infera embed / classify / fill-mask`, through the same parsing
// (tools/infera/encoder_input.h) and unpadding (model/encoder.h) as the commands. Every input is
// either refused with FormatError / InvalidArgument or yields non-empty sequences of valid ids
// that pack into a batch whose rows and positions line up.
#include <cstdint>
#include <string>

#include "encoder_input.h"
#include "fuzz_common.h"
#include "infera/error.h"
#include "model/encoder.h"

using namespace infera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  cli::EncoderIdsFile f;
  try {
    f = cli::parse_encoder_ids(text, "ids.json");
  } catch (const FormatError&) {
    return 0;
  }
  fuzz::check(!f.input_ids.empty(), "accepted a file with no sequence");
  std::vector<std::vector<int32_t>> seqs = f.input_ids;
  if (!f.attention_mask.empty()) {
    fuzz::check(f.attention_mask.size() == f.input_ids.size(), "mask rows differ from id rows");
    PaddedIds p{.batch = static_cast<int64_t>(f.input_ids.size()),
                .length = static_cast<int64_t>(f.input_ids[0].size())};
    for (size_t b = 0; b < f.input_ids.size(); ++b) {
      fuzz::check(f.input_ids[b].size() == f.input_ids[0].size() &&
                      f.attention_mask[b].size() == f.input_ids[b].size(),
                  "accepted rows of different lengths");
      p.ids.insert(p.ids.end(), f.input_ids[b].begin(), f.input_ids[b].end());
      p.attention_mask.insert(p.attention_mask.end(), f.attention_mask[b].begin(),
                              f.attention_mask[b].end());
    }
    try {
      seqs = unpad(p);
    } catch (const InvalidArgument&) {
      return 0;
    }
  }
  const BatchDesc batch = encoder_batch(seqs);
  fuzz::check(batch.num_seqs() == static_cast<int64_t>(seqs.size()), "sequence count changed");
  for (size_t s = 0; s < seqs.size(); ++s) {
    fuzz::check(!seqs[s].empty(), "an empty sequence was accepted");
    for (int32_t id : seqs[s]) fuzz::check(id >= 0, "a negative id was accepted");
    const int32_t start = batch.query_start[s];
    for (size_t i = 0; i < seqs[s].size(); ++i)
      fuzz::check(batch.positions[static_cast<size_t>(start) + i] == static_cast<int32_t>(i) &&
                      batch.tokens[static_cast<size_t>(start) + i] == seqs[s][i],
                  "packed rows do not match the sequences");
  }
  return 0;
}
