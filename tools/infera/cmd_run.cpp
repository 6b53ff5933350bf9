// `infera run`: generate from a prompt, streaming the text, then report time and tokens/s.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "engine/generator.h"
#include "generation_options.h"
#include "infera/chat_template.h"
#include "infera/error.h"
#include "model_options.h"

namespace infera::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  GenerationOptions generation;
  std::string prompt;
  std::string prompt_ids;
  std::string system;
  int64_t synthetic_prompt = 0;
  bool raw = false;
  bool no_think = false;
  bool json = false;
};

std::string one_line(std::string s, size_t limit = 200) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  return s;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

void run(const RunOptions& o) {
  const int given = !o.prompt.empty() + !o.prompt_ids.empty() + (o.synthetic_prompt > 0);
  if (given != 1)
    throw InvalidArgument("give exactly one of --prompt, --prompt-ids or --synthetic-prompt");
  LoadedModel m = load_model(o.model, o.json);
  const ModelInfo& info = m.model->info();

  GenerationRequest request = o.generation.to_request(m.generation);
  request.sampling.validate();  // before any output, so a bad option is the only line printed
  std::string shown_prompt;
  if (!o.prompt.empty()) {
    if (!m.tokenizer)
      throw InvalidArgument(
          "--prompt needs a tokenizer: the model folder has no tokenizer.json; "
          "pass --tokenizer PATH or use --prompt-ids");
    std::string text = o.prompt;
    if (!o.raw) {
      std::vector<ChatMessage> messages;
      if (!o.system.empty()) messages.push_back({.role = "system", .content = o.system});
      messages.push_back({.role = "user", .content = o.prompt});
      text = apply_chat_template(messages,
                                 {.add_generation_prompt = true, .enable_thinking = !o.no_think});
    }
    request.prompt = m.tokenizer->encode(text);
    shown_prompt = o.prompt;
  } else if (!o.prompt_ids.empty()) {
    request.prompt = parse_id_list(o.prompt_ids, "--prompt-ids");
    shown_prompt = m.tokenizer ? m.tokenizer->decode(request.prompt) : o.prompt_ids;
  } else {
    // Deterministic ids spread over the vocabulary: a stand-in prompt of a given length for
    // speed measurements, where the text does not matter.
    for (int64_t i = 0; i < o.synthetic_prompt; ++i)
      request.prompt.push_back(static_cast<int32_t>((1000 + i * 7919) % info.vocab));
    shown_prompt = "<" + std::to_string(o.synthetic_prompt) + " synthetic tokens>";
  }

  if (!o.json) {
    std::printf("Model: %s\n", info.summary().c_str());
    std::printf("Backend: %s, weights %s\n", m.model->backend().name().c_str(),
                std::string(dtype_name(info.weight_dtype)).c_str());
    std::printf("Prompt: %s (%zu tokens)\n", one_line(shown_prompt).c_str(), request.prompt.size());
    std::printf("Output: ");
    std::fflush(stdout);
  }
  std::unique_ptr<StreamDecoder> stream;
  if (m.tokenizer) stream = std::make_unique<StreamDecoder>(*m.tokenizer);
  Generator generator(*m.model);
  const GenerationResult result = generator.generate(request, [&](int32_t id) {
    if (!o.json) {
      if (stream) {
        const std::string piece = stream->push(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
      } else {
        std::printf("%d ", id);
      }
      std::fflush(stdout);
    }
    return true;
  });
  const GenerationStats& s = result.stats;
  if (o.json) {
    nlohmann::json j = {{"model", info.summary()},
                        {"prompt_ids", request.prompt},
                        {"ids", result.tokens},
                        {"finish_reason", result.finish_reason},
                        {"load_seconds", m.load_seconds},
                        {"prompt_tokens", s.prompt_tokens},
                        {"generated_tokens", s.generated_tokens},
                        {"prefill_seconds", s.prefill_seconds},
                        {"decode_seconds", s.decode_seconds},
                        {"prefill_tokens_per_second", s.prefill_tokens_per_second()},
                        {"decode_tokens_per_second", s.decode_tokens_per_second()},
                        {"peak_rss_mb", peak_rss_mb()}};
    if (m.tokenizer) j["text"] = m.tokenizer->decode(result.tokens);
    std::cout << j.dump() << std::endl;
    return;
  }
  if (stream) {
    const std::string rest = stream->flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  // The first generated token comes out of the prefill; decode speed counts the steps after it.
  std::printf(
      "\n\nTime: load %.2f s | prefill %lld tokens in %.3f s (%.1f tok/s) | decode %lld "
      "tokens in %.3f s (%.2f tok/s) | generated %lld, finish: %s\n",
      m.load_seconds, static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
      s.prefill_tokens_per_second(), static_cast<long long>(s.decode_steps), s.decode_seconds,
      s.decode_tokens_per_second(), static_cast<long long>(s.generated_tokens),
      result.finish_reason.c_str());
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt");
  cmd->footer(
      "Examples:\n"
      "  infera run --model ~/models/Qwen3-0.6B --prompt \"Why is the sky blue?\"\n"
      "  infera run --model ../shared/fixtures/qwen3-micro --prompt-ids 785,6722,315,9625,374\n"
      "  infera run --model ../shared/models/qwen3-0.6b --dummy-weights --synthetic-prompt 128 "
      "--max-tokens 128 --ignore-eos");
  opts->model.add_to(*cmd);
  cmd->add_option("-p,--prompt", opts->prompt,
                  "Prompt text; wrapped in the model's chat template unless --raw");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt as token ids: 785,6722,315");
  cmd->add_option("--synthetic-prompt", opts->synthetic_prompt,
                  "A stand-in prompt of N token ids (speed measurements)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--system", opts->system, "System message for the chat template");
  cmd->add_flag("--raw", opts->raw, "Feed the prompt text as is, without the chat template");
  cmd->add_flag("--no-think", opts->no_think,
                "Disable thinking (Qwen3: enable_thinking=false, an empty think block)");
  cmd->add_flag("--json", opts->json, "Print one JSON object (ids, text, timings) instead");
  opts->generation.add_to(*cmd);
  cmd->callback([opts] { run(*opts); });
}

}  // namespace infera::cli
