// Each subcommand lives in its own file and registers itself on the top-level CLI11 app.
// Handlers throw infera::Error on bad input; main() turns that into one line on stderr + exit 1.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace infera::cli {

void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_eval_command(CLI::App& app);       // quality gate: KL, top-1, perplexity vs a reference
void add_tokenize_commands(CLI::App& app);  // tokenize, detokenize
void add_chat_command(CLI::App& app);
void add_encoder_commands(CLI::App& app);  // embed, classify, fill-mask
void add_bench_command(CLI::App& app);
void add_decide_command(CLI::App& app);  // decision runtime

// The command line as typed, for records such as benchmark result files.
void remember_command_line(int argc, char** argv);
const std::string& command_line();
void add_quantize_command(CLI::App& app);  // HF folder -> GGUF

}  // namespace infera::cli
