// `infera run`: generate from a prompt, streaming the text, then report time and tokens/s.
#include <sys/resource.h>

#include <chrono>
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
  EngineOptions engine;
  std::string prompt;
  std::string prompt_file;
  int64_t batch = 1;
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

// Lines of a prompt file: one prompt per non-empty line.
std::vector<std::string> read_prompt_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot open --prompt-file " + path);
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) throw InvalidArgument("--prompt-file " + path + " has no prompts");
  return prompts;
}

// The ids of one prompt text (chat-templated unless --raw).
std::vector<int32_t> encode_prompt(const RunOptions& o, const LoadedModel& m,
                                   const std::string& prompt) {
  if (!m.tokenizer)
    throw InvalidArgument(
        "a text prompt needs a tokenizer: the model folder has no tokenizer.json; "
        "pass --tokenizer PATH or use --prompt-ids");
  if (o.raw) return m.tokenizer->encode(prompt);
  std::vector<ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({.role = "system", .content = o.system});
  messages.push_back({.role = "user", .content = prompt});
  return m.tokenizer->encode(apply_chat_template(
      messages, {.add_generation_prompt = true, .enable_thinking = !o.no_think}));
}

struct Prompt {
  std::vector<int32_t> ids;
  std::string shown;
};

std::vector<Prompt> build_prompts(const RunOptions& o, const LoadedModel& m) {
  const int given =
      !o.prompt.empty() + !o.prompt_ids.empty() + (o.synthetic_prompt > 0) + !o.prompt_file.empty();
  if (given != 1)
    throw InvalidArgument(
        "give exactly one of --prompt, --prompt-file, --prompt-ids or --synthetic-prompt");
  std::vector<Prompt> prompts;
  const int64_t vocab = m.model->info().vocab;
  if (!o.prompt_file.empty()) {
    for (const std::string& text : read_prompt_file(o.prompt_file))
      prompts.push_back({encode_prompt(o, m, text), text});
  } else if (!o.prompt.empty()) {
    prompts.push_back({encode_prompt(o, m, o.prompt), o.prompt});
  } else if (!o.prompt_ids.empty()) {
    Prompt p{parse_id_list(o.prompt_ids, "--prompt-ids"), o.prompt_ids};
    if (m.tokenizer) p.shown = m.tokenizer->decode(p.ids);
    prompts.push_back(std::move(p));
  }
  // --batch N: N copies of each prompt; synthetic prompts differ per copy, so that no two
  // sequences of a speed measurement are the same.
  std::vector<Prompt> out;
  for (int64_t copy = 0; copy < o.batch; ++copy) {
    if (o.synthetic_prompt > 0) {
      Prompt p;
      for (int64_t i = 0; i < o.synthetic_prompt; ++i)
        p.ids.push_back(static_cast<int32_t>((1000 + copy * 104729 + i * 7919) % vocab));
      p.shown = "<" + std::to_string(o.synthetic_prompt) + " synthetic tokens>";
      out.push_back(std::move(p));
    }
    for (const Prompt& p : prompts) out.push_back(p);
  }
  return out;
}

