// `infera logits`: raw float32 logits of a prompt, for parity checks against other engines.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"
#include "model_options.h"

namespace infera::cli {
namespace {

struct LogitsOptions {
  ModelOptions model;
  std::string prompt_ids;
  std::string prompt;
  std::string positions = "last";
  std::string out;
};

std::vector<int64_t> parse_positions(const std::string& spec, int64_t n) {
  std::vector<int64_t> rows;
  if (spec == "all") {
    for (int64_t i = 0; i < n; ++i) rows.push_back(i);
  } else if (spec == "last") {
    rows.push_back(n - 1);
  } else {
    for (int32_t p : parse_id_list(spec, "--positions")) {
      if (p >= n)
        throw InvalidArgument("--positions: " + std::to_string(p) + " is past the prompt's " +
                              std::to_string(n) + " tokens");
      rows.push_back(p);
    }
  }
  return rows;
}

void logits(const LogitsOptions& o) {
  if (o.prompt_ids.empty() == o.prompt.empty())
    throw InvalidArgument("give exactly one of --prompt-ids or --prompt");
  LoadedModel m = load_model(o.model, false);
  std::vector<int32_t> ids;
  if (!o.prompt.empty()) {
    if (!m.tokenizer) throw InvalidArgument("--prompt needs a tokenizer; use --prompt-ids");
    ids = m.tokenizer->encode(o.prompt);  // raw text: no chat template, as a parity check wants
  } else {
    ids = parse_id_list(o.prompt_ids, "--prompt-ids");
  }
  if (ids.empty()) throw InvalidArgument("the prompt has no tokens");
  const auto n = static_cast<int64_t>(ids.size());
  const std::vector<int64_t> rows = parse_positions(o.positions, n);
  const int64_t vocab = m.model->info().vocab;
  for (int32_t id : ids)
    if (id >= vocab)
      throw InvalidArgument("--prompt-ids: " + std::to_string(id) +
                            " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  // One sequence in one step, with the asked-for rows as its outputs.
  const int64_t block = 32;
  KvCache cache(m.model->backend(), m.model->kv_shape(),
                {.block_size = block, .num_blocks = (n + block - 1) / block});
  const SeqId seq = cache.add_sequence();
  cache.reserve(seq, n);
  const SeqChunk chunk{seq, ids, OutputRows::None};
  BatchDesc batch = build_batch(cache, std::span<const SeqChunk>(&chunk, 1));
  for (int64_t r : rows) batch.output_rows.push_back(static_cast<int32_t>(r));
  std::vector<float> values(rows.size() * static_cast<size_t>(vocab));
  m.model->forward(batch, cache.pool(), values);
  std::ofstream out(o.out, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) throw IoError("cannot write " + o.out);
  std::fprintf(stderr, "Wrote %zu x %lld float32 logits (row-major: positions x vocab) to %s\n",
               rows.size(), static_cast<long long>(vocab), o.out.c_str());
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto opts = std::make_shared<LogitsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "logits", "Write the raw float32 logits of a prompt to a file (parity checks)");
  opts->model.add_to(*cmd);
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt as token ids: 785,6722,315");
  cmd->add_option("--prompt", opts->prompt, "Prompt text, tokenized as is (no chat template)");
  cmd->add_option("--positions", opts->positions,
                  "Which prompt positions: all, last, or a list like 0,3")
      ->capture_default_str();
  cmd->add_option("-o,--out", opts->out, "Output file (.f32)")->required();
  cmd->callback([opts] { logits(*opts); });
}

}  // namespace infera::cli
