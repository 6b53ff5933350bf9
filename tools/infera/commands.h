// Each subcommand lives in its own file and registers itself on the top-level CLI11 app.
// Handlers throw infera::Error on bad input; main() turns that into one line on stderr + exit 1.
#pragma once

#include <CLI/CLI.hpp>

namespace infera::cli {

void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);  // tokenize, detokenize
void add_chat_command(CLI::App& app);
void add_encoder_commands(CLI::App& app);  // embed, classify, fill-mask

}  // namespace infera::cli
