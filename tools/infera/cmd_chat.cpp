// `infera chat`: an interactive conversation on the terminal. Each turn renders the whole
// conversation through the chat template (Qwen3's drops earlier turns' reasoning, so a turn's
// token prefix is not stable across turns) and streams the reply.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/generator.h"
#include "generation_options.h"
#include "infera/chat_template.h"
#include "infera/error.h"
#include "model_options.h"
#include "tokenizer/utf8.h"

namespace infera::cli {
namespace {

struct ChatOptions {
  ModelOptions model;
  GenerationOptions generation;
  EngineOptions engine;
  std::string system;
  bool no_think = false;
};

void chat(const ChatOptions& o) {
  LoadedModel m = load_model(o.model, false);
  if (!m.tokenizer)
    throw InvalidArgument(
        "chat needs a tokenizer: the model folder has no tokenizer.json; "
        "pass --tokenizer PATH");
  std::printf("Model: %s\nType a message; an empty line or end of input quits.\n",
              m.model->info().summary().c_str());
  std::vector<ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({.role = "system", .content = o.system});
  Generator generator(*m.model, o.engine.to_generator_options(o.model.matmul_precision));
  std::string line;
  for (;;) {
    std::printf("\n> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line.empty()) break;
    // A line that is not UTF-8 is the user's to retype: reject it and keep the conversation.
    if (const auto bad = tok::first_invalid_utf8(line)) {
      std::fprintf(stderr, "infera: line not sent: not valid UTF-8 (byte offset %zu)\n", *bad);
      continue;
    }
    messages.push_back({.role = "user", .content = line});
    GenerationRequest request = o.generation.to_request(m.generation);
    request.prompt = m.tokenizer->encode(apply_chat_template(
        messages, {.add_generation_prompt = true, .enable_thinking = !o.no_think}));
    StreamDecoder stream(*m.tokenizer, /*skip_special_tokens=*/true);
    const GenerationResult result = generator.generate(request, [&](int32_t id) {
      const std::string piece = stream.push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    const std::string rest = stream.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n[%lld tokens, %.2f tok/s]\n",
                static_cast<long long>(result.stats.generated_tokens),
                result.stats.decode_tokens_per_second());
    messages.push_back({.role = "assistant", .content = m.tokenizer->decode(result.tokens, true)});
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto opts = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Talk with a model on the terminal");
  opts->model.matmul_precision = kGenerationMatmulPrecision;
  opts->model.add_to(*cmd);
  cmd->add_option("--system", opts->system, "System message");
  cmd->add_flag("--no-think", opts->no_think, "Disable thinking (enable_thinking=false)");
  opts->generation.add_to(*cmd);
  opts->engine.add_to(*cmd);
  cmd->callback([opts] { chat(*opts); });
}

}  // namespace infera::cli