nlohmann::json result_json(const ModelInfo& info, const LoadedModel& m,
                           const std::vector<int32_t>& prompt, const GenerationResult& result) {
  const GenerationStats& s = result.stats;
  nlohmann::json j = {{"model", info.summary()},
                      {"prompt_ids", prompt},
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
  return j;
}

void print_time_line(const LoadedModel& m, const GenerationResult& result) {
  const GenerationStats& s = result.stats;
  // The first generated token comes out of the prefill; decode speed counts the steps after it.
  std::printf(
      "Time: load %.2f s | prefill %lld tokens in %.3f s (%.1f tok/s) | decode %lld "
      "tokens in %.3f s (%.2f tok/s) | generated %lld, finish: %s\n",
      m.load_seconds, static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
      s.prefill_tokens_per_second(), static_cast<long long>(s.decode_steps), s.decode_seconds,
      s.decode_tokens_per_second(), static_cast<long long>(s.generated_tokens),
      result.finish_reason.c_str());
}

void run(const RunOptions& o) {
  LoadedModel m = load_model(o.model, o.json);
  const ModelInfo& info = m.model->info();
  GenerationRequest base = o.generation.to_request(m.generation);
  base.sampling.validate();  // before any output, so a bad option is the only line printed
  const std::vector<Prompt> prompts = build_prompts(o, m);
  std::vector<GenerationRequest> requests(prompts.size(), base);
  for (size_t i = 0; i < prompts.size(); ++i) requests[i].prompt = prompts[i].ids;
  const GeneratorOptions engine = o.engine.to_generator_options(o.model.matmul_precision);
  Generator generator(*m.model, engine);
  const bool single = requests.size() == 1;

  if (!o.json) {
    std::printf("Model: %s\n", info.summary().c_str());
    std::printf("Backend: %s, weights %s, KV cache %s\n", m.model->backend().name().c_str(),
                info.weight_format.c_str(), std::string(dtype_name(engine.kv_dtype)).c_str());
    if (single) {
      std::printf("Prompt: %s (%zu tokens)\nOutput: ", one_line(prompts[0].shown).c_str(),
                  requests[0].prompt.size());
    } else {
      std::printf("Requests: %zu, run together\n", requests.size());
    }
    std::fflush(stdout);
  }
  // One request streams its text as it comes; several print each result when all are done.
  std::unique_ptr<StreamDecoder> stream;
  if (m.tokenizer && single && !o.json) stream = std::make_unique<StreamDecoder>(*m.tokenizer);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<GenerationResult> results =
      generator.generate(requests, [&](size_t, int32_t id) {
        if (single && !o.json) {
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
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    for (size_t i = 0; i < results.size(); ++i)
      std::cout << result_json(info, m, requests[i].prompt, results[i]).dump() << std::endl;
    return;
  }
  if (single) {
    if (stream) {
      const std::string rest = stream->flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    std::printf("\n\n");
    print_time_line(m, results[0]);
    return;
  }
  int64_t generated = 0, prompt_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string text = m.tokenizer ? m.tokenizer->decode(results[i].tokens) : "";
    std::printf("\n[%zu] Prompt: %s (%zu tokens)\n[%zu] Output: %s\n", i,
                one_line(prompts[i].shown).c_str(), requests[i].prompt.size(), i,
                m.tokenizer ? text.c_str() : "(no tokenizer: ids only)");
    generated += results[i].stats.generated_tokens;
    prompt_tokens += results[i].stats.prompt_tokens;
  }
  std::printf(
      "\nTime: load %.2f s | %zu requests, %lld prompt tokens, %lld generated in %.3f s "
      "(%.2f generated tok/s overall)\n",
      m.load_seconds, results.size(), static_cast<long long>(prompt_tokens),
      static_cast<long long>(generated), wall,
      wall > 0 ? static_cast<double>(generated) / wall : 0);
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
  opts->model.matmul_precision = kGenerationMatmulPrecision;
  opts->model.add_to(*cmd);
  cmd->add_option("-p,--prompt", opts->prompt,
                  "Prompt text; wrapped in the model's chat template unless --raw");
  cmd->add_option("--prompt-file", opts->prompt_file,
                  "Several prompts, one per line, generated together in one batch");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt as token ids: 785,6722,315");
  cmd->add_option("--batch", opts->batch,
                  "Run N copies of the request together (throughput); synthetic prompts differ")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--synthetic-prompt", opts->synthetic_prompt,
                  "A stand-in prompt of N token ids (speed measurements)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--system", opts->system, "System message for the chat template");
  cmd->add_flag("--raw", opts->raw, "Feed the prompt text as is, without the chat template");
  cmd->add_flag("--no-think", opts->no_think,
                "Disable thinking (Qwen3: enable_thinking=false, an empty think block)");
  cmd->add_flag("--json", opts->json, "Print one JSON object (ids, text, timings) instead");
  opts->generation.add_to(*cmd);
  opts->engine.add_to(*cmd);
  cmd->callback([opts] { run(*opts); });
}

}  // namespace infera::cli
